package client

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// refuseBatchesIllegal answers every SEND_BATCH_MESSAGE with
// MESSAGE_ILLEGAL, as a broker whose maxBatchMessages (or maxMessageSize)
// is below the batch does, and stores single sends in qs.
func refuseBatchesIllegal(qs *queueStore) func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand {
	return func(fb *fakeBroker, c *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		if req.Code == remoting.RequestSendBatchMessage {
			return remoting.NewResponse(remoting.ResponseMessageIllegal, "the batch holds 6 messages, above maxBatchMessages 4")
		}
		return qs.answer(fb, c, req)
	}
}

// TestAutoBatchRefusedBatchGoesAlone: a broker that refuses the batch
// AutoBatch made of several sends (MESSAGE_ILLEGAL: its maxBatchMessages or
// maxMessageSize is below the batch) stored none of them; each message
// then goes alone and is stored, instead of every caller failing for a
// request shape it never asked for. The one group leaves no other to try,
// and no retries are allowed: the batch is not one of a message's attempts.
func TestAutoBatchRefusedBatchGoesAlone(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	qs := newQueueStore()
	release := make(chan struct{})
	a.setAnswer(gate(refuseBatchesIllegal(qs), release))
	p := newTestProducer(t, ns, AutoBatch(64, 1<<20, 0), AutoBatchInflight(1), RetryTimesWhenSendFailed(0))
	var c sendCollector
	c.holdFirst(t, p, log)
	for i := 0; i < 6; i++ {
		if i%2 == 0 {
			c.async(t, p, NewMessage("T", []byte("m"+strconv.Itoa(i))))
		} else {
			c.sync(p, NewMessage("T", []byte("m"+strconv.Itoa(i))))
		}
	}
	testutil.WaitFor(t, 5*time.Second, "6 sends waiting", func() bool { return pendingSends(p, "T") == 6 })
	c.release(t, release)
	if len(c.results) != 7 {
		t.Fatalf("%d results, want 7", len(c.results))
	}
	qs.check(t, c.results)
	batches := 0
	for _, r := range log.all() {
		if r.code == remoting.RequestSendBatchMessage {
			batches++
		}
	}
	if batches == 0 {
		t.Fatal("no batch was tried; the test did not exercise a refused batch")
	}
}

// TestAutoBatchBadNeighbour: a message the broker refuses only as part of
// a batch (a DELAY property set directly) or that no request may carry
// (properties longer than PROPLEN can say) does not fail the sends that
// happened to wait beside it: they are stored, and the bad one alone gets
// its own error.
func TestAutoBatchBadNeighbour(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	qs := newQueueStore()
	release := make(chan struct{})
	// The broker refuses a batch carrying a delay level, as raftmq's and
	// RocketMQ's do.
	refuseDelayed := func(fb *fakeBroker, c *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		if req.Code == remoting.RequestSendBatchMessage {
			entries, err := wire.DecodeBatch(req.Body)
			if err != nil {
				return remoting.NewResponse(remoting.ResponseMessageIllegal, err.Error())
			}
			for _, e := range entries {
				if wire.DecodeProperties(e.Properties)[wire.PropertyDelayTimeLevel] != "" {
					return remoting.NewResponse(remoting.ResponseMessageIllegal, "batch messages cannot carry a delay level")
				}
			}
		}
		return qs.answer(fb, c, req)
	}
	a.setAnswer(gate(refuseDelayed, release))
	p := newTestProducer(t, ns, AutoBatch(64, 1<<20, 0), AutoBatchInflight(1))
	var c sendCollector
	c.holdFirst(t, p, log)
	for i := 0; i < 4; i++ {
		c.sync(p, NewMessage("T", []byte("good"+strconv.Itoa(i))))
	}
	delayed := NewMessage("T", []byte("delayed")).WithProperty(wire.PropertyDelayTimeLevel, "2")
	c.sync(p, delayed)
	hugeErr := make(chan error, 1)
	huge := NewMessage("T", []byte("huge")).WithProperty("big", strings.Repeat("x", wire.MaxPropertiesLen))
	go func() { _, err := p.SendSync(context.Background(), huge); hugeErr <- err }()
	// The delayed message either waits to be batched or, as it may not
	// be, goes alone at once; the others wait.
	testutil.WaitFor(t, 5*time.Second, "6 sends waiting or sent", func() bool {
		n := pendingSends(p, "T")
		return n == 6 || n == 5 && len(log.all()) == 2
	})
	err := <-waitAfter(release, hugeErr)
	c.wg.Wait()
	if !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("message with overlong properties: %v, want ErrInvalidMessage", err)
	}
	if len(c.errs) > 0 {
		t.Fatalf("well-formed sends failed beside a bad one: %v", c.errs)
	}
	if len(c.results) != 6 {
		t.Fatalf("%d results, want 6", len(c.results))
	}
	qs.check(t, c.results)
	for _, r := range log.all() {
		if r.code != remoting.RequestSendBatchMessage {
			continue
		}
		entries, _ := wire.DecodeBatch(r.body)
		for _, e := range entries {
			if wire.DecodeProperties(e.Properties)[wire.PropertyDelayTimeLevel] != "" {
				t.Fatal("a message with a DELAY property was batched")
			}
		}
	}
}

// waitAfter closes gate and returns ch.
func waitAfter(gate chan struct{}, ch chan error) chan error {
	close(gate)
	return ch
}
