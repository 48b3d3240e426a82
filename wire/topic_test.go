package wire

import (
	"encoding/json"
	"testing"
)

// The broker's admin answers marshal these wrappers with encoding/json; the
// field names and order are what RocketMQ's admin tools read.
func TestWrapperJSON(t *testing.T) {
	tw := TopicConfigSerializeWrapper{
		TopicConfigTable: map[string]TopicConfig{"T": {TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: PermRead | PermWrite, TopicFilterType: "SINGLE_TAG"}},
		DataVersion:      DataVersion{Timestamp: 1700000000000, Counter: 2},
	}
	const wantTopics = `{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false}},` +
		`"dataVersion":{"stateVersion":0,"timestamp":1700000000000,"counter":2}}`
	if b, _ := json.Marshal(tw); string(b) != wantTopics {
		t.Fatalf("topic wrapper\n got %s\nwant %s", b, wantTopics)
	}
	gw := SubscriptionGroupWrapper{
		SubscriptionGroupTable: map[string]SubscriptionGroupConfig{"g": DefaultSubscriptionGroupConfig("g")},
		DataVersion:            DataVersion{Counter: 1},
	}
	const wantGroups = `{"subscriptionGroupTable":{"g":{"groupName":"g","consumeEnable":true,"consumeFromMinEnable":true,"consumeBroadcastEnable":true,` +
		`"consumeMessageOrderly":false,"retryQueueNums":1,"retryMaxTimes":16,"brokerId":0,"whichBrokerWhenConsumeSlowly":1,` +
		`"notifyConsumerIdsChangedEnable":true,"groupSysFlag":0}},"dataVersion":{"stateVersion":0,"timestamp":0,"counter":1}}`
	if b, _ := json.Marshal(gw); string(b) != wantGroups {
		t.Fatalf("group wrapper\n got %s\nwant %s", b, wantGroups)
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"":                    false,
		"TopicTest":           true,
		"%RETRY%group_a-1|x":  true,
		"bad topic":           false,
		"dot.topic":           false,
		"slash/topic":         false,
		"unicode-é":           false,
		"CID_ONSAPI_OWNER_42": true,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}
