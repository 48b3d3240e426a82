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
