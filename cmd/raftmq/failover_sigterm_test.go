package main

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestFailoverSigterm: `raftmq failover --sigterm` on real processes. A
// SIGTERMed leader hands leadership off before it exits: the survivors'
// term goes up by exactly one (the transfer's target campaigned at once;
// nobody waited out a heartbeat timeout, no split vote), every phase is
// seen, the route names the new leader, and the producer lost no send.
func TestFailoverSigterm(t *testing.T) {
	o := &failoverOpts{kills: 1, dir: t.TempDir(), senders: 2, phaseTimeout: 30 * time.Second, sigterm: true,
		launch: testLauncher(t), progress: func(s string) { t.Log(s) }}
	rep, err := runFailover(context.Background(), o, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Kills) != 1 {
		t.Fatalf("got %d stops, want 1", len(rep.Kills))
	}
	k := rep.Kills[0]
	for _, ph := range phases {
		if v := ph.get(&k); v < 0 {
			t.Errorf("%s not seen", ph.name)
		}
	}
	if k.NewLeader == "" || k.NewLeader == k.Killed || k.NewTerm != k.OldTerm+1 {
		t.Errorf("stopped %s at term %d, new leader %q at term %d; want a transfer (term + 1)", k.Killed, k.OldTerm, k.NewLeader, k.NewTerm)
	}
	if rep.SendErrors != 0 || rep.Acks == 0 {
		t.Errorf("%d acks, %d failed sends across a planned stop", rep.Acks, rep.SendErrors)
	}
}
