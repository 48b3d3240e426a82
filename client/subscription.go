package client

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// SubAll is the expression that matches every tag.
const SubAll = "*"

// ExpressionTypeTag is the only expression type the SDK builds; brokers
// also know "SQL92".
const ExpressionTypeTag = "TAG"

// SubscriptionData is one topic subscription of a consumer group, as it
// travels in heartbeats and pull requests (RocketMQ's SubscriptionData).
type SubscriptionData struct {
	// ClassFilterMode is RocketMQ's removed class filter; always false.
	ClassFilterMode bool `json:"classFilterMode"`
	// Topic is the subscribed topic.
	Topic string `json:"topic"`
	// SubString is the expression as given ("TagA || TagB", "*").
	SubString string `json:"subString"`
	// TagsSet holds the tags of a tag expression; empty means all.
	TagsSet []string `json:"tagsSet"`
	// CodeSet holds the Java String.hashCode of each tag; brokers filter
	// consume-queue entries on it.
	CodeSet []int32 `json:"codeSet"`
	// SubVersion orders subscription changes (creation time in ms).
	SubVersion int64 `json:"subVersion"`
	// ExpressionType is "TAG".
	ExpressionType string `json:"expressionType"`
}

// ParseTagExpression builds the subscription of topic for a tag
// expression (FilterAPI.buildSubscriptionData): "" and "*" subscribe to
// everything; otherwise tags are split on "||", trimmed, and empty ones
// dropped. An expression with no tag left is an error. version is the
// SubVersion (callers pass the current time in ms).
func ParseTagExpression(topic, expr string, version int64) (*SubscriptionData, error) {
	sd := &SubscriptionData{Topic: topic, SubString: expr, SubVersion: version, ExpressionType: ExpressionTypeTag,
		TagsSet: []string{}, CodeSet: []int32{}}
	if strings.TrimSpace(expr) == "" || expr == SubAll {
		sd.SubString = SubAll
		return sd, nil
	}
	for _, tag := range strings.Split(expr, "||") {
		tag = strings.TrimSpace(tag)
		if tag == "" || slices.Contains(sd.TagsSet, tag) {
			continue
		}
		sd.TagsSet = append(sd.TagsSet, tag)
		sd.CodeSet = append(sd.CodeSet, javaStringHash(tag))
	}
	if len(sd.TagsSet) == 0 {
		return nil, fmt.Errorf("%w: tag expression %q for topic %q has no tag", ErrInvalidOption, expr, topic)
	}
	return sd, nil
}

// MatchesTag reports whether a message with tags passes the subscription,
// the client-side re-check of PullAPIWrapper.processPullResult (brokers
// filter on hash codes, which can collide): everything passes a "*"
// subscription; otherwise the message's tags must be one of TagsSet.
func (s *SubscriptionData) MatchesTag(tags string) bool {
	if len(s.TagsSet) == 0 {
		return true
	}
	return tags != "" && slices.Contains(s.TagsSet, tags)
}

// JSON renders the subscription as brokers expect it in heartbeats.
func (s *SubscriptionData) JSON() []byte {
	b, _ := json.Marshal(s)
	return b
}
