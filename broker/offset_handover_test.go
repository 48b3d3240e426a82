package broker

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
)

// Offset writes that must win over commits acknowledged before them: an
// admin reset or clone over the leader's queued commits, and over the
// commits a deposed leader hands to its successor (RocketMQ: a reset wins
// over the commits a consumer made before it; a clone replaces the
// destination group's offsets).

func hourCoalescer(c *BrokerConfig) { c.ConsumerOffsetCommitCoalescer = time.Hour }

// applyOffset writes an offset into the fake's replicated state, as an
// entry of another leader's term applied on this member.
func applyOffset(rep *fakeReplica, group, topic string, queueID int32, off int64) {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	k := topicGroupKey(topic, group)
	if rep.offsets[k] == nil {
		rep.offsets[k] = map[int32]int64{}
	}
	rep.offsets[k][queueID] = off
}

func commitExt(group, topic string, queueID int, off int64) map[string]string {
	return map[string]string{"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(queueID),
		"commitOffset": strconv.FormatInt(off, 10)}
}

// handOverExt is a deposed leader's hand-over of a commit on TTG's TT
// queue, expecting the offset expect.
func handOverExt(queueID int, off int64, expect string) map[string]string {
	ext := commitExt("TTG", "TT", queueID, off)
	ext[extHandOverExpect] = expect
	ext[extHandOverDeposed] = "true"
	return ext
}

func mustSucceed(t *testing.T, what string, r *remoting.RemotingCommand) {
	t.Helper()
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("%s: %d %s", what, r.Code, r.Remark)
	}
}

// TestResetAndCloneWinOverQueuedCommits: a reset or a clone replicated
// while the leader still queues an older commit of the same queue is not
// undone by the flush that follows.
func TestResetAndCloneWinOverQueuedCommits(t *testing.T) {
	pc, rep := startFakeProc(t, hourCoalescer)
	c, addr := pc.nodes[0], pc.nodes[0].Addr()
	pc.createTopic(addr, "TT", 1)
	for range 3 {
		mustSucceed(t, "send", pc.call(addr, remoting.RequestSendMessage, sendExt("TT", 0, ""), []byte("m")))
	}
	for _, g := range []string{"RG", "SG", "CG"} {
		mustSucceed(t, "create group "+g, pc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+g+`"}`)))
	}
	mustSucceed(t, "commit SG", pc.call(addr, remoting.RequestUpdateConsumerOffset, commitExt("SG", "TT", 0, 1), nil))
	c.offsets.flush()
	mustSucceed(t, "commit RG", pc.call(addr, remoting.RequestUpdateConsumerOffset, commitExt("RG", "TT", 0, 3), nil))
	mustSucceed(t, "commit CG", pc.call(addr, remoting.RequestUpdateConsumerOffset, commitExt("CG", "TT", 0, 3), nil))

	mustSucceed(t, "reset RG", pc.call(addr, remoting.RequestInvokeBrokerToResetOffset, map[string]string{
		"topic": "TT", "group": "RG", "timestamp": "0", "isForce": "true"}, nil))
	mustSucceed(t, "clone SG to CG", pc.call(addr, remoting.RequestCloneGroupOffset, map[string]string{
		"srcGroup": "SG", "destGroup": "CG", "topic": "TT", "offline": "true"}, nil))
	c.offsets.flush()
	for _, want := range []struct {
		group string
		off   int64
	}{{"RG", 0}, {"CG", 1}} {
		if got, _ := rep.State().ConsumerOffset(want.group, "TT", 0); got != want.off {
			t.Errorf("%s after its queued commit of 3 and a flush: %d, want %d (the reset's, the clone's)", want.group, got, want.off)
		}
	}
}

// TestHandOverExpectsTheDeposedLeadersOffset: a deposed leader's hand-over
// expects the offset that leader had replicated, not what its state holds
// when the role change reaches the coalescer: by then it may have applied
// a later leader's reset, and a hand-over expecting the reset's offset
// would undo it. A queued commit equal to the offset the state holds is
// not handed over: the later term's reset of the other queue commits
// there, and nothing from the older term may land after it.
func TestHandOverExpectsTheDeposedLeadersOffset(t *testing.T) {
	oldPC, oldRep := startFakeProc(t, hourCoalescer)
	newPC, newRep := startFakeProc(t, hourCoalescer)
	oldAddr, newAddr := oldPC.nodes[0].Addr(), newPC.nodes[0].Addr()
	for _, pc := range []*procCluster{oldPC, newPC} {
		addr := pc.nodes[0].Addr()
		pc.createTopic(addr, "TT", 2)
		mustSucceed(t, "create group", pc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"TTG"}`)))
	}
	for _, rep := range []*fakeReplica{oldRep, newRep} {
		applyOffset(rep, "TTG", "TT", 0, 5)
		applyOffset(rep, "TTG", "TT", 1, 5)
	}
	oldRep.setLeader(true, oldAddr)
	mustSucceed(t, "commit q0", oldPC.call(oldAddr, remoting.RequestUpdateConsumerOffset, commitExt("TTG", "TT", 0, 5), nil))
	mustSucceed(t, "commit q1", oldPC.call(oldAddr, remoting.RequestUpdateConsumerOffset, commitExt("TTG", "TT", 1, 9), nil))

	// A later term resets both queues to 0; the old member has applied
	// the reset of queue 1 by the time its coalescer learns it lost
	// leadership, not yet that of queue 0.
	oldRep.leader.Store(false)
	applyOffset(newRep, "TTG", "TT", 0, 0)
	applyOffset(newRep, "TTG", "TT", 1, 0)
	applyOffset(oldRep, "TTG", "TT", 1, 0)
	oldRep.setLeader(false, newAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = oldPC.nodes[0].Shutdown(ctx) // waits for the hand-over
	for q := range int32(2) {
		if off, ok := newPC.nodes[0].offsets.lookup("TTG", "TT", q); !ok || off != 0 {
			t.Errorf("queue %d on the new leader after the hand-over: %d %v, want the reset's 0", q, off, ok)
		}
	}
}

// committedAt5 creates topic TT with queues queues, sends 6 messages to
// queue 0 and has group TTG's commit of 5 there replicated.
func committedAt5(t *testing.T, pc *procCluster, addr string, queues int) {
	t.Helper()
	pc.createTopic(addr, "TT", queues)
	for range 6 {
		mustSucceed(t, "send", pc.call(addr, remoting.RequestSendMessage, sendExt("TT", 0, ""), []byte("m")))
	}
	mustSucceed(t, "create group", pc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"TTG"}`)))
	mustSucceed(t, "commit", pc.call(addr, remoting.RequestUpdateConsumerOffset, commitExt("TTG", "TT", 0, 5), nil))
	pc.nodes[0].offsets.flush()
}

// TestHandOverAfterReset: a new leader refuses a deposed leader's
// hand-over for a queue it reset, whatever offset the hand-over expects:
// the commit was acknowledged in an older term, before the reset. The
// offset check alone takes it when the reset left the queue at that very
// offset (an explicit one, or one found by time that only moves back).
// A follower's forwarded commit, which a consumer may send after the
// reset, is judged by its offset alone.
func TestHandOverAfterReset(t *testing.T) {
	pc, rep := startFakeProc(t, hourCoalescer)
	c, addr := pc.nodes[0], pc.nodes[0].Addr()
	rep.setLeader(true, addr)
	committedAt5(t, pc, addr, 2)
	reset := func(queueID, off string) {
		t.Helper()
		mustSucceed(t, "reset queue "+queueID, pc.call(addr, remoting.RequestInvokeBrokerToResetOffset, map[string]string{
			"topic": "TT", "group": "TTG", "timestamp": "0", "isForce": "false", "queueId": queueID, "offset": off}, nil))
	}
	reset("0", "5")
	reset("1", "0") // the queue's first offset for TTG

	for _, h := range []struct {
		queueID int
		expect  string
		kept    string
	}{
		{0, "5", "5"},    // the reset left the offset expected
		{0, "4", "5"},    // an offset the queue no longer has
		{1, "none", "0"}, // no offset before the reset
	} {
		r := pc.call(addr, remoting.RequestUpdateConsumerOffset, handOverExt(h.queueID, 9, h.expect), nil)
		if r.Code != remoting.ResponseSuccess || r.ExtFields[extHandOverKept] != h.kept {
			t.Errorf("hand-over of 9 on queue %d expecting %s after the reset: %d %q %v; want success keeping %s",
				h.queueID, h.expect, r.Code, r.Remark, r.ExtFields, h.kept)
		}
		if off, _ := c.offsets.lookup("TTG", "TT", int32(h.queueID)); strconv.FormatInt(off, 10) != h.kept {
			t.Errorf("queue %d after a refused hand-over: %d, want the reset's %s", h.queueID, off, h.kept)
		}
	}

	forward := commitExt("TTG", "TT", 0, 6)
	forward[extHandOverExpect] = "5"
	if r := pc.call(addr, remoting.RequestUpdateConsumerOffset, forward, nil); r.Code != remoting.ResponseSuccess || r.ExtFields[extHandOverKept] != "" {
		t.Fatalf("a follower's forwarded commit expecting 5 after the reset: %d %q %v; want it taken", r.Code, r.Remark, r.ExtFields)
	}
	if off, _ := c.offsets.lookup("TTG", "TT", 0); off != 6 {
		t.Fatalf("queue 0 after the forwarded commit of 6: %d", off)
	}
}

// TestHandOverAfterDelete: a group or topic deleted with its offsets on
// the new leader does not get them back from a deposed leader's hand-over,
// even where it expects no offset and the group or topic was created
// again meanwhile.
func TestHandOverAfterDelete(t *testing.T) {
	pc, rep := startFakeProc(t, hourCoalescer)
	c, addr := pc.nodes[0], pc.nodes[0].Addr()
	rep.setLeader(true, addr)
	pc.createTopic(addr, "TT", 1)
	createGroup := func(g string) {
		t.Helper()
		mustSucceed(t, "create group "+g, pc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(`{"groupName":"`+g+`"}`)))
	}
	createGroup("TTG")
	createGroup("TTH")
	mustSucceed(t, "commit TTG", pc.call(addr, remoting.RequestUpdateConsumerOffset, commitExt("TTG", "TT", 0, 5), nil))
	c.offsets.flush()

	mustSucceed(t, "delete TTG", pc.call(addr, remoting.RequestDeleteSubscriptionGroup, map[string]string{"groupName": "TTG", "cleanOffset": "true"}, nil))
	if r := pc.call(addr, remoting.RequestUpdateConsumerOffset, handOverExt(0, 9, "none"), nil); r.Code != remoting.ResponseSubscriptionGroupNotExist {
		t.Fatalf("hand-over for a deleted group: %d %q, want SUBSCRIPTION_GROUP_NOT_EXIST", r.Code, r.Remark)
	}
	createGroup("TTG")
	for _, expect := range []string{"5", "none"} {
		r := pc.call(addr, remoting.RequestUpdateConsumerOffset, handOverExt(0, 9, expect), nil)
		if r.Code != remoting.ResponseSuccess || r.ExtFields[extHandOverKept] != "none" {
			t.Errorf("hand-over expecting %s for a group deleted and created again: %d %q %v; want success keeping none",
				expect, r.Code, r.Remark, r.ExtFields)
		}
	}
	if off, ok := c.offsets.lookup("TTG", "TT", 0); ok {
		t.Errorf("TTG deleted with its offsets has %d again after a hand-over", off)
	}

	mustSucceed(t, "delete topic", pc.call(addr, remoting.RequestDeleteTopicInBroker, map[string]string{"topic": "TT"}, nil))
	pc.createTopic(addr, "TT", 1)
	ext := handOverExt(0, 9, "none")
	ext["consumerGroup"] = "TTH"
	if r := pc.call(addr, remoting.RequestUpdateConsumerOffset, ext, nil); r.Code != remoting.ResponseSuccess || r.ExtFields[extHandOverKept] != "none" {
		t.Errorf("hand-over expecting none on a topic deleted and created again: %d %q %v; want success keeping none", r.Code, r.Remark, r.ExtFields)
	}
	if off, ok := c.offsets.lookup("TTH", "TT", 0); ok {
		t.Errorf("TTH has %d on a topic deleted and created again after a hand-over", off)
	}
}

// hookOffsetsReplica is a fakeReplica that runs during (once) inside its
// next CommitOffsets, before the entry applies.
// With fail set, that CommitOffsets returns it (once) and applies nothing.
type hookOffsetsReplica struct {
	*fakeReplica
	during func()
	fail   error
}

func (r *hookOffsetsReplica) CommitOffsets(ctx context.Context, commits []OffsetCommit) error {
	if f := r.during; f != nil {
		r.during = nil
		f()
	}
	if err := r.fail; err != nil {
		r.fail = nil
		return err
	}
	return r.fakeReplica.CommitOffsets(ctx, commits)
}

// hookedCoalescer is the offset coalescer of a Controller over a
// hookOffsetsReplica.
func hookedCoalescer(t *testing.T) (*hookOffsetsReplica, *offsetCoalescer) {
	t.Helper()
	rep := &hookOffsetsReplica{fakeReplica: newFakeReplica(t, "127.0.0.1:1")}
	return rep, controllerOver(t, rep).offsets
}

// TestQueuedCommitTracksTheLeadersOwnWrites: the offset a queued commit's
// hand-over would expect follows this leader's own writes of the queue: a
// flush or a reset that replicated while a newer commit was queued lies
// under that commit, so a hand-over of it after a deposal is taken where
// the new leader has what this one wrote last.
func TestQueuedCommitTracksTheLeadersOwnWrites(t *testing.T) {
	rep, o := hookedCoalescer(t)
	replicatedUnder := func() string {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.pending[offsetKey{"G", "T", 0}].replicated
	}
	applyOffset(rep.fakeReplica, "G", "T", 0, 5)
	o.add(OffsetCommit{Group: "G", Topic: "T", QueueID: 0, Offset: 7})
	if got := replicatedUnder(); got != "5" {
		t.Fatalf("a commit queued over 5 expects %q", got)
	}
	rep.during = func() { o.add(OffsetCommit{Group: "G", Topic: "T", QueueID: 0, Offset: 9}) }
	o.flush()
	if got := replicatedUnder(); got != "7" {
		t.Fatalf("a commit queued while the flush of 7 replicated expects %q, want 7", got)
	}
	reset := []OffsetCommit{{Group: "G", Topic: "T", QueueID: 0, Offset: 2}}
	rep.during = func() { o.add(OffsetCommit{Group: "G", Topic: "T", QueueID: 0, Offset: 11}) }
	if r := o.supersede(reset, func() *remoting.RemotingCommand {
		if err := rep.CommitOffsets(context.Background(), reset); err != nil {
			return response(remoting.ResponseSystemError, "%v", err)
		}
		return nil
	}); r != nil {
		t.Fatalf("reset: %d %s", r.Code, r.Remark)
	}
	if got := replicatedUnder(); got != "2" {
		t.Fatalf("a commit queued while the reset to 2 replicated expects %q, want 2", got)
	}
}

// TestHandOverAfterResetBeforeRoleChange: a reset this node serves as
// leader before the role change has reached the coalescer (Roles marks the
// node leader, then notifies its listeners) still fences the queue against
// a deposed leader's hand-over.
func TestHandOverAfterResetBeforeRoleChange(t *testing.T) {
	pc, rep := startFakeProc(t, hourCoalescer)
	c, addr := pc.nodes[0], pc.nodes[0].Addr()
	rep.setLeader(true, addr)
	committedAt5(t, pc, addr, 1)

	rep.setLeader(false, "")
	rep.leader.Store(true) // leading again; the role change not yet delivered
	mustSucceed(t, "reset", pc.call(addr, remoting.RequestInvokeBrokerToResetOffset, map[string]string{
		"topic": "TT", "group": "TTG", "timestamp": "0", "isForce": "false", "queueId": "0", "offset": "5"}, nil))
	rep.setLeader(true, addr)

	r := pc.call(addr, remoting.RequestUpdateConsumerOffset, handOverExt(0, 9, "5"), nil)
	if r.Code != remoting.ResponseSuccess || r.ExtFields[extHandOverKept] != "5" {
		t.Fatalf("hand-over of 9 expecting 5 after a reset to 5 served before the role change: %d %q %v; want success keeping 5",
			r.Code, r.Remark, r.ExtFields)
	}
	if off, _ := c.offsets.lookup("TTG", "TT", 0); off != 5 {
		t.Fatalf("queue 0 after the refused hand-over: %d, want the reset's 5", off)
	}
}

// TestHandOverExpectsItsOwnFlushInDoubt: a flush that failed as this
// leader was deposed may commit under the next leader. A newer commit
// queued meanwhile is handed over expecting that flush's value when the
// deposed leader's state shows it (its own write), not the offset
// replicated before it, which the new leader no longer has: refused, the
// consumers would re-consume what they committed. A state showing another
// value keeps the replicated one expected.
func TestHandOverExpectsItsOwnFlushInDoubt(t *testing.T) {
	rep, o := hookedCoalescer(t)
	expects := func() map[int32]string {
		o.mu.Lock()
		taken := maps.Clone(o.pending)
		o.mu.Unlock()
		out := map[int32]string{}
		for _, hc := range o.toHandOver(taken) {
			out[hc.QueueID] = hc.expect
		}
		return out
	}
	rep.leader.Store(true)
	for q := range int32(2) {
		applyOffset(rep.fakeReplica, "G", "T", q, 5)
		o.add(OffsetCommit{Group: "G", Topic: "T", QueueID: q, Offset: 7})
	}
	rep.fail = errors.New("leadership lost")
	rep.during = func() {
		for q := range int32(2) {
			o.add(OffsetCommit{Group: "G", Topic: "T", QueueID: q, Offset: 9})
		}
		rep.leader.Store(false)
	}
	o.flush()
	applyOffset(rep.fakeReplica, "G", "T", 0, 7) // the flush of 7 committed under the next leader
	applyOffset(rep.fakeReplica, "G", "T", 1, 6) // another leader's write
	if got := expects(); got[0] != "7" || got[1] != "5" {
		t.Fatalf("hand-overs of 9 expect %v; want queue 0 the flush in doubt (7), queue 1 the replicated 5", got)
	}
}
