package broker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// createT creates topic T (two queues) on whichever member leads.
func createT(t *testing.T, pc *procCluster) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, "a leader that creates T", func() bool {
		return pc.groups[pc.leader()].UpdateTopic(context.Background(),
			wire.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}) == nil
	})
}

// putAcked stores n messages keyed prefix0.. through whichever member
// leads and returns each one's acknowledgement by key.
func putAcked(t *testing.T, pc *procCluster, prefix string, n int, acks map[string]PutResult) {
	t.Helper()
	for i := 0; i < n; i += 8 {
		var ms []*store.Message
		for j := i; j < min(i+8, n); j++ {
			ms = append(ms, testMessage("T", int32(j%2), fmt.Sprintf("%s%d", prefix, j), "", 0, 512))
		}
		var res []PutResult
		testutil.WaitFor(t, 30*time.Second, "a put", func() bool {
			var err error
			res, err = pc.groups[pc.leader()].PutMessages(context.Background(), ms)
			return err == nil
		})
		for k, r := range res {
			acks[ms[k].Properties[wire.PropertyUniqKey]] = r
		}
	}
}

// A member rebuilt in place (its data wiped) and restarted without
// raftJoin, after the group replaced another member and the operator
// edited its dLegerPeers to the live configuration (docs/operations.md),
// must join the running group rather than bootstrap its own index-1
// configuration entry: its log's first entry is the leader's, its
// CommitLog bytes are the leader's, it catches up to lag 0 and holds
// every acknowledged message.
// The join check asks over the members' client (signed under aclEnable,
// over TLS when the listeners enforce it) and over the Raft transport,
// which finds the group where no name server routes it: a name server
// restarted moments before (here a fresh one, which routes nobody until
// the members re-register).
func TestWipedMemberRejoinsWithoutRaftJoin(t *testing.T) {
	t.Run("disk", func(t *testing.T) { testWipedMemberRejoins(t, startDiskCluster(t, nil), nil) })
	t.Run("acl", func(t *testing.T) {
		testWipedMemberRejoins(t, startACLCluster(t), nil, client.WithCredentials(aclAdmin.AccessKey, aclAdmin.SecretKey))
	})
	t.Run("tls", func(t *testing.T) {
		pc, ca := tlsCluster(t, remoting.TLSEnforcing)
		testWipedMemberRejoins(t, pc, nil, client.WithTLS(ca.CertPath))
	})
	t.Run("name server without the route", func(t *testing.T) {
		_, fresh := startProcNameServer(t)
		testWipedMemberRejoins(t, startDiskCluster(t, nil), func(c *BrokerConfig) { c.NamesrvAddr = fresh })
	})
}

// wipe deletes stopped member i's data: its directory, or its in-memory
// parts (a fresh set at the same Raft address).
func (pc *procCluster) wipe(i int) {
	pc.t.Helper()
	if pc.net == nil {
		if err := os.RemoveAll(pc.cfgs[i].Store.StorePathRootDir); err != nil {
			pc.t.Fatal(err)
		}
		return
	}
	p, err := NewInmemParts(pc.cfgs[i].GroupConfig, pc.net)
	if err != nil {
		pc.t.Fatal(err)
	}
	pc.parts[i], pc.started[i] = p, false
}

// rebuilt, if non-nil, changes the rebuilt member's config before it starts.
func testWipedMemberRejoins(t *testing.T, pc *procCluster, rebuilt func(*BrokerConfig), adminOpts ...client.Opt) {
	createT(t, pc)
	acks := map[string]PutResult{}
	putAcked(t, pc, "a", 64, acks)

	// Replace one follower (old) by n3; the other follower (w) is the
	// one rebuilt.
	l := pc.leader()
	old, w := (l+1)%3, (l+2)%3
	n3addr := addProcMember(t, pc, "n3")
	a, err := client.NewAdmin(append([]client.Opt{client.NameServers(pc.nsAddr)}, adminOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, _, err := a.ReplaceRaftMember(ctx, pc.cfgs[0].BrokerName, pc.cfgs[old].Raft.DLegerSelfID, "n3", n3addr,
		client.RaftMemberOptions{CatchUpTimeout: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	pc.stopNode(old)
	conf, err := pc.groups[pc.leader()].configuration()
	if err != nil {
		t.Fatal(err)
	}
	live := fmtServers(conf)
	putAcked(t, pc, "b", 64, acks)

	testutil.WaitFor(t, 30*time.Second, "the member to rebuild applies everything", func() bool {
		return pc.groups[w].FSMAppliedIndex() >= pc.groups[pc.leader()].FSMAppliedIndex()
	})
	pc.stopNode(w)
	pc.cfgs[w].Raft.DLegerPeers = live
	pc.wipe(w)
	if pc.cfgs[w].RaftJoin {
		t.Fatal("the rebuilt member must start without raftJoin")
	}
	if rebuilt != nil {
		rebuilt(&pc.cfgs[w])
	}
	putAcked(t, pc, "c", 64, acks)
	pc.startNode(w)
	putAcked(t, pc, "d", 64, acks)

	l = pc.leader()
	if l == w {
		t.Fatal("the rebuilt member leads before it caught up")
	}
	lg, wg := pc.groups[l], pc.groups[w]
	testutil.WaitFor(t, 30*time.Second, "the rebuilt member catches up to lag 0", func() bool {
		return wg.Raft().LastIndex() == lg.Raft().LastIndex() && wg.FSMAppliedIndex() >= lg.FSMAppliedIndex()
	})
	var lfirst, wfirst raft.Log
	if err := lg.LogStore().GetLog(1, &lfirst); err != nil {
		t.Fatal(err)
	}
	if err := wg.LogStore().GetLog(1, &wfirst); err != nil {
		t.Fatal(err)
	}
	if lfirst.Type != wfirst.Type || lfirst.Term != wfirst.Term || !bytes.Equal(lfirst.Data, wfirst.Data) {
		t.Fatalf("the rebuilt member's first log entry differs from the leader's:\nleader  %v term %d %v\nrebuilt %v term %d %v",
			lfirst.Type, lfirst.Term, raft.DecodeConfiguration(lfirst.Data), wfirst.Type, wfirst.Term, decodeConf(wfirst))
	}
	lmin, wmin := lg.LogStore().MinPosition(), wg.LogStore().MinPosition()
	if lmin != wmin {
		t.Fatalf("the rebuilt member's CommitLog starts at %d, the leader's at %d", wmin, lmin)
	}
	end, err := lg.LogStore().EndOf(wg.Raft().LastIndex())
	if err != nil {
		t.Fatal(err)
	}
	for pos := lmin; pos < end; {
		b, err := lg.LogStore().ReadRange(pos, int(min(end-pos, 1<<20)))
		if err != nil {
			t.Fatal(err)
		}
		c, err := wg.LogStore().ReadRange(pos, len(b))
		if err != nil || !bytes.Equal(b, c) {
			t.Fatalf("CommitLog bytes at %d differ between the leader and the rebuilt member (%v)", pos, err)
		}
		pos += int64(len(b))
	}
	for key, ack := range acks {
		m, err := wg.Store().LookMessageByOffset(ack.PhysicalOffset)
		if err != nil || m.Properties[wire.PropertyUniqKey] != key {
			t.Fatalf("acknowledged %s (%+v) on the rebuilt member: %v", key, ack, err)
		}
		u, err := wg.Store().ConsumeQueues().Get("T", ack.QueueID).Get(ack.QueueOffset)
		if err != nil || u.PhyOffset != ack.PhysicalOffset {
			t.Fatalf("acknowledged %s (%+v): the rebuilt member's queue unit is %+v (%v)", key, ack, u, err)
		}
	}
	if got := membersOf(t, wg); got != membersOf(t, lg) {
		t.Fatalf("the rebuilt member's configuration %s, the leader's %s", got, membersOf(t, lg))
	}
}

func decodeConf(l raft.Log) any {
	if l.Type != raft.LogConfiguration {
		return l.Type
	}
	return raft.DecodeConfiguration(l.Data)
}

// A whole group wiped and restarted one member after another bootstraps
// from dLegerPeers: the first finds no routed member (the name server
// dropped the stopped members with their connections), the next find
// members holding only their bootstrap entry; the group elects and
// serves on dLegerPeers' configuration.
func TestWipedGroupBootstraps(t *testing.T) {
	t.Parallel()
	pc := startDiskCluster(t, nil)
	acks := map[string]PutResult{}
	createT(t, pc)
	putAcked(t, pc, "a", 8, acks)
	// Followers first: no member becomes leader while it stops.
	l := pc.leader()
	for _, i := range []int{(l + 1) % 3, (l + 2) % 3, l} {
		pc.stopNode(i)
		pc.wipe(i)
	}
	for i := range pc.cfgs {
		pc.startNode(i)
	}
	pc.waitLeaderRegistered()
	createT(t, pc)
	putAcked(t, pc, "b", 8, acks)
	lg := pc.groups[pc.leader()]
	for i, g := range pc.groups {
		testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("member %d applies everything", i), func() bool {
			return g.FSMAppliedIndex() >= lg.FSMAppliedIndex()
		})
		if got := membersOf(t, g); got != "n0:Voter,n1:Voter,n2:Voter" {
			t.Fatalf("member %d's configuration after the wipe: %s", i, got)
		}
	}
}
