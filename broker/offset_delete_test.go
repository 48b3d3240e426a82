package broker

import (
	"encoding/json"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestDeleteDropsPendingOffsets: deleting a topic, or a subscription group
// with cleanOffset (mqadmin deleteSubGroup -r true), takes its consumer
// offsets with it, including commits the leader still
// holds in its coalescer (a live consumer's commit, or the offsets of a
// skipAccumulatedMessage / resetOffsetByTime run just before). Flushed after
// the delete they would bring the offsets back: the deleted group would stay
// listed by brokerConsumeStats and topicList -c, and a group created again
// under the name would resume from them.
func TestDeleteDropsPendingOffsets(t *testing.T) {
	tc := startRealCluster(t, func(c *BrokerConfig) { c.ConsumerOffsetCommitCoalescer = time.Hour })
	l := tc.createTopicOnLeader("DT", 2)
	if tc.createTopicOnLeader("DT2", 2) != l {
		t.Fatal("leadership moved while creating the topics")
	}
	node := tc.nodes[l]
	addr := node.Addr()
	for _, topic := range []string{"DT", "DT2"} {
		for q := range 2 {
			if r := tc.call(addr, remoting.RequestSendMessage, sendExt(topic, q, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
				t.Fatalf("send: %d %s", r.Code, r.Remark)
			}
		}
	}
	body, _ := json.Marshal(wire.DefaultSubscriptionGroupConfig("DG"))
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group DG: %d %s", r.Code, r.Remark)
	}
	commit := func(topic string, q int) {
		t.Helper()
		ext := map[string]string{"consumerGroup": "DG", "topic": topic, "queueId": strconv.Itoa(q), "commitOffset": "1"}
		if r := tc.call(addr, remoting.RequestUpdateConsumerOffset, ext, nil); r.Code != remoting.ResponseSuccess {
			t.Fatalf("commit offset: %d %s", r.Code, r.Remark)
		}
	}
	offsets := func() []string {
		var keys []string
		for k := range tc.groups[l].State().ConsumerOffsets() {
			keys = append(keys, k)
		}
		return keys
	}

	// A group: one queue committed by a consumer, the topic reset by an admin.
	commit("DT", 0)
	if r := tc.call(addr, remoting.RequestInvokeBrokerToResetOffset, map[string]string{
		"topic": "DT", "group": "DG", "timestamp": "-1", "isForce": "true"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("skip accumulated: %d %s", r.Code, r.Remark)
	}
	commit("DT", 1)
	if r := tc.call(addr, remoting.RequestDeleteSubscriptionGroup, map[string]string{"groupName": "DG", "cleanOffset": "true"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delete group: %d %s", r.Code, r.Remark)
	}
	node.offsets.flush() // the coalescer's next tick
	if keys := offsets(); len(keys) != 0 {
		t.Fatalf("after deleteSubGroup -r true DG and a coalescer flush the broker holds offsets %v; want none", keys)
	}
	if _, ok := node.offsets.lookup("DG", "DT", 1); ok {
		t.Fatal("a pending offset of the deleted group DG is still served")
	}

	// A topic: its offsets go, another topic's stay.
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group DG again: %d %s", r.Code, r.Remark)
	}
	commit("DT", 0)
	commit("DT2", 0)
	if r := tc.call(addr, remoting.RequestDeleteTopicInBroker, map[string]string{"topic": "DT"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delete topic: %d %s", r.Code, r.Remark)
	}
	node.offsets.flush()
	if keys := offsets(); len(keys) != 1 || keys[0] != "DT2@DG" {
		t.Fatalf("after deleteTopic DT and a coalescer flush the broker holds offsets %v; want DT2@DG only", keys)
	}
}

// TestCommitDuringDeleteStaysDeleted: a consumer commit (or an admin's
// resetOffsetByTime or cloneGroupOffset) that arrives while a deleteTopic,
// or a deleteSubGroup -r true, is being replicated finds the topic and
// group still in the applied tables. Queued or proposed then and applied
// after the delete, it would bring the deleted offsets back (listed by
// consumerProgress and in every snapshot; a topic or group created again
// under the name would start from them). The commit must wait for the
// delete and be judged on the tables after it.
func TestCommitDuringDeleteStaysDeleted(t *testing.T) {
	t.Parallel()
	deleteTopic := map[string]string{"topic": "CT"}
	deleteGroup := map[string]string{"groupName": "CG", "cleanOffset": "true"}
	commit := map[string]string{"consumerGroup": "CG", "topic": "CT", "queueId": "0", "commitOffset": "7"}
	reset := map[string]string{"group": "CG", "topic": "CT", "timestamp": "-1", "isForce": "true"}
	clone := map[string]string{"srcGroup": "SG", "destGroup": "CG", "topic": "CT", "offline": "true"}
	pull := pullExt("CG", "CT", 0, 0, 0)
	pull["sysFlag"], pull["commitOffset"] = "1", "7" // a pull that commits (the Java push consumer's)
	for _, tt := range []struct {
		name     string
		del      int16
		delExt   map[string]string
		write    int16
		writeExt map[string]string
		want     int16 // the write's answer once the delete is applied (-1: any)
	}{
		{"commit/deleteTopic", remoting.RequestDeleteTopicInBroker, deleteTopic,
			remoting.RequestUpdateConsumerOffset, commit, remoting.ResponseTopicNotExist},
		{"commit/deleteSubGroup", remoting.RequestDeleteSubscriptionGroup, deleteGroup,
			remoting.RequestUpdateConsumerOffset, commit, remoting.ResponseSubscriptionGroupNotExist},
		{"reset/deleteTopic", remoting.RequestDeleteTopicInBroker, deleteTopic,
			remoting.RequestInvokeBrokerToResetOffset, reset, remoting.ResponseTopicNotExist},
		{"reset/deleteSubGroup", remoting.RequestDeleteSubscriptionGroup, deleteGroup,
			remoting.RequestInvokeBrokerToResetOffset, reset, remoting.ResponseSubscriptionGroupNotExist},
		// The pull is answered; its commit is skipped, not waited for.
		{"pull/deleteTopic", remoting.RequestDeleteTopicInBroker, deleteTopic,
			remoting.RequestPullMessage, pull, -1},
		// The source group's offsets go with the topic: nothing to clone.
		{"clone/deleteTopic", remoting.RequestDeleteTopicInBroker, deleteTopic,
			remoting.RequestCloneGroupOffset, clone, remoting.ResponseSuccess},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pc, rep := startFakeProc(t, func(c *BrokerConfig) { c.ConsumerOffsetCommitCoalescer = time.Hour })
			c := pc.nodes[0]
			addr := c.Addr()
			pc.createTopic(addr, "CT", 1)
			for _, g := range []string{"CG", "SG"} {
				body, _ := json.Marshal(wire.DefaultSubscriptionGroupConfig(g))
				if r := pc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body); r.Code != remoting.ResponseSuccess {
					t.Fatalf("create group %s: %d %s", g, r.Code, r.Remark)
				}
			}
			if tt.write == remoting.RequestCloneGroupOffset {
				if r := pc.call(addr, remoting.RequestUpdateConsumerOffset, map[string]string{
					"consumerGroup": "SG", "topic": "CT", "queueId": "0", "commitOffset": "7"}, nil); r.Code != remoting.ResponseSuccess {
					t.Fatalf("commit SG: %d %s", r.Code, r.Remark)
				}
				c.offsets.flush()
			}
			gate := make(chan struct{})
			rep.mu.Lock()
			rep.deleteGate = gate
			rep.mu.Unlock()

			deleted := make(chan *remoting.RemotingCommand, 1)
			go func() {
				req := remoting.NewRequest(tt.del, nil, nil)
				maps.Copy(req.ExtFields, tt.delExt)
				if tt.del == remoting.RequestDeleteTopicInBroker {
					deleted <- c.processDeleteTopic(t.Context(), req)
				} else {
					deleted <- c.processDeleteSubscriptionGroup(t.Context(), req)
				}
			}()
			testutil.WaitFor(t, 10*time.Second, "the delete under way", func() bool { return rep.deletes.Load() > 0 })

			written := make(chan *remoting.RemotingCommand, 1)
			go func() {
				req := remoting.NewRequest(tt.write, nil, nil)
				maps.Copy(req.ExtFields, tt.writeExt)
				switch tt.write {
				case remoting.RequestUpdateConsumerOffset:
					r, _ := c.processUpdateConsumerOffset(t.Context(), nil, req)
					written <- r
				case remoting.RequestInvokeBrokerToResetOffset:
					written <- c.processInvokeResetOffset(t.Context(), req)
				case remoting.RequestPullMessage:
					written <- pc.call(addr, tt.write, tt.writeExt, nil)
				default:
					written <- c.processCloneGroupOffset(t.Context(), req)
				}
			}()
			// The write may answer only once the delete is applied; give
			// it the time to answer early, as it would if it did not wait.
			var w *remoting.RemotingCommand
			select {
			case w = <-written:
			case <-time.After(500 * time.Millisecond):
			}
			close(gate)
			if r := <-deleted; r.Code != remoting.ResponseSuccess {
				t.Fatalf("delete: %d %s", r.Code, r.Remark)
			}
			if w == nil {
				w = <-written
			}
			c.offsets.flush() // the coalescer's next tick
			if offs := rep.State().ConsumerOffsets(); len(offs) != 0 {
				t.Fatalf("a write made during the delete was applied after it: the broker holds offsets %v; want none (write answered %d %s)",
					offs, w.Code, w.Remark)
			}
			if off, ok := c.offsets.lookup("CG", "CT", 0); ok {
				t.Fatalf("after the delete the broker serves offset %d of CT@CG", off)
			}
			if tt.want >= 0 && w.Code != tt.want {
				t.Fatalf("a write during the delete answered %d %s; want %d once the delete is applied", w.Code, w.Remark, tt.want)
			}
		})
	}
}
