package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/storage"
)

// A voter whose Raft log refuses appends (an I/O error stopped it; a full
// disk refuses each batch) still answers the leader's heartbeats, yet can
// no longer help commit anything. Counted as answering, it let
// removeMember take out the one other follower: the new configuration's
// quorum is the leader and that voter, so the removal itself never
// committed and the group stopped taking writes, which the guard exists
// to refuse. A voter answers only when it acknowledged the log past where
// it stood when the check began.
func TestRemoveQuorumCheckIgnoresAVoterThatAcknowledgesNoAppends(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, clusterOpts{sync: true})
	c.createTopic("T", 2)
	c.sendSeq(0, 64)
	l := c.leader()
	var stuck, other *testNode
	for _, n := range c.nodes {
		if n == l {
			continue
		}
		if stuck == nil {
			stuck = n
		} else {
			other = n
		}
	}
	fsys := stuck.parts.FS.(*storage.FaultFS)
	fsys.InjectError(storage.OpWrite, unix.EIO)
	fsys.InjectError(storage.OpMsync, unix.EIO)
	t.Cleanup(func() { // before the cluster's cleanup closes the members
		fsys.InjectError(storage.OpWrite, nil)
		fsys.InjectError(storage.OpMsync, nil)
	})
	c.sendSeq(1, 64) // the leader and the other follower commit it; the stuck one's log stops
	done := make(chan error, 1)
	go func() {
		_, err := l.g().RemoveMember(context.Background(), other.id, false)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrQuorumAtRisk) || !strings.Contains(err.Error(), stuck.id) {
			t.Fatalf("removing %s while %s acknowledges no appends: %v, want ErrQuorumAtRisk; members %s",
				other.id, stuck.id, err, membersOf(t, l.g()))
		}
		t.Logf("refused: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatalf("removing %s while %s acknowledges no appends went ahead and does not commit; members %s",
			other.id, stuck.id, membersOf(t, l.g()))
	}
	c.sendSeq(2, 64)
}
