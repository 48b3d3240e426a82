package broker

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestOffsetCommitNeedsGroupConfig runs a client that heartbeats new group
// names and commits an offset for each, against a real 3-node group whose
// auto-creation limit is reached: no config is created, so no commit may
// be stored (offsets outlive the connection, and the names are endless),
// each refusal names a limit (autoCreateMaxTopics, or the rate the
// heartbeat's attempts used up), and a configured group still commits.
func TestOffsetCommitNeedsGroupConfig(t *testing.T) {
	pc := startRealCluster(t, func(cfg *BrokerConfig) { cfg.AutoCreateMaxTopics = 1 })
	l := pc.leader()
	addr, c := pc.nodes[l].Addr(), pc.nodes[l]
	pc.createTopic(addr, "T1", 4)
	keysBefore := len(c.rep.State().ConsumerOffsets())

	var groups []wire.HeartbeatConsumerData
	for i := range 20 {
		groups = append(groups, wire.HeartbeatConsumerData{GroupName: "ROGUE-" + strconv.Itoa(i), ConsumeType: wire.ConsumeTypePush,
			MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
			SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "T1", SubString: "*", SubVersion: 1}}})
	}
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@rogue", ConsumerDataSet: groups})
	if resp := pc.call(addr, remoting.RequestHeartBeat, nil, hb); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %d %s", resp.Code, resp.Remark)
	}
	commit := func(group string, queue int) *remoting.RemotingCommand {
		return pc.call(addr, remoting.RequestUpdateConsumerOffset, map[string]string{
			"consumerGroup": group, "topic": "T1", "queueId": strconv.Itoa(queue), "commitOffset": "7"}, nil)
	}
	for _, g := range groups {
		for q := range 4 {
			resp := commit(g.GroupName, q)
			if resp.Code == remoting.ResponseSuccess || !strings.Contains(resp.Remark, "offset commit refused") ||
				!strings.Contains(resp.Remark, "autoCreate") {
				t.Fatalf("commit of unconfigured group %s: code %d remark %q; want a refusal naming the auto-creation limit",
					g.GroupName, resp.Code, resp.Remark)
			}
		}
	}
	c.offsets.mu.Lock()
	pending := len(c.offsets.pending)
	c.offsets.mu.Unlock()
	if pending != 0 {
		t.Fatalf("%d refused commits are pending replication", pending)
	}
	for key := range c.rep.State().ConsumerOffsets() {
		if _, group, _ := strings.Cut(key, "@"); strings.HasPrefix(group, "ROGUE-") {
			t.Fatalf("offset stored under %s, a group with no config", key)
		}
	}

	// A configured group commits.
	sg, _ := json.Marshal(wire.DefaultSubscriptionGroupConfig("GOOD"))
	if resp := pc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, sg); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("updateSubGroup GOOD: %d %s", resp.Code, resp.Remark)
	}
	if resp := commit("GOOD", 3); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("commit of configured group: %d %s", resp.Code, resp.Remark)
	}
	waitOffset(t, c, "GOOD", "T1", 3, 7)
	if got := len(c.rep.State().ConsumerOffsets()); got != keysBefore+1 {
		t.Fatalf("offset keys grew from %d to %d, want one new key", keysBefore, got)
	}
}

// TestOffsetCommitWithoutAutoCreate: with autoCreateSubscriptionGroup off
// a connected group without a config cannot commit (its pulls are refused
// too), while a system group (CID_RMQ_SYS_ prefix), which the broker
// serves regardless, gets its config and commits, as in RocketMQ.
func TestOffsetCommitWithoutAutoCreate(t *testing.T) {
	pc := startRealCluster(t, func(cfg *BrokerConfig) { cfg.AutoCreateSubscriptionGroup = false })
	l := pc.leader()
	addr, c := pc.nodes[l].Addr(), pc.nodes[l]
	pc.createTopic(addr, "T1", 2)
	sys := wire.SystemGroupPrefix + "TOOL"
	var groups []wire.HeartbeatConsumerData
	for _, g := range []string{"PLAIN", sys} {
		groups = append(groups, wire.HeartbeatConsumerData{GroupName: g, ConsumeType: wire.ConsumeTypePull,
			MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
			SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "T1", SubString: "*", SubVersion: 1}}})
	}
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@tool", ConsumerDataSet: groups})
	if resp := pc.call(addr, remoting.RequestHeartBeat, nil, hb); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %d %s", resp.Code, resp.Remark)
	}
	commit := func(group string) *remoting.RemotingCommand {
		return pc.call(addr, remoting.RequestUpdateConsumerOffset, map[string]string{
			"consumerGroup": group, "topic": "T1", "queueId": "1", "commitOffset": "5"}, nil)
	}
	if resp := commit("PLAIN"); resp.Code != remoting.ResponseSubscriptionGroupNotExist ||
		!strings.Contains(resp.Remark, "offset commit refused") || !strings.Contains(resp.Remark, "autoCreateSubscriptionGroup is false") {
		t.Fatalf("commit of unconfigured PLAIN: code %d remark %q", resp.Code, resp.Remark)
	}
	if resp := commit(sys); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("commit of system group %s: %d %s", sys, resp.Code, resp.Remark)
	}
	waitOffset(t, c, sys, "T1", 1, 5)
	if _, ok := c.rep.State().ConsumerOffset("PLAIN", "T1", 1); ok {
		t.Fatal("offset of unconfigured PLAIN stored")
	}
}
