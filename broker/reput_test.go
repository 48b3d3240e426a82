package broker

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// bigBody is a body of n bytes that starts with name.
func bigBody(name string, n int) []byte {
	return append([]byte(name), bytes.Repeat([]byte{'.'}, n-len(name))...)
}

// TestTimerReputFitsRaftBatch: due timer messages whose bodies fit one
// re-put request (1 MiB of bodies) but whose stored bytes exceed
// raftBatchMaxBytes (1 MiB here, as whenever maxMessageSize is 1 MiB or
// less) are re-put in requests the group takes. The group refused the
// request as too large at every round: the timer service stopped at them
// for good, and no later timer message was delivered.
func TestTimerReputFitsRaftBatch(t *testing.T) {
	pc := startRealCluster(t, nil)
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TF", 1)
	const size = 524_250 // two bodies: below 1 MiB; two stored messages: above
	due := time.Now().UnixMilli() + 1500
	for _, name := range []string{"first", "second"} {
		props := timerProps(wire.PropertyTimerDeliverMs, due)
		if r := pc.call(addr, remoting.RequestSendMessage, sendExt("TF", 0, props), bigBody(name, size)); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send timer %s: %d %s", name, r.Code, r.Remark)
		}
	}
	testutil.WaitFor(t, 15*time.Second, "both timer messages in TF", func() bool {
		return pc.groups[l].Store().GetMaxOffsetInQueue("TF", 0) == 2
	})
	if n := pc.groups[l].Store().GetMaxOffsetInQueue(wire.TopicTimer, 0); n != 2 {
		t.Fatalf("the timer topic holds %d messages, want 2", n)
	}
}

// putFaults makes one PutMessages call fail, the failOn-th (counting from
// 1), as a Raft write that timed out before it was proposed.
type putFaults struct {
	calls, failOn atomic.Int32
}

func (f *putFaults) fail() error {
	if f.calls.Add(1) == f.failOn.Load() {
		return fmt.Errorf("%w: injected", ErrApplyTimeout)
	}
	return nil
}

// faultyFake is a fakeReplica with putFaults.
type faultyFake struct {
	*fakeReplica
	putFaults
}

func (r *faultyFake) PutMessages(ctx context.Context, msgs []*store.Message) ([]PutResult, error) {
	if err := r.fail(); err != nil {
		return nil, err
	}
	return r.fakeReplica.PutMessages(ctx, msgs)
}

// faultyGroup is a cluster member's Group with putFaults, for an offline
// controller (its role callbacks stay off the real group).
type faultyGroup struct {
	*Group
	putFaults
}

func (g *faultyGroup) PutMessages(ctx context.Context, msgs []*store.Message) ([]PutResult, error) {
	if err := g.fail(); err != nil {
		return nil, err
	}
	return g.Group.PutMessages(ctx, msgs)
}

func (g *faultyGroup) OnRoleChange(func(bool, uint64)) {}

// TestScheduleReputResumesAfterPartialFailure: due delayed messages too
// large for one re-put request (raftBatchMaxBytes 150 KiB) go out in
// several; when a later one fails, the level's position still moves past
// the messages stored, and the retry stores only the rest. The position
// stayed where it was, so every retry stored the first part again: a
// duplicate per retry round.
func TestScheduleReputResumesAfterPartialFailure(t *testing.T) {
	port := testutil.FreePort(t)
	cfg := testBrokerConfig(t, "127.0.0.1:1", port)
	cfg.MessageDelayLevel = "0s 1h"
	cfg.Store.MaxMessageSize, cfg.RaftBatchMaxBytes = 150<<10, 150<<10
	rep := &faultyFake{fakeReplica: newFakeReplica(t, "127.0.0.1:"+strconv.Itoa(port))}
	c := offlineController(t, cfg, rep)
	ctx := context.Background()
	if err := rep.UpdateTopic(ctx, wire.TopicConfig{TopicName: wire.TopicSchedule, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"first", "second"} {
		m := &store.Message{Topic: wire.TopicSchedule, QueueID: 0, Body: bigBody(name, 100<<10), BornTimestamp: time.Now().UnixMilli(),
			BornHost:   netip.MustParseAddrPort("127.0.0.1:50000"),
			Properties: map[string]string{wire.PropertyRealTopic: "TR", wire.PropertyRealQueueID: "0", wire.PropertyDelayTimeLevel: "1"}}
		if _, err := rep.fakeReplica.PutMessages(ctx, []*store.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	rep.failOn.Store(2) // the second message's request
	c.sched.tick(time.Now().Add(time.Second))
	if n := rep.st.GetMaxOffsetInQueue("TR", 0); n != 1 {
		t.Fatalf("TR holds %d messages after the failed round, want the first", n)
	}
	c.sched.tick(time.Now().Add(time.Second))
	if n := rep.st.GetMaxOffsetInQueue("TR", 0); n != 2 {
		t.Fatalf("TR holds %d messages after the retry, want 2: the first message re-put again", n)
	}
	if got := rep.State().ScheduleOffsets()[1]; got != 2 {
		t.Fatalf("level 1's position is %d, want 2", got)
	}
}

// TestTimerReputResumesAfterPartialFailure: due timer messages too large
// for one re-put request go out in several; when a later one fails, the
// retry re-puts only the rest. Every retry re-put the whole round, the
// first part again each time.
func TestTimerReputResumesAfterPartialFailure(t *testing.T) {
	pc := startRealCluster(t, noTimerRounds)
	l := pc.leader()
	g := &faultyGroup{Group: pc.groups[l]}
	c := offlineController(t, pc.cfgs[l], g)
	ctx := context.Background()
	nowMs := time.Now().UnixMilli()
	for _, name := range []string{"first", "second"} {
		m := dueTimer("TT", name, nowMs-1000)
		m.Body = bigBody(name, 700<<10)
		if _, err := g.Group.PutMessages(ctx, []*store.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	g.failOn.Store(2)
	c.timers.tick(time.Now())
	if got := readTopic(t, g.Group, "TT", 1); len(got) != 1 {
		t.Fatalf("TT holds %d messages after the failed round, want the first", len(got))
	}
	c.timers.tick(time.Now())
	got := readTopic(t, g.Group, "TT", 1)
	for _, name := range []string{"first", "second"} {
		if d := got[string(bigBody(name, 700<<10))]; d == nil || d.copies != 1 {
			t.Errorf("%s: %+v, want one copy", name, d)
		}
	}
	if len(got) != 2 {
		t.Fatalf("TT holds %d distinct messages, want 2", len(got))
	}
}
