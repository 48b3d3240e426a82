package broker

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
)

// The RAFT_STATUS probe ends when its caller's context does: a leadership
// transfer asks each candidate within learnerProbeTimeout, and a planned
// stop's hand-off within what is left of shutdownTransferTimeout, while
// the probe's own fall-backs (the name servers' route, then each address)
// would otherwise take a second per name server and per address that does
// not answer.
func TestRaftStatusProbeEndsWithItsContext(t *testing.T) {
	ns := hungAddr(t) + ";" + hungAddr(t) + ";" + hungAddr(t)
	rep := newFakeReplica(t, "127.0.0.1:1")
	c, err := New(testBrokerConfig(t, ns, 1), rep, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	probe := c.raftStatusProbe(&followerLag{c: c})

	const budget = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	start := time.Now()
	_, err = probe(ctx, "n9")
	took := time.Since(start)
	if err == nil {
		t.Fatal("a probe of a member no name server answers for succeeded")
	}
	// Each hung name server alone costs followerLagTimeout (1 s).
	if took > budget+followerLagTimeout/2 {
		t.Fatalf("the probe took %v with a context of %v (%v)", took.Round(time.Millisecond), budget, err)
	}
}
