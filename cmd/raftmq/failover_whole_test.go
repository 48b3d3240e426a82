package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
)

// TestFailoverWholeWaitsForReplay: a SIGKILLed member re-applies its whole
// log since its last snapshot when it restarts, and Raft's applied index
// (what /readyz compares with the commit index) moves as soon as an entry
// is queued for the FSM, thousands of entries before the FSM applied it.
// waitWhole must not call such a group whole: the next kill would find
// the restarted member still replaying, and if it won the election its
// barrier, hence the first write, would wait for the rest of the replay.
// The log is made of many small entries, as the failover report's
// senders write it, so that the replay outlasts the restarted member's
// registration.
func TestFailoverWholeWaitsForReplay(t *testing.T) {
	const entries = 4000
	// Acks before fsync: the entries are what the test needs, not their
	// fsyncs, which would make writing them take half a minute.
	c, p := startProbedCluster(t, "ReplayTopic", 4, append(slices.Clone(noStopHandOff),
		"flushDiskType=ASYNC_FLUSH", "raftAcksBeforeFsync=true")...)
	ctx := context.Background()
	prod, err := client.NewProducer(client.NameServers(c.NS.Addr()), client.ProducerGroup("replay_producer"),
		client.SendTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := prod.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prod.Close(context.Background()) })
	// One synchronous sender: every message is an entry of its own.
	body := make([]byte, 64)
	t0 := time.Now()
	for i := range entries {
		if _, err := prod.SendSync(ctx, client.NewMessage(p.topic, body)); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	t.Logf("%d sends took %v", entries, time.Since(t0))

	addrs, err := p.route(ctx)
	if err != nil {
		t.Fatal(err)
	}
	follower := c.Nodes[0]
	for _, n := range c.Nodes {
		if n.Addr() != routeLeader(addrs) {
			follower = n
			break
		}
	}
	if _, err := c.Kill(follower); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(follower); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if err := waitWhole(ctx, p, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("group whole %v after %s restarted", time.Since(t1), follower.ID)
	for _, n := range c.Nodes {
		st, err := p.raftStatus(ctx, n.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if st.FSMPending > 0 {
			t.Errorf("waitWhole returned while %s still had %d batches of entries queued for its FSM (applied index %d, commit %d)",
				n.ID, st.FSMPending, st.AppliedIndex, st.CommitIndex)
		}
	}
}
