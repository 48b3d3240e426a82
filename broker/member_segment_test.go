package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// CommitLog positions depend on the segment size (raftlog): a learner
// whose mappedFileSizeCommitLog differs from the group's lays the same
// log out at other positions, so the offset msgIds producers were given
// do not hold on it, and a catch-up between it and the others (either
// way) fetches bytes for positions that are not its own. It stays a
// learner, and the add says why at once instead of promoting it.
func TestPromotionRefusesADifferentSegmentSize(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	c.createTopic("T", 2)
	for k := range 10 {
		c.sendSeq(k, 256)
	}
	l := c.leader()
	n3 := addTestNodeWith(t, c, "n3", 3, func(cfg *GroupConfig) {
		cfg.Store.MappedFileSizeCommitLog = 2 * c.nodes[0].cfg.Store.MappedFileSizeCommitLog
	})
	addr, _ := n3.cfg.Raft.SelfAddr()
	_, err := l.g().AddMember(context.Background(), "n3", addr, AddMemberOptions{Timeout: 30 * time.Second})
	if !errors.Is(err, ErrMembershipConflict) || !strings.Contains(err.Error(), "mappedFileSizeCommitLog") {
		t.Fatalf("add of a learner with another segment size: %v, want ErrMembershipConflict naming mappedFileSizeCommitLog; "+
			"members %s", err, membersOf(t, l.g()))
	}
	t.Logf("refused: %v", err)
	if got := membersOf(t, l.g()); !strings.Contains(got, "n3:Nonvoter") {
		t.Fatalf("members after the refused promotion: %s, want n3 a learner still", got)
	}
}
