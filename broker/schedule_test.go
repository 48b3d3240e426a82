package broker

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// TestZeroDelayLevelDeliversAtOnce: a "0s" level in messageDelayLevel is
// accepted, as RocketMQ's parseDelayLevel does; a message sent at that
// level still goes through SCHEDULE_TOPIC_XXXX and the schedule service
// re-puts it to its real topic on its next round, without the DELAY
// property (ScheduleMessageService: store time + 0 is due at once).
func TestZeroDelayLevelDeliversAtOnce(t *testing.T) {
	tc, rep := startFakeProc(t, func(c *BrokerConfig) { c.MessageDelayLevel = "0s 1h" })
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "TZ", 1)
	if r := tc.call(addr, remoting.RequestSendMessage, sendExt("TZ", 0, "DELAY\x011\x02"), []byte("zero")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("send at level 1 (0s): %d %s", r.Code, r.Remark)
	}
	if n := rep.st.GetMaxOffsetInQueue(wire.TopicSchedule, 0); n != 1 {
		t.Fatalf("schedule queue 0 holds %d messages, want the one sent at level 1", n)
	}
	var got *store.Message
	testutil.WaitFor(t, 10*time.Second, "the 0s-level message in TZ", func() bool {
		res, err := rep.st.GetMessage("", "TZ", 0, 0, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != store.Found {
			return false
		}
		if got, _, err = wire.DecodeMessage(res.Messages[0], true); err != nil {
			t.Fatal(err)
		}
		return true
	})
	if string(got.Body) != "zero" || got.Properties[wire.PropertyDelayTimeLevel] != "" || got.Properties[wire.PropertyRealTopic] != "" {
		t.Fatalf("delivered %q with properties %v", got.Body, got.Properties)
	}
}

// TestRetentionKeepsPendingDelayed: retention deletes no CommitLog segment
// holding a delayed message its level has not re-put yet, as it keeps a
// pending timer's (timerPin). The send was acknowledged; with its segment
// gone (a level longer than fileReservedTime, or deletion forced by a full
// disk) the schedule service steps past it and it never reaches its topic.
func TestRetentionKeepsPendingDelayed(t *testing.T) {
	c, _, _ := retentionKeepsPinned(t, wire.TopicSchedule, 1,
		map[string]string{wire.PropertyRealTopic: "T", wire.PropertyRealQueueID: "0", wire.PropertyDelayTimeLevel: "2"},
		"a delayed message not yet due")
	l := c.leader()
	// A level messageDelayLevel no longer lists is never delivered: its
	// queue must not hold the CommitLog for good.
	l.g().SetScheduleLevels(1)
	if pin := l.g().schedulePin(); pin != math.MaxInt64 {
		t.Fatalf("a level past the configured ones pins the CommitLog at %d", pin)
	}
}

// TestScheduleResumesFromReplicatedProgress: the schedule service takes
// each level's position from the replicated state at every round. A
// leader that lost and regained leadership between two of its rounds,
// while another leader re-put a delayed message and moved the position
// past it, re-put that message again from the position it remembered.
func TestScheduleResumesFromReplicatedProgress(t *testing.T) {
	// The node's own service never runs a round: the test drives one.
	tc, rep := startFakeProc(t, func(c *BrokerConfig) { c.MessageDelayLevel = "0s 1h"; c.ScheduleMessageCheckInterval = time.Hour })
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "TR", 1)
	s := newScheduleService(tc.nodes[0])
	send := func(body string) {
		t.Helper()
		if r := tc.call(addr, remoting.RequestSendMessage, sendExt("TR", 0, "DELAY\x011\x02"), []byte(body)); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send at level 1: %d %s", r.Code, r.Remark)
		}
	}
	send("first")
	s.tick(time.Now().Add(time.Second))
	if n := rep.st.GetMaxOffsetInQueue("TR", 0); n != 1 {
		t.Fatalf("TR holds %d messages after the first round, want 1", n)
	}
	// Another leader's term: it re-puts the second message and moves the
	// replicated position past it.
	send("second")
	rep.mu.Lock()
	rep.sched[1] = 2
	rep.mu.Unlock()
	s.tick(time.Now().Add(time.Second))
	if n := rep.st.GetMaxOffsetInQueue("TR", 0); n != 1 {
		t.Fatalf("TR holds %d messages: the round re-put a message the replicated position had passed", n)
	}
}

// TestScheduleRoundDeliversEveryDueMessage: one round re-puts every due
// message of a level, not one batch of them. At one batch (64) a round,
// ten rounds a second, a level whose messages came faster than 640 a
// second (the send-backs of a failing consumer group, at level 3) fell
// further behind for as long as they did: retries came later and later.
func TestScheduleRoundDeliversEveryDueMessage(t *testing.T) {
	// The node's own service never runs a round: the test drives one.
	tc, rep := startFakeProc(t, func(c *BrokerConfig) { c.MessageDelayLevel = "0s 1h"; c.ScheduleMessageCheckInterval = time.Hour })
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "TB", 1)
	const n = 300
	for i := range n {
		if r := tc.call(addr, remoting.RequestSendMessage, sendExt("TB", 0, "DELAY\x011\x02"), []byte(strconv.Itoa(i))); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send %d at level 1: %d %s", i, r.Code, r.Remark)
		}
	}
	newScheduleService(tc.nodes[0]).tick(time.Now().Add(time.Second))
	if got := rep.st.GetMaxOffsetInQueue("TB", 0); got != n {
		t.Fatalf("one round re-put %d of %d due messages", got, n)
	}
	if got := rep.State().ScheduleOffsets()[1]; got != n {
		t.Fatalf("level 1's replicated position is %d after the round, want %d", got, n)
	}
}

// retentionKeepsPinned stores one message of a system topic (topic, queue,
// props) among 1,200 plain ones on 256 KiB segments, then runs retention
// as if every segment but the last were past its reserved time, and fails
// unless the message's segment is kept (what names it in the failure). It
// returns the cluster, the message's put result and the context the put
// used (10 s).
func retentionKeepsPinned(t *testing.T, topic string, queue int32, props map[string]string, what string) (*testCluster, PutResult, context.Context) {
	t.Helper()
	c := newTestCluster(t, clusterOpts{segmentSize: 256 << 10})
	c.createTopic("T", 1)
	c.createTopic(topic, int(queue)+1)
	l := c.leader()
	c.sendConcurrently(2, 300, 1024, 1, nil)
	m := testMessage(topic, queue, "pinned", "", 0, 128)
	m.Properties = props
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	res, err := l.g().PutMessages(ctx, []*store.Message{m})
	if err != nil {
		t.Fatal(err)
	}
	at := res[0].PhysicalOffset
	c.sendConcurrently(2, 900, 1024, 1, nil)
	c.waitCaughtUp()
	if err := l.g().Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := (retentionSegments{l.g()}).DeleteExpired(time.Now().Add(time.Hour), 1, 1000); err != nil {
		t.Fatal(err)
	}
	first := l.g().Store().CommitLog().MinOffset()
	if first == 0 {
		t.Fatal("retention deleted nothing: the test no longer checks what it keeps")
	}
	if first > at {
		t.Fatalf("retention deleted the segment of %s (at %d; the CommitLog now starts at %d)", what, at, first)
	}
	return c, res[0], ctx
}

// TestScheduleLevelStepsOverMissingQueueFile: a delay level whose
// SCHEDULE_TOPIC ConsumeQueue lost a file between others (the store opens
// such a queue, as RocketMQ does) steps over the lost offsets, as a
// consumer's pull does, and delivers the messages after them. It stopped
// at the gap for good: no later message of the level was ever delivered.
func TestScheduleLevelStepsOverMissingQueueFile(t *testing.T) {
	dir := t.TempDir()
	smallQueues := func(c *store.Config) {
		c.StorePathRootDir = dir
		c.MappedFileSizeConsumeQueue = 10 * store.CQUnitSize
	}
	quiet := func(c *BrokerConfig) { c.MessageDelayLevel = "1s"; c.ScheduleMessageCheckInterval = time.Hour }
	tc, rep := startFakeProc(t, quiet, smallQueues)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "TB", 1)
	const n = 35
	for i := range n {
		if r := tc.call(addr, remoting.RequestSendMessage, sendExt("TB", 0, "DELAY\x011\x02"), []byte(strconv.Itoa(i))); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send %d at level 1: %d %s", i, r.Code, r.Remark)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tc.nodes[0].Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rep.st.Close(); err != nil {
		t.Fatal(err)
	}
	// The level's file of units [10, 20) is lost.
	if err := os.Remove(filepath.Join(dir, "consumequeue", wire.TopicSchedule, "0", storage.FileName(10*store.CQUnitSize))); err != nil {
		t.Fatal(err)
	}
	// The fake replica's topic table is not kept: one more send after the
	// restart registers the topics again.
	tc, rep = startFakeProc(t, quiet, smallQueues)
	addr = tc.nodes[0].Addr()
	tc.createTopic(addr, "TB", 1)
	if r := tc.call(addr, remoting.RequestSendMessage, sendExt("TB", 0, "DELAY\x011\x02"), []byte("last")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("send after the restart: %d %s", r.Code, r.Remark)
	}
	newScheduleService(tc.nodes[0]).tick(time.Now().Add(time.Hour))
	if got := rep.st.GetMaxOffsetInQueue("TB", 0); got != n+1-10 {
		t.Fatalf("the level delivered %d messages; want the %d on both sides of the lost file", got, n+1-10)
	}
	if got := rep.State().ScheduleOffsets()[1]; got != n+1 {
		t.Fatalf("level 1's replicated position is %d, want %d", got, n+1)
	}
}
