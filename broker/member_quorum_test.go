package broker

import (
	"context"
	"testing"

	"github.com/hashicorp/raft"
)

// TestRemoveQuorumCheckWaitsForANewLeadersAnswers: a leader that took
// office moments ago (an election, a preferred-leader transfer) has not
// heard from every voter yet. The removal guard gives their answers one
// freshness window instead of refusing at once as if they were down.
func TestRemoveQuorumCheckWaitsForANewLeadersAnswers(t *testing.T) {
	pc := startRealCluster(t, nil)
	g := pc.groups[pc.leader()]
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	conf := f.Configuration()
	var victim string
	for _, s := range conf.Servers {
		if string(s.ID) == g.SelfID() {
			continue
		}
		if victim == "" {
			victim = string(s.ID)
		}
		// As a new leader's tracker: nothing heard from the followers yet.
		g.progress.reset(raft.ServerID(s.ID))
	}
	if err := g.checkQuorumWithout(context.Background(), conf, victim); err != nil {
		t.Fatalf("removing %s with the other follower alive: %v", victim, err)
	}
}
