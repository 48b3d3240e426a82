package broker

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestUpdateTopicRefusesUnknownFilterType: UPDATE_AND_CREATE_TOPIC with a
// topicFilterType other than SINGLE_TAG or MULTI_TAG is refused with
// SYSTEM_ERROR, as RocketMQ's broker refuses it (TopicFilterType.valueOf),
// and nothing is stored: stored, it would go into the broker's
// registrations, whose compact topic encoding splits fields on spaces
// (RocketMQ's name server refuses the value outright).
func TestUpdateTopicRefusesUnknownFilterType(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	for _, filter := range []string{"SQL92", "SINGLE_TAG {}", "single_tag"} {
		r := tc.call(addr, remoting.RequestUpdateAndCreateTopic, map[string]string{
			"topic": "FT", "defaultTopic": wire.TopicAutoCreate, "readQueueNums": "1", "writeQueueNums": "1",
			"perm": "6", "topicFilterType": filter, "topicSysFlag": "0", "order": "false"}, nil)
		if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "TopicFilterType") {
			t.Errorf("topicFilterType %q: %d %q; want SYSTEM_ERROR naming TopicFilterType", filter, r.Code, r.Remark)
		}
	}
	if r := tc.call(addr, remoting.RequestGetTopicConfig, map[string]string{"topic": "FT"}, nil); r.Code != remoting.ResponseTopicNotExist {
		t.Errorf("FT after refused creates: %d %s; want TOPIC_NOT_EXIST", r.Code, r.Body)
	}
	// The two RocketMQ values, and none (the default), are taken.
	for _, filter := range []string{"MULTI_TAG", "SINGLE_TAG", ""} {
		r := tc.call(addr, remoting.RequestUpdateAndCreateTopic, map[string]string{
			"topic": "FT", "defaultTopic": wire.TopicAutoCreate, "readQueueNums": "1", "writeQueueNums": "1",
			"perm": "6", "topicFilterType": filter, "topicSysFlag": "0", "order": "false"}, nil)
		if r.Code != remoting.ResponseSuccess {
			t.Errorf("topicFilterType %q: %d %s", filter, r.Code, r.Remark)
		}
	}
}
