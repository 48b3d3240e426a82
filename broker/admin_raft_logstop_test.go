package broker

import (
	"errors"
	"testing"
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
