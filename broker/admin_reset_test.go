package broker

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
)

// TestResetOffsetOneQueue: RocketMQ 5's mqadmin resetOffsetByTime -b -q -o
// resets one queue to an explicit offset: it sends
// INVOKE_BROKER_TO_RESET_OFFSET with queueId and offset (timestamp 0,
// isForce false). Only that queue moves, to that offset; the others keep
// their progress. A queue or offset the topic does not have is an error.
func TestResetOffsetOneQueue(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "RQ", 2)
	for q := range 2 {
		for range 3 {
			if r := tc.call(addr, remoting.RequestSendMessage, sendExt("RQ", q, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
				t.Fatalf("send: %d %s", r.Code, r.Remark)
			}
		}
	}
	offset := func(q int) int64 {
		r := tc.call(addr, remoting.RequestQueryConsumerOffset, map[string]string{"consumerGroup": "RG", "topic": "RQ", "queueId": strconv.Itoa(q)}, nil)
		if r.Code != remoting.ResponseSuccess {
			return -1
		}
		n, _ := strconv.ParseInt(r.ExtFields["offset"], 10, 64)
		return n
	}
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"RG"}`)); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group: %d %s", r.Code, r.Remark)
	}
	for q := range 2 {
		if r := tc.call(addr, remoting.RequestUpdateConsumerOffset, map[string]string{
			"consumerGroup": "RG", "topic": "RQ", "queueId": strconv.Itoa(q), "commitOffset": "3"}, nil); r.Code != remoting.ResponseSuccess {
			t.Fatalf("commit offset: %d %s", r.Code, r.Remark)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "both queues committed at 3", func() bool { return offset(0) == 3 && offset(1) == 3 })

	reset := func(queueID, off string) *remoting.RemotingCommand {
		return tc.call(addr, remoting.RequestInvokeBrokerToResetOffset, map[string]string{
			"topic": "RQ", "group": "RG", "timestamp": "0", "isForce": "false", "queueId": queueID, "offset": off}, nil)
	}
	r := reset("1", "1")
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("reset queue 1 to 1: %d %s", r.Code, r.Remark)
	}
	if body := string(r.Body); !strings.Contains(body, `"queueId":1`) || strings.Contains(body, `"queueId":0`) {
		t.Fatalf("reset answer %s; want queue 1 only", body)
	}
	if got0, got1 := offset(0), offset(1); got0 != 3 || got1 != 1 {
		t.Fatalf("after resetting queue 1 to 1: offsets %d, %d; want 3 (untouched), 1", got0, got1)
	}
	if r := reset("5", "1"); r.Code != remoting.ResponseInvalidParameter || !strings.Contains(r.Remark, "queueId 5") {
		t.Fatalf("reset of queue 5 of a 2-queue topic: %d %q; want INVALID_PARAMETER naming the queue", r.Code, r.Remark)
	}
	if r := reset("0", "99"); r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "99") {
		t.Fatalf("reset of queue 0 to 99 (queue holds 0..3): %d %q; want SYSTEM_ERROR naming the offset", r.Code, r.Remark)
	}
	// The whole-topic form RocketMQ 5 sends (queueId -1, offset -1) still
	// resets every queue by the timestamp.
	if r := tc.call(addr, remoting.RequestInvokeBrokerToResetOffset, map[string]string{
		"topic": "RQ", "group": "RG", "timestamp": "0", "isForce": "true", "queueId": "-1", "offset": "-1"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("whole-topic reset: %d %s", r.Code, r.Remark)
	}
	if got0, got1 := offset(0), offset(1); got0 != 0 || got1 != 0 {
		t.Fatalf("after the whole-topic reset to time 0: offsets %d, %d; want 0, 0", got0, got1)
	}
}

// TestFailedResetLeavesNoTrace: a resetOffsetByTime whose replication
// fails is answered with an error, and the offsets stay where they were:
// the reset is not applied later by the coalescer's next flush, and a
// consumer commit it would have replaced is still applied.
func TestFailedResetLeavesNoTrace(t *testing.T) {
	pc, rep := startFakeProc(t, func(c *BrokerConfig) { c.ConsumerOffsetCommitCoalescer = time.Hour })
	c := pc.nodes[0]
	addr := c.Addr()
	pc.createTopic(addr, "FR", 2)
	for q := range 2 {
		for range 3 {
			if r := pc.call(addr, remoting.RequestSendMessage, sendExt("FR", q, ""), []byte("m")); r.Code != remoting.ResponseSuccess {
				t.Fatalf("send: %d %s", r.Code, r.Remark)
			}
		}
	}
	if r := pc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"FG"}`)); r.Code != remoting.ResponseSuccess {
		t.Fatalf("create group: %d %s", r.Code, r.Remark)
	}
	commit := func(q int, off int64) {
		t.Helper()
		if r := pc.call(addr, remoting.RequestUpdateConsumerOffset, map[string]string{"consumerGroup": "FG", "topic": "FR",
			"queueId": strconv.Itoa(q), "commitOffset": strconv.FormatInt(off, 10)}, nil); r.Code != remoting.ResponseSuccess {
			t.Fatalf("commit offset: %d %s", r.Code, r.Remark)
		}
	}
	commit(0, 2)
	commit(1, 2)
	c.offsets.flush()
	commit(1, 3) // acknowledged, still queued in the coalescer

	rep.failCommits.Store(true)
	r := pc.call(addr, remoting.RequestInvokeBrokerToResetOffset, map[string]string{
		"topic": "FR", "group": "FG", "timestamp": "0", "isForce": "true"}, nil)
	rep.failCommits.Store(false)
	if r.Code == remoting.ResponseSuccess {
		t.Fatal("a reset whose replication failed answered success")
	}
	c.offsets.flush() // the coalescer's next tick
	for q, want := range []int64{2, 3} {
		if got, _ := rep.State().ConsumerOffset("FG", "FR", int32(q)); got != want {
			t.Fatalf("after a failed reset (answered %d %s) and a flush, queue %d is at %d; want %d as before the reset",
				r.Code, r.Remark, q, got, want)
		}
	}
}
