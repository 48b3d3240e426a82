package client

import (
	"context"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
)

// TestDefaultAttemptTimeoutLeavesFrozenBroker: with default options (no AttemptTimeout given), a
// broker that keeps its connection open but never answers — a SIGSTOPped
// leader — costs a send about DefaultAttemptTimeout, not the whole
// SendTimeout, before the retry stores it elsewhere.
func TestDefaultAttemptTimeoutLeavesFrozenBroker(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t)
	log := &requestLog{}
	frozen := startFakeBroker(t, "broker-a", log)
	healthy := startFakeBroker(t, "broker-b", log)
	frozen.register(t, ns, 0, 1, map[string]int{"T": 1})
	healthy.register(t, ns, 0, 1, map[string]int{"T": 1})
	frozen.setAnswer(func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand { return nil })
	p := newTestProducer(t, ns, SendTimeout(10*time.Second))
	for i := 0; i < 4; i++ {
		start := time.Now()
		res, err := p.SendSync(context.Background(), NewMessage("T", []byte("x")))
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if res.Queue.BrokerName != "broker-b" {
			t.Fatalf("stored on %s", res.Queue.BrokerName)
		}
		// One frozen attempt at most (DefaultAttemptTimeout) plus slack for
		// a loaded machine; far below the 10 s SendTimeout.
		if took > DefaultAttemptTimeout+2*time.Second {
			t.Fatalf("send %d took %v with default options", i, took)
		}
	}
}
