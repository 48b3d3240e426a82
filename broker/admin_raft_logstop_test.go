package broker

import (
	"errors"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// stoppedLog is a member whose Raft log reports a write failure.
type stoppedLog struct {
	*Group
	err error
}

func (s stoppedLog) LogStopped() error { return s.err }

// TestRaftStatusReportsStoppedLog: RAFT_STATUS carries the failure that
// stopped a member's log, and nothing while the log accepts appends.
func TestRaftStatusReportsStoppedLog(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	g := c.leader().g()
	st, err := collectRaftStatus(g, true)
	if err != nil {
		t.Fatal(err)
	}
	if st.LogStopped != "" {
		t.Fatalf("healthy member reports logStopped %q", st.LogStopped)
	}
	cause := errors.New("raftlog: write commitlog/00000000000000000000: input/output error")
	st, err = collectRaftStatus(stoppedLog{g, cause}, true)
	if err != nil {
		t.Fatal(err)
	}
	if st.LogStopped != cause.Error() {
		t.Fatalf("logStopped %q, want %q", st.LogStopped, cause.Error())
	}
}

// A member whose Raft log stopped (a write failure) stores and
// acknowledges nothing, yet its applied index still equals its commit
// index: /readyz answered 200, and a rolling restart waiting on it would
// stop the next member while this one is out, leaving the group without
// a quorum. It is not ready, and the body says why.
func TestReadyRefusesStoppedLog(t *testing.T) {
	c := newTestCluster(t, clusterOpts{})
	g := c.leader().g()
	ctl := &Controller{rep: g}
	ctl.state.Store(stateServing)
	testutil.WaitFor(t, 10*time.Second, "the healthy leader ready", func() bool { ok, _ := ctl.ready(); return ok })

	cause := errors.New("raftlog: write commitlog/00000000000000000000: input/output error")
	ctl = &Controller{rep: stoppedLog{g, cause}}
	ctl.state.Store(stateServing)
	ok, body := ctl.ready()
	if rb := body.(readyBody); ok || rb.LogStopped != cause.Error() {
		t.Fatalf("member with a stopped log: ready %v, body %+v; want not ready with logStopped", ok, rb)
	}
}
