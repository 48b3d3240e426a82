package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestShutdownFlushesCommitsAnsweredWhileStopping: Shutdown lets running
// requests answer, so an offset commit still being handled when it began
// is answered success; it must be replicated before Shutdown returns, or
// the leader acknowledged a commit it then forgets (a single-member group,
// or one whose leadership hand-off failed, restarts at the older offset).
func TestShutdownFlushesCommitsAnsweredWhileStopping(t *testing.T) {
	pc, rep := startFakeProc(t, func(c *BrokerConfig) { c.ConsumerOffsetCommitCoalescer = time.Hour })
	c := pc.nodes[0]
	addr := c.Addr()
	pc.createTopic(addr, "ST", 1)
	// The group connects (its heartbeat creates its config and retry
	// topic); both are deleted again, so its next commit re-creates them:
	// the retry topic's creation is where the commit is held below.
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@sd", ConsumerDataSet: []wire.HeartbeatConsumerData{{
		GroupName: "SDG", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "ST", SubString: "*", SubVersion: 1}},
	}}})
	if r := pc.call(addr, remoting.RequestHeartBeat, nil, hb); r.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	if r := pc.call(addr, remoting.RequestDeleteSubscriptionGroup, map[string]string{"groupName": "SDG"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delete group config: %d %s", r.Code, r.Remark)
	}
	if r := pc.call(addr, remoting.RequestDeleteTopicInBroker, map[string]string{"topic": wire.RetryGroupTopicPrefix + "SDG"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delete retry topic: %d %s", r.Code, r.Remark)
	}
	gate := make(chan struct{})
	rep.mu.Lock()
	rep.topicGate = gate
	rep.mu.Unlock()
	writes := rep.topicWrites.Load()

	type answer struct {
		r   *remoting.RemotingCommand
		err error
	}
	committed := make(chan answer, 1)
	go func() {
		req := remoting.NewRequest(remoting.RequestUpdateConsumerOffset, &wire.UpdateConsumerOffsetRequestHeader{
			ConsumerGroup: "SDG", Topic: "ST", QueueID: 0, CommitOffset: 7}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := pc.client.InvokeSync(ctx, addr, req)
		committed <- answer{r, err}
	}()
	testutil.WaitFor(t, 10*time.Second, "the commit handled (creating the retry topic)", func() bool { return rep.topicWrites.Load() > writes })

	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stopped <- c.Shutdown(ctx)
	}()
	// Once the listener is closed, Shutdown is waiting for the running
	// requests to answer.
	testutil.WaitFor(t, 10*time.Second, "the listener closed", func() bool {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			nc.Close()
		}
		return err != nil
	})
	close(gate)
	a := <-committed
	if a.err != nil || a.r.Code != remoting.ResponseSuccess {
		t.Fatalf("the commit handled while the broker stopped: %v %+v; want success", a.err, a.r)
	}
	if err := <-stopped; err != nil {
		t.Logf("shutdown: %v", err)
	}
	if off, ok := rep.State().ConsumerOffset("SDG", "ST", 0); !ok || off != 7 {
		t.Fatalf("a commit answered success during Shutdown was not replicated: SDG's offset on ST/0 is %d (found %v); want 7", off, ok)
	}
}

// startTransferOffsets starts a real group whose consumer group TTG has
// committed offset 7 on TT/0 at the leader, where it stays coalesced
// (no flush but the transfer's own); it returns the leader's index.
func startTransferOffsets(t *testing.T) (*procCluster, int) {
	return startOffsetsCluster(t, time.Hour)
}

// startOffsetsCluster is startTransferOffsets with the members' offset
// commit interval (and production's Raft timings); TT has two queues.
func startOffsetsCluster(t *testing.T, interval time.Duration) (*procCluster, int) {
	t.Helper()
	pc := startRealCluster(t, func(c *BrokerConfig) {
		withProdRaftTimings(c)
		c.ConsumerOffsetCommitCoalescer = interval
	})
	l := pc.leader()
	addr := pc.nodes[l].Addr()
	pc.createTopic(addr, "TT", 2)
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@tt", ConsumerDataSet: []wire.HeartbeatConsumerData{{
		GroupName: "TTG", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "TT", SubString: "*", SubVersion: 1}},
	}}})
	if r := pc.call(addr, remoting.RequestHeartBeat, nil, hb); r.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
	}
	if r := pc.call(addr, remoting.RequestUpdateConsumerOffset, ttCommit(7), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	return pc, l
}

func ttCommit(off int64) map[string]string {
	return map[string]string{"consumerGroup": "TTG", "topic": "TT", "queueId": "0", "commitOffset": strconv.FormatInt(off, 10)}
}

// transferTo moves leadership from member l to member to with the admin
// command and waits until to leads.
func (pc *procCluster) transferTo(l, to int) {
	pc.t.Helper()
	if r := pc.call(pc.nodes[l].Addr(), remoting.RequestLeadershipTransfer, map[string]string{"targetId": pc.groups[to].SelfID()}, nil); r.Code != remoting.ResponseSuccess {
		pc.t.Fatalf("transfer: %d %s", r.Code, r.Remark)
	}
	testutil.WaitFor(pc.t, 10*time.Second, "the target leads", func() bool { return pc.groups[to].IsLeader() })
}

// ttOffset is TTG's offset on TT/0 as member i answers it ("" and the
// remark when it does not).
func (pc *procCluster) ttOffset(i int) (string, string) {
	query := map[string]string{"consumerGroup": "TTG", "topic": "TT", "queueId": "0"}
	r := pc.call(pc.nodes[i].Addr(), remoting.RequestQueryConsumerOffset, query, nil)
	if r.Code != remoting.ResponseSuccess {
		return "", fmt.Sprintf("code %d %s", r.Code, r.Remark)
	}
	return r.ExtFields["offset"], ""
}

// TestTransferCommitsCoalescedOffsets: a commit the leader answered from its
// coalescing table is replicated before an admin transfer hands leadership
// away; a follower drops what it had coalesced, so without that the new
// leader would answer the older offset and the group re-consume.
func TestTransferCommitsCoalescedOffsets(t *testing.T) {
	pc, l := startTransferOffsets(t)
	target := (l + 1) % 3
	pc.transferTo(l, target)
	if off, why := pc.ttOffset(target); off != "7" {
		t.Fatalf("the new leader answers TTG's offset on TT/0 with %q %s; want 7", off, why)
	}
}

// TestTransferHandsOverCommitsTakenDuringIt: from the moment a transfer
// starts until leadership has moved (up to an election timeout) Raft takes
// no write, while consumers keep committing to the leader (official
// clients oneway, or in their pulls) and are answered. Such a commit, taken
// after the transfer's flush, reaches the new leader by the deposed
// leader's hand-over; dropped, the queue's next owner would re-consume
// what was committed. A handed-over commit never replaces an offset the
// new leader took meanwhile.
func TestTransferHandsOverCommitsTakenDuringIt(t *testing.T) {
	pc, l := startTransferOffsets(t)
	addr := pc.nodes[l].Addr()
	pc.groups[l].SetBeforeTransfer(func() {
		pc.nodes[l].offsets.flush()
		req := remoting.NewRequest(remoting.RequestUpdateConsumerOffset, &wire.UpdateConsumerOffsetRequestHeader{
			ConsumerGroup: "TTG", Topic: "TT", QueueID: 0, CommitOffset: 9}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if r, err := pc.client.InvokeSync(ctx, addr, req); err != nil || r.Code != remoting.ResponseSuccess {
			t.Errorf("commit after the transfer's flush: %v %+v; want success", err, r)
		}
	})
	target := (l + 1) % 3
	pc.transferTo(l, target)
	var off, why string
	testutil.WaitFor(t, 10*time.Second, "the new leader has the commit the old one answered during the transfer", func() bool {
		off, why = pc.ttOffset(target)
		return off == "9"
	})

	// A hand-over expecting an offset the new leader no longer has.
	if r := pc.call(pc.nodes[target].Addr(), remoting.RequestUpdateConsumerOffset, ttCommit(11), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit to the new leader: %d %s", r.Code, r.Remark)
	}
	stale := ttCommit(8)
	stale[extHandOverExpect] = "7"
	r := pc.call(pc.nodes[target].Addr(), remoting.RequestUpdateConsumerOffset, stale, nil)
	if r.Code != remoting.ResponseSuccess || r.ExtFields[extHandOverKept] != "11" {
		t.Fatalf("a hand-over expecting 7 where the offset is 11: %d %q %v; want success keeping 11", r.Code, r.Remark, r.ExtFields)
	}
	if off, why = pc.ttOffset(target); off != "11" {
		t.Fatalf("after a stale hand-over the new leader answers %q %s; want 11", off, why)
	}
}

// TestDeposedFlushLeavesCommitsToHandOver: a flush that finds this node no
// longer leading before the role change reached the coalescer (one that
// was waiting out a transfer, which Raft ends with not-leader) leaves its
// commits to the hand-over rather than dropping them.
func TestDeposedFlushLeavesCommitsToHandOver(t *testing.T) {
	hour := func(c *BrokerConfig) { c.ConsumerOffsetCommitCoalescer = time.Hour }
	oldPC, oldRep := startFakeProc(t, hour)
	newPC, _ := startFakeProc(t, hour)
	oldAddr, newAddr := oldPC.nodes[0].Addr(), newPC.nodes[0].Addr()
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@ho", ConsumerDataSet: []wire.HeartbeatConsumerData{{
		GroupName: "TTG", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "TT", SubString: "*", SubVersion: 1}},
	}}})
	for _, pc := range []*procCluster{oldPC, newPC} {
		addr := pc.nodes[0].Addr()
		pc.createTopic(addr, "TT", 1)
		if r := pc.call(addr, remoting.RequestHeartBeat, nil, hb); r.Code != remoting.ResponseSuccess {
			t.Fatalf("heartbeat to %s: %d %s", addr, r.Code, r.Remark)
		}
	}
	oldRep.setLeader(true, oldAddr)
	if r := oldPC.call(oldAddr, remoting.RequestUpdateConsumerOffset, ttCommit(5), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("commit: %d %s", r.Code, r.Remark)
	}
	oldRep.leader.Store(false) // deposed; the role change is still to come
	oldPC.nodes[0].offsets.flush()
	oldRep.setLeader(false, newAddr)
	testutil.WaitFor(t, 10*time.Second, "the new leader has the deposed leader's commit", func() bool {
		off, _ := newPC.ttOffset(0)
		return off == "5"
	})
}

// TestFollowerPassesOnOfficialClientCommits: RocketMQ's clients send their
// offsets oneway, and in pulls, to the address their route names brokerId
// 0, which names a former leader until their 30 s route refresh. The
// not-leader answer never reaches them, so a follower passes such commits
// on to the leader; dropped, a group whose queue changes owner in that
// window re-consumes what it committed.
func TestFollowerPassesOnOfficialClientCommits(t *testing.T) {
	pc, l := startOffsetsCluster(t, 20*time.Millisecond)
	f1, f2 := (l+1)%3, (l+2)%3
	// A commit is passed on only over the offset the follower has applied
	// (passOn): here the setup's commit of 7.
	testutil.WaitFor(t, 10*time.Second, "the follower applies the commit of 7", func() bool {
		off, ok := pc.groups[f1].State().ConsumerOffset("TTG", "TT", 0)
		return ok && off == 7
	})
	req := remoting.NewRequest(remoting.RequestUpdateConsumerOffset, &wire.UpdateConsumerOffsetRequestHeader{
		ConsumerGroup: "TTG", Topic: "TT", QueueID: 0, CommitOffset: 12}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pc.client.InvokeOneway(ctx, pc.nodes[f1].Addr(), req); err != nil {
		t.Fatalf("oneway commit to a follower: %v", err)
	}
	// A follower that has not applied the topic or the group yet answers
	// the pull not-leader before it looks at the commit.
	testutil.WaitFor(t, 10*time.Second, "the follower applies TT and TTG", func() bool {
		st := pc.groups[f2].State()
		tc, ok := st.Topic("TT")
		_, grouped := st.SubscriptionGroup("TTG")
		return ok && tc.ReadQueueNums == 2 && grouped
	})
	pull := pullExt("TTG", "TT", 1, 0, 0)
	pull["sysFlag"] = strconv.Itoa(int(wire.PullFlagCommitOffset))
	pull["commitOffset"] = "3"
	if r := pc.call(pc.nodes[f2].Addr(), remoting.RequestPullMessage, pull, nil); r.Code == remoting.ResponseSystemError || wire.IsNotLeaderRemark(r.Remark) {
		t.Fatalf("pull with a commit from a follower: %d %s", r.Code, r.Remark)
	}
	leaderHas := func(q int, want string) {
		t.Helper()
		query := map[string]string{"consumerGroup": "TTG", "topic": "TT", "queueId": strconv.Itoa(q)}
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("the leader has the commit of %s on queue %d sent to a follower", want, q), func() bool {
			r := pc.call(pc.nodes[l].Addr(), remoting.RequestQueryConsumerOffset, query, nil)
			return r.Code == remoting.ResponseSuccess && r.ExtFields["offset"] == want
		})
	}
	leaderHas(0, "12")
	leaderHas(1, "3")

	// A commit behind the offset the group has (a late retry, say) is not
	// passed on: it would move the offset back. Each is passed on in a tick
	// of its own, the stale one first.
	// The follower passes a commit on with the offset it has applied as the
	// one expected; the leader refuses it while that lags the leader's.
	testutil.WaitFor(t, 10*time.Second, "the follower applies the commits of 12 and 3", func() bool {
		off0, ok0 := pc.groups[f1].State().ConsumerOffset("TTG", "TT", 0)
		off1, ok1 := pc.groups[f1].State().ConsumerOffset("TTG", "TT", 1)
		return ok0 && off0 == 12 && ok1 && off1 == 3
	})
	oneway := func(q int32, off int64) {
		t.Helper()
		req := remoting.NewRequest(remoting.RequestUpdateConsumerOffset, &wire.UpdateConsumerOffsetRequestHeader{
			ConsumerGroup: "TTG", Topic: "TT", QueueID: q, CommitOffset: off}, nil)
		if err := pc.client.InvokeOneway(ctx, pc.nodes[f1].Addr(), req); err != nil {
			t.Fatalf("oneway commit to a follower: %v", err)
		}
		o := pc.nodes[f1].offsets
		testutil.WaitFor(t, 10*time.Second, "the follower's tick takes the commit", func() bool {
			o.mu.Lock()
			defer o.mu.Unlock()
			return len(o.forwarding) == 0
		})
	}
	oneway(0, 5)
	oneway(1, 9)
	leaderHas(1, "9")
	testutil.WaitFor(t, 10*time.Second, "the leader replicates the commit of 9", func() bool {
		off, ok := pc.groups[l].State().ConsumerOffset("TTG", "TT", 1)
		return ok && off == 9
	})
	if off, _ := pc.groups[l].State().ConsumerOffset("TTG", "TT", 0); off != 12 {
		t.Fatalf("queue 0's offset is %d after a stale commit of 5 reached a follower, want 12 kept", off)
	}
}

// TestFollowerShutdownPassesOnForwardedCommits: a follower being stopped
// still holds the commits official clients sent it since its last tick
// (their route names it leader until it refreshes); they are passed on to
// the leader as the stop's last step for them, not dropped with the node.
func TestFollowerShutdownPassesOnForwardedCommits(t *testing.T) {
	pc, l := startOffsetsCluster(t, time.Hour) // no tick passes them on
	f := (l + 1) % 3
	pc.nodes[l].offsets.flush()
	testutil.WaitFor(t, 10*time.Second, "the follower applies the commit of 7", func() bool {
		off, ok := pc.groups[f].State().ConsumerOffset("TTG", "TT", 0)
		return ok && off == 7
	})
	req := remoting.NewRequest(remoting.RequestUpdateConsumerOffset, &wire.UpdateConsumerOffsetRequestHeader{
		ConsumerGroup: "TTG", Topic: "TT", QueueID: 0, CommitOffset: 12}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pc.client.InvokeOneway(ctx, pc.nodes[f].Addr(), req); err != nil {
		t.Fatalf("oneway commit to a follower: %v", err)
	}
	o := pc.nodes[f].offsets
	testutil.WaitFor(t, 10*time.Second, "the follower holds the commit for the leader", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.forwarding[offsetKey{"TTG", "TT", 0}] == 12
	})
	pc.shutdownNode(f)
	testutil.WaitFor(t, 10*time.Second, "the leader has the commit the stopped follower held", func() bool {
		off, _ := pc.ttOffset(l)
		return off == "12"
	})
}
