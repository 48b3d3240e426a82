package client

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// An orderly batch that exhausted its redeliveries is dead-lettered
// message by message; when a later message's send fails, the batch is
// consumed again and, failing again, dead-lettered again. The messages
// that already reached the DLQ must not be sent a second time: each
// would be one more copy in %DLQ%group.
func TestOrderlyDeadLetterPartialFailureSendsEachOnce(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, "%RETRY%PG": 1})
	b.put("T", 0, "a", nil)
	b.put("T", 0, "b", nil)

	var mu sync.Mutex
	failB := true // the DLQ send of "b" fails until the batch is consumed again
	var calls int
	var stored []string // bodies stored in the retry topic (the DLQ path)
	b.answer(remoting.RequestSendMessageV2, func(req *remoting.RemotingCommand) *remoting.RemotingCommand {
		var h wire.SendMessageRequestHeaderV2
		if err := req.DecodeHeader(&h); err != nil {
			return remoting.NewResponse(remoting.ResponseSystemError, err.Error())
		}
		mu.Lock()
		fail := failB && string(req.Body) == "b"
		if !fail && h.Topic == wire.RetryTopic("PG") {
			stored = append(stored, string(req.Body))
		}
		mu.Unlock()
		if fail {
			return remoting.NewResponse(remoting.ResponseSystemError, "store refused b")
		}
		return b.send(nil, req)
	})

	p := newTestPush(t, ns, "PG", ConsumeFrom(ConsumeFromFirstOffset), MaxReconsumeTimes(0),
		ConsumeMessageBatchMaxSize(2), PullBatchSize(2), SuspendCurrentQueueTime(10*time.Millisecond))
	if err := p.Subscribe("T", "*"); err != nil {
		t.Fatal(err)
	}
	if err := p.RegisterOrderlyListener(func(_ context.Context, oc *ConsumeOrderlyContext, msgs []*MessageExt) OrderlyResult {
		if oc.Queue.Topic != "T" {
			return OrderlySuccess // the fake broker keeps the DLQ's messages in the retry topic
		}
		mu.Lock()
		defer mu.Unlock()
		if len(msgs) == 2 {
			if calls++; calls == 2 {
				failB = false
			}
		}
		return SuspendCurrentQueueAMoment
	}); err != nil {
		t.Fatal(err)
	}
	startPush(t, p)
	testutil.WaitFor(t, 10*time.Second, "the batch dead-lettered and committed", func() bool {
		off, ok := b.offset("PG", "T", 0)
		if !ok || off != 2 {
			off, _ = p.core.store.Read(context.Background(), MessageQueue{"T", "broker-a", 0}, ReadFromMemory)
		}
		return off == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if calls < 2 {
		t.Fatalf("the listener got the batch of two %d times; the test needs the DLQ send of b to fail once", calls)
	}
	if fmt.Sprint(stored) != "[a b]" {
		t.Fatalf("sent to the DLQ: %v, want [a b]: each message once", stored)
	}
}
