package client

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

// TestProducerOrderedSendKeepsQueueWhileGroupHasNoMaster: while a broker
// group has no master in the route (its leader died and the member that
// takes over has not registered as brokerId 0 yet: a raftmq election, a
// few hundred milliseconds), an ordered send keeps choosing among the same
// queues, so its key stays on its queue and is stored there through the
// surviving member. Leaving the group out of the selector's list would
// move the key to another group's queue, where a consumer may take it
// before the messages the old queue still holds: the order would break
// without any error.
func TestProducerOrderedSendKeepsQueueWhileGroupHasNoMaster(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a0 := startFakeBroker(t, "broker-a", log)
	a1 := startFakeBroker(t, "broker-a", log)
	b0 := startFakeBroker(t, "broker-b", log)
	topics := map[string]int{"T": 2}
	a0.register(t, ns, 0, 1, topics)
	a1.register(t, ns, 1, 1, topics)
	b0.register(t, ns, 0, 1, topics)
	p := newTestProducer(t, ns)
	ctx := context.Background()

	// A key whose queue is one of broker-a's.
	info, err := p.PublishQueues(ctx, "T")
	if err != nil || len(info) != 4 {
		t.Fatalf("queues %v: %v", info, err)
	}
	var key string
	var want MessageQueue
	for i := 0; key == ""; i++ {
		k := "key" + strconv.Itoa(i)
		if mq, _ := HashSelector().Select(&Message{ShardingKey: k}, info); mq.BrokerName == "broker-a" {
			key, want = k, mq
		}
	}
	send := func(body string) *SendResult {
		t.Helper()
		m := NewMessage("T", []byte(body))
		m.ShardingKey = key
		res, err := p.SendWithSelector(ctx, m, HashSelector())
		if err != nil {
			t.Fatalf("ordered send %s: %v", body, err)
		}
		return res
	}
	if res := send("first"); res.Queue != want {
		t.Fatalf("first message stored on %v, want %v", res.Queue, want)
	}

	// broker-a's master dies; the name server drops it, and the group's
	// other member (which now leads) is not brokerId 0 yet.
	a0.stop()
	testutil.WaitFor(t, 5*time.Second, "route without broker-a's master", func() bool {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		rd, _, err := p.routes.fetchRoute(rctx, "T")
		if err != nil {
			return false
		}
		for _, bd := range rd.BrokerDatas {
			if bd.BrokerName == "broker-a" {
				_, master := bd.BrokerAddrs[wire.MasterID]
				return !master
			}
		}
		return false
	})
	if _, err := p.routes.refresh(ctx, "T", false, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if res := send("after" + strconv.Itoa(i)); res.Queue != want || res.Addr != a1.addr {
			t.Fatalf("message for key %s stored on %v at %s while broker-a elects; want %v at %s", key, res.Queue, res.Addr, want, a1.addr)
		}
	}
}
