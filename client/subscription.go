package client

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/raftmq/raftmq/wire"
)

// SubscriptionData is one topic subscription of a consumer group, as it
// travels in heartbeats and pull requests (wire.SubscriptionData). The SDK
// names it because ParseTagExpression and PullRequest hand it to users.
type SubscriptionData = wire.SubscriptionData

// ParseTagExpression builds the subscription of topic for a tag
// expression (FilterAPI.buildSubscriptionData): "" and "*" subscribe to
// everything; otherwise tags are split on "||", trimmed, and empty ones
// dropped. An expression with no tag left is an error. version is the
// SubVersion (callers pass the current time in ms).
func ParseTagExpression(topic, expr string, version int64) (*SubscriptionData, error) {
	sd := &SubscriptionData{Topic: topic, SubString: expr, SubVersion: version, ExpressionType: wire.ExpressionTypeTag,
		TagsSet: []string{}, CodeSet: json.RawMessage("[]")}
	if strings.TrimSpace(expr) == "" || expr == wire.SubAll {
		sd.SubString = wire.SubAll
		return sd, nil
	}
	var codes []int32
	for _, tag := range strings.Split(expr, "||") {
		tag = strings.TrimSpace(tag)
		if tag == "" || slices.Contains(sd.TagsSet, tag) {
			continue
		}
		sd.TagsSet = append(sd.TagsSet, tag)
		codes = append(codes, javaStringHash(tag))
	}
	if len(sd.TagsSet) == 0 {
		return nil, fmt.Errorf("%w: tag expression %q for topic %q has no tag", ErrInvalidOption, expr, topic)
	}
	sd.CodeSet, _ = json.Marshal(codes)
	return sd, nil
}

// MessageSelector chooses which messages of a topic a consumer receives
// (RocketMQ's MessageSelector): by tag (Tags) or by a SQL92 condition
// over message properties (SQL92). Build one with Tags or SQL92. An
// expression is at most 16 KiB: brokers refuse to filter by a longer one.
type MessageSelector struct {
	// Type is wire.ExpressionTypeTag or wire.ExpressionTypeSQL92.
	Type string
	// Expression is the tag expression or the SQL92 condition.
	Expression string
}

// Tags selects by tag expression, as Subscribe does: "*" (or "") for
// everything, "TagA || TagB" for either tag.
func Tags(expr string) MessageSelector {
	return MessageSelector{Type: wire.ExpressionTypeTag, Expression: expr}
}

// SQL92 selects the messages whose properties satisfy a SQL92 condition,
// e.g. "a >= 5 AND TAGS <> 'TagB'" (RocketMQ's grammar: comparisons,
// BETWEEN, IN, IS [NOT] NULL, AND/OR/NOT; TAGS is the message's tag).
// The brokers evaluate it and need enablePropertyFilter=true; a
// consumer's Start fails when a broker of a subscribed topic refuses the
// expression or does not filter by SQL92.
func SQL92(expr string) MessageSelector {
	return MessageSelector{Type: wire.ExpressionTypeSQL92, Expression: expr}
}

// maxSubscriptionLength is the longest expression raftmq brokers filter
// by (a longer one is refused on every pull).
const maxSubscriptionLength = 16 << 10

// buildSubscription is the subscription of topic for a selector
// (FilterAPI.build). A SQL92 condition is sent as written: the brokers
// compile it, and CHECK_CLIENT_CONFIG at Start reports a bad one.
func buildSubscription(topic string, sel MessageSelector, version int64) (*SubscriptionData, error) {
	switch {
	case len(sel.Expression) > maxSubscriptionLength:
		return nil, fmt.Errorf("%w: the expression for topic %q is %d bytes; brokers filter by at most %d", ErrInvalidOption, topic,
			len(sel.Expression), maxSubscriptionLength)
	case sel.Type == "" || strings.EqualFold(sel.Type, wire.ExpressionTypeTag):
		return ParseTagExpression(topic, sel.Expression, version)
	case !strings.EqualFold(sel.Type, wire.ExpressionTypeSQL92):
		return nil, fmt.Errorf("%w: selector type %q for topic %q: want %s or %s", ErrInvalidOption, sel.Type, topic,
			wire.ExpressionTypeTag, wire.ExpressionTypeSQL92)
	case strings.TrimSpace(sel.Expression) == "":
		return nil, fmt.Errorf("%w: empty SQL92 expression for topic %q", ErrInvalidOption, topic)
	}
	return &SubscriptionData{Topic: topic, SubString: sel.Expression, SubVersion: version,
		ExpressionType: wire.ExpressionTypeSQL92, TagsSet: []string{}, CodeSet: json.RawMessage("[]")}, nil
}
