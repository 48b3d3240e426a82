package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// queueStore is a fake broker's storage: offsets per queue, a batch stored
// consecutively, answered as RocketMQ does (comma-joined offset msgIds,
// the first queue offset).
type queueStore struct {
	mu     sync.Mutex
	stored map[MessageQueue][]storedMsg // index = queue offset
}

type storedMsg struct {
	props    map[string]string
	offsetID string
	batched  bool
}

func newQueueStore() *queueStore { return &queueStore{stored: map[MessageQueue][]storedMsg{}} }

func (qs *queueStore) answer(fb *fakeBroker, _ *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.SendMessageRequestHeaderV2
	if err := req.DecodeHeader(&h); err != nil {
		return remoting.NewResponse(remoting.ResponseSystemError, err.Error())
	}
	var props []map[string]string
	if req.Code == remoting.RequestSendBatchMessage {
		entries, err := wire.DecodeBatch(req.Body)
		if err != nil {
			return remoting.NewResponse(remoting.ResponseMessageIllegal, err.Error())
		}
		for _, e := range entries {
			props = append(props, wire.DecodeProperties(e.Properties))
		}
	} else {
		props = append(props, wire.DecodeProperties(h.Properties))
	}
	mq := MessageQueue{Topic: h.Topic, BrokerName: fb.name, QueueID: int(h.QueueID)}
	qs.mu.Lock()
	first := len(qs.stored[mq])
	ids := make([]string, len(props))
	for i, p := range props {
		ids[i] = fmt.Sprintf("%s/%s/%d/%d", fb.name, h.Topic, h.QueueID, first+i)
		qs.stored[mq] = append(qs.stored[mq], storedMsg{props: p, offsetID: ids[i], batched: len(props) > 1})
	}
	qs.mu.Unlock()
	resp := remoting.NewResponse(remoting.ResponseSuccess, "")
	resp.ExtFields = map[string]string{
		"msgId": strings.Join(ids, ","), "queueId": strconv.Itoa(int(h.QueueID)), "queueOffset": strconv.Itoa(first),
	}
	return resp
}

// check asserts that results name exactly what the store holds: each
// result's queue offset holds its UNIQ_KEY and offset msgId, and every
// stored message has one result (so offsets are dense and distinct).
func (qs *queueStore) check(t *testing.T, results []*SendResult) {
	t.Helper()
	qs.mu.Lock()
	defer qs.mu.Unlock()
	seen := map[string]bool{}
	total := 0
	for _, q := range qs.stored {
		total += len(q)
	}
	if total != len(results) {
		t.Fatalf("%d messages stored, %d results", total, len(results))
	}
	for _, r := range results {
		if seen[r.MsgID] {
			t.Fatalf("msgId %s given to two sends", r.MsgID)
		}
		seen[r.MsgID] = true
		q := qs.stored[r.Queue]
		if r.QueueOffset < 0 || r.QueueOffset >= int64(len(q)) {
			t.Fatalf("result %v: offset outside the queue (%d stored)", r, len(q))
		}
		m := q[r.QueueOffset]
		if m.props[wire.PropertyUniqKey] != r.MsgID || m.offsetID != r.OffsetMsgID {
			t.Fatalf("result %v, stored at that offset: %s %s", r, m.props[wire.PropertyUniqKey], m.offsetID)
		}
	}
}

// pendingSends counts the sends waiting in topic's accumulator queue.
func pendingSends(p *Producer, topic string) int {
	p.acc.mu.Lock()
	defer p.acc.mu.Unlock()
	if tq := p.acc.topics[topic]; tq != nil {
		return len(tq.pending)
	}
	return 0
}

// gate makes answer hold the first request until release is closed.
func gate(answer func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand, release chan struct{}) func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand {
	var first atomic.Bool
	return func(fb *fakeBroker, c *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		if first.CompareAndSwap(false, true) {
			<-release
		}
		return answer(fb, c, req)
	}
}

// sendCollector gathers the outcomes of concurrent sends.
type sendCollector struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	results []*SendResult
	errs    []error
}

func (c *sendCollector) add(res *SendResult, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.errs = append(c.errs, err)
		return
	}
	c.results = append(c.results, res)
}

// sync starts a SendSync in its own goroutine.
func (c *sendCollector) sync(p *Producer, msg *Message) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.add(p.SendSync(context.Background(), msg))
	}()
}

// holdFirst sends one message to topic T and waits until the broker (whose
// answer is gated) holds it: the topic's only request slot is then busy, so
// the sends that follow wait to be batched.
func (c *sendCollector) holdFirst(t *testing.T, p *Producer, log *requestLog) {
	t.Helper()
	c.sync(p, NewMessage("T", []byte("first")))
	testutil.WaitFor(t, 5*time.Second, "first request at the broker", func() bool { return len(log.all()) == 1 })
}

// release opens the broker's gate, waits for every send and fails the test
// on any error.
func (c *sendCollector) release(t *testing.T, gate chan struct{}) {
	t.Helper()
	close(gate)
	c.wg.Wait()
	if len(c.errs) > 0 {
		t.Fatal(c.errs)
	}
}

// async starts a SendAsync.
func (c *sendCollector) async(t *testing.T, p *Producer, msg *Message) {
	c.wg.Add(1)
	if err := p.SendAsync(context.Background(), msg, func(res *SendResult, err error) { defer c.wg.Done(); c.add(res, err) }); err != nil {
		t.Fatal(err)
	}
}

// TestAutoBatchCoalesces: while one request is in flight, the sends that
// arrive wait and go as one batch; every caller gets its own result.
func TestAutoBatchCoalesces(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	qs := newQueueStore()
	release := make(chan struct{})
	a.setAnswer(gate(qs.answer, release))
	p := newTestProducer(t, ns, AutoBatch(64, 1<<20, 0), AutoBatchInflight(1))

	var c sendCollector
	c.holdFirst(t, p, log)
	for i := 0; i < 15; i++ {
		msg := NewMessage("T", []byte("m"+strconv.Itoa(i))).WithTags("tag" + strconv.Itoa(i))
		if i%3 == 0 {
			c.async(t, p, msg)
		} else {
			c.sync(p, msg)
		}
	}
	testutil.WaitFor(t, 5*time.Second, "15 sends waiting", func() bool { return pendingSends(p, "T") == 15 })
	c.release(t, release)
	reqs := log.all()
	if len(reqs) != 2 || reqs[0].code != remoting.RequestSendMessageV2 || reqs[1].code != remoting.RequestSendBatchMessage {
		t.Fatalf("%d requests, want one single and one batch", len(reqs))
	}
	entries, err := wire.DecodeBatch(reqs[1].body)
	if err != nil || len(entries) != 15 {
		t.Fatalf("batch: %v, %d entries", err, len(entries))
	}
	for _, e := range entries {
		props := wire.DecodeProperties(e.Properties)
		if "m"+strings.TrimPrefix(props["TAGS"], "tag") != string(e.Body) {
			t.Fatalf("entry properties %v do not belong to body %q", props, e.Body)
		}
	}
	qs.check(t, c.results)
	for _, r := range c.results {
		if r.Status != SendOK || r.Queue.Topic != "T" || !uniqKeyRE.MatchString(r.MsgID) {
			t.Fatalf("result %v", r)
		}
	}
	// An idle producer sends at once, alone.
	if _, err := p.SendSync(context.Background(), NewMessage("T", []byte("idle"))); err != nil {
		t.Fatal(err)
	}
	if reqs := log.all(); len(reqs) != 3 || reqs[2].code != remoting.RequestSendMessageV2 {
		t.Fatalf("idle send went as %+v", reqs[len(reqs)-1])
	}
}

// TestAutoBatchMixed: concurrent sends to two topics on two groups with
// several queues, with delayed, compressed and ordered messages among
// them: every caller's result names its own stored message; messages that
// must go alone do.
func TestAutoBatchMixed(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	qs := newQueueStore()
	for _, name := range []string{"broker-a", "broker-b"} {
		fb := startFakeBroker(t, name, log)
		fb.register(t, ns, 0, 1, map[string]int{"T1": 4, "T2": 3})
		fb.setAnswer(qs.answer)
	}
	p := newTestProducer(t, ns, AutoBatch(8, 64<<10, 0))
	var c sendCollector
	for g := 0; g < 8; g++ {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for i := 0; i < 40; i++ {
				topic := []string{"T1", "T2"}[(g+i)%2]
				msg := NewMessage(topic, []byte(fmt.Sprintf("g%d-%d", g, i)))
				switch i % 10 {
				case 3:
					msg.DelayLevel = 2
					msg = msg.WithProperty("alone", "delay")
				case 5:
					msg.Body = bytes.Repeat([]byte("z"), 5000)
					msg = msg.WithProperty("alone", "compressed")
				case 7:
					c.add(p.SendWithSelector(context.Background(), msg.WithProperty("alone", "ordered"), HashSelector()))
					continue
				}
				c.add(p.SendSync(context.Background(), msg))
			}
		}()
	}
	c.wg.Wait()
	if len(c.errs) > 0 {
		t.Fatal(c.errs)
	}
	if len(c.results) != 320 {
		t.Fatalf("%d results", len(c.results))
	}
	qs.check(t, c.results)
	batches := 0
	for _, r := range log.all() {
		if r.code == remoting.RequestSendBatchMessage {
			batches++
			entries, err := wire.DecodeBatch(r.body)
			if err != nil || len(entries) < 2 || len(entries) > 8 {
				t.Fatalf("batch: %v, %d entries", err, len(entries))
			}
			for _, e := range entries {
				if why := wire.DecodeProperties(e.Properties)["alone"]; why != "" {
					t.Fatalf("a %s message was batched", why)
				}
			}
		}
	}
	t.Logf("%d batch requests among %d requests", batches, len(log.all()))
}

// TestAutoBatchFailureRetriesPerMessage: a batch refused with a retriable
// code counts as each message's first attempt; each then retries alone on
// the other group and succeeds.
func TestAutoBatchFailureRetriesPerMessage(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	qs := newQueueStore()
	release := make(chan struct{})
	refuseBatches := func(fb *fakeBroker, c *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		if req.Code == remoting.RequestSendBatchMessage {
			return answerCode(remoting.ResponseSystemBusy, nil)(fb, c, req)
		}
		return qs.answer(fb, c, req)
	}
	gated := gate(refuseBatches, release)
	for _, name := range []string{"broker-a", "broker-b"} {
		fb := startFakeBroker(t, name, log)
		fb.register(t, ns, 0, 1, map[string]int{"T": 1})
		fb.setAnswer(gated)
	}
	p := newTestProducer(t, ns, AutoBatch(64, 1<<20, 0), AutoBatchInflight(1))
	var c sendCollector
	c.holdFirst(t, p, log)
	for i := 0; i < 10; i++ {
		c.sync(p, NewMessage("T", []byte("m"+strconv.Itoa(i))))
	}
	testutil.WaitFor(t, 5*time.Second, "10 sends waiting", func() bool { return pendingSends(p, "T") == 10 })
	c.release(t, release)
	qs.check(t, c.results)
	reqs := log.all()
	var batch *received
	retried := map[string]string{} // UNIQ_KEY → broker of the retry
	for i := range reqs {
		switch r := reqs[i]; {
		case r.code == remoting.RequestSendBatchMessage && batch != nil:
			t.Fatal("a second batch; the retries should go alone")
		case r.code == remoting.RequestSendBatchMessage:
			batch = &reqs[i]
		case batch != nil:
			retried[wire.DecodeProperties(r.header.Properties)[wire.PropertyUniqKey]] = r.brokerN
		}
	}
	if batch == nil {
		t.Fatal("no batch request")
	}
	entries, _ := wire.DecodeBatch(batch.body)
	if len(entries) != 10 || len(retried) != 10 {
		t.Fatalf("batch of %d, %d retries", len(entries), len(retried))
	}
	for _, e := range entries {
		key := wire.DecodeProperties(e.Properties)[wire.PropertyUniqKey]
		if b, ok := retried[key]; !ok || b == batch.brokerN {
			t.Fatalf("message %s of the batch at %s retried at %q", key, batch.brokerN, b)
		}
	}
}

// TestAutoBatchIdempotent: batched idempotent messages carry their own
// consecutive sequence numbers; after the batch's connection drops
// (outcome unknown) each retries alone on the same queue with the same
// producer id and sequence.
func TestAutoBatchIdempotent(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	qs := newQueueStore()
	release := make(chan struct{})
	var dropped atomic.Bool
	dropBatch := func(fb *fakeBroker, c *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		if req.Code == remoting.RequestSendBatchMessage && dropped.CompareAndSwap(false, true) {
			_ = c.Close()
			return nil
		}
		return qs.answer(fb, c, req)
	}
	gated := gate(dropBatch, release)
	for _, name := range []string{"broker-a", "broker-b"} {
		fb := startFakeBroker(t, name, log)
		fb.register(t, ns, 0, 1, map[string]int{"T": 1})
		fb.setAnswer(gated)
	}
	p := newTestProducer(t, ns, AutoBatch(64, 1<<20, 0), AutoBatchInflight(1), Idempotent(true))
	var c sendCollector
	c.holdFirst(t, p, log)
	for i := 0; i < 6; i++ {
		c.sync(p, NewMessage("T", []byte("m"+strconv.Itoa(i))))
	}
	testutil.WaitFor(t, 5*time.Second, "6 sends waiting", func() bool { return pendingSends(p, "T") == 6 })
	c.release(t, release)
	qs.check(t, c.results)
	reqs := log.all()
	var batch *received
	after := map[string]received{}
	for i := range reqs {
		if reqs[i].code == remoting.RequestSendBatchMessage {
			batch = &reqs[i]
		} else if batch != nil {
			after[wire.DecodeProperties(reqs[i].header.Properties)[wire.PropertyUniqKey]] = reqs[i]
		}
	}
	if batch == nil {
		t.Fatal("no batch request")
	}
	entries, _ := wire.DecodeBatch(batch.body)
	seqs := map[string]bool{}
	for _, e := range entries {
		bp := wire.DecodeProperties(e.Properties)
		r, ok := after[bp[wire.PropertyUniqKey]]
		if !ok {
			t.Fatalf("message %s not retried", bp[wire.PropertyUniqKey])
		}
		rp := wire.DecodeProperties(r.header.Properties)
		if rp[wire.PropertyProducerID] != p.ProducerID() || rp[wire.PropertySequence] != bp[wire.PropertySequence] ||
			r.brokerN != batch.brokerN || r.header.QueueID != batch.header.QueueID {
			t.Fatalf("retry changed identity or queue: batch %s %v, retry %s %v", batch.brokerN, bp, r.brokerN, rp)
		}
		seqs[bp[wire.PropertySequence]] = true
	}
	if len(seqs) != 6 {
		t.Fatalf("sequences %v, want 6 distinct", seqs)
	}
}

// TestAutoBatchClose: Close while sends wait behind a request that never
// returns: every SendAsync callback and every SendSync gets an error, and
// no goroutine is left (goleak in TestMain).
func TestAutoBatchClose(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	a.setAnswer(func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand { return nil })
	p := newTestProducer(t, ns, AutoBatch(64, 1<<20, 0), AutoBatchInflight(1), SendTimeout(time.Minute))
	var c sendCollector
	c.holdFirst(t, p, log)
	for i := 0; i < 6; i++ {
		if i%2 == 0 {
			c.async(t, p, NewMessage("T", []byte("x")))
		} else {
			c.sync(p, NewMessage("T", []byte("x")))
		}
	}
	testutil.WaitFor(t, 5*time.Second, "6 sends waiting", func() bool { return pendingSends(p, "T") == 6 })
	start := time.Now()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.wg.Wait()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close and the sends took %v", d)
	}
	if len(c.results) != 0 || len(c.errs) != 7 {
		t.Fatalf("%d results, %d errors; want 7 errors", len(c.results), len(c.errs))
	}
}

// TestAutoBatchCallerDeadline: a waiting send whose context ends leaves
// the queue with its context's error; the others are unaffected.
func TestAutoBatchCallerDeadline(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	qs := newQueueStore()
	release := make(chan struct{})
	a.setAnswer(gate(qs.answer, release))
	p := newTestProducer(t, ns, AutoBatch(64, 1<<20, 0), AutoBatchInflight(1))
	var c sendCollector
	c.holdFirst(t, p, log)
	c.sync(p, NewMessage("T", []byte("second")))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := p.SendSync(ctx, NewMessage("T", []byte("cancelled"))); errc <- err }()
	testutil.WaitFor(t, 5*time.Second, "2 sends waiting", func() bool { return pendingSends(p, "T") == 2 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) || !errors.Is(err, ErrSendFailed) {
		t.Fatalf("cancelled send: %v", err)
	}
	close(release)
	c.wg.Wait()
	if len(c.errs) > 0 || len(c.results) != 2 {
		t.Fatalf("results %v, errors %v", c.results, c.errs)
	}
	qs.check(t, c.results)
}

func TestAutoBatchOptions(t *testing.T) {
	for name, opt := range map[string]ProducerOpt{
		"negative count":  AutoBatch(-1, 1000, 0),
		"too many":        AutoBatch(5000, 1000, 0),
		"no bytes":        AutoBatch(10, 0, 0),
		"above max size":  AutoBatch(10, 16<<20, 0),
		"negative linger": AutoBatch(10, 1000, -time.Millisecond),
		"inflight 0":      AutoBatchInflight(0),
	} {
		if _, err := NewProducer(NameServers("127.0.0.1:9876"), opt); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, opt := range []ProducerOpt{AutoBatch(0, 0, 0), AutoBatch(1, 0, 0)} {
		p, err := NewProducer(NameServers("127.0.0.1:9876"), opt)
		if err != nil || p.acc != nil {
			t.Fatalf("batching off: %v %v", err, p.acc)
		}
	}
}

// TestAutoBatchLinger: with a linger the first send of an idle topic
// waits for others; a full batch goes at once, a lone send after the
// linger.
func TestAutoBatchLinger(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1, "U": 1})
	qs := newQueueStore()
	a.setAnswer(qs.answer)
	p := newTestProducer(t, ns, AutoBatch(5, 1<<20, 10*time.Second), AutoBatchInflight(1))
	var c sendCollector
	start := time.Now()
	for i := 0; i < 5; i++ {
		c.sync(p, NewMessage("T", []byte("m"+strconv.Itoa(i))))
	}
	c.wg.Wait()
	if len(c.errs) > 0 {
		t.Fatal(c.errs)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a full batch waited %v for its linger", d)
	}
	reqs := log.all()
	if len(reqs) != 1 || reqs[0].code != remoting.RequestSendBatchMessage {
		t.Fatalf("%d requests, want one batch", len(reqs))
	}
	qs.check(t, c.results)

	p2 := newTestProducer(t, ns, AutoBatch(5, 1<<20, 30*time.Millisecond))
	start = time.Now()
	if _, err := p2.SendSync(context.Background(), NewMessage("U", []byte("alone"))); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("a lone send returned after %v, before its linger", d)
	}
	if reqs := log.all(); len(reqs) != 2 || reqs[1].code != remoting.RequestSendMessageV2 {
		t.Fatalf("lone send went as %+v", reqs[len(reqs)-1])
	}
}

// TestAutoBatchMaxBytes: maxBytes bounds the encoded batch body
// (properties and framing included), and a message larger than it goes
// alone.
func TestAutoBatchMaxBytes(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	qs := newQueueStore()
	release := make(chan struct{})
	a.setAnswer(gate(qs.answer, release))
	const maxBytes = 2000
	p := newTestProducer(t, ns, AutoBatch(64, maxBytes, 0), AutoBatchInflight(1), Idempotent(true))
	var c sendCollector
	c.holdFirst(t, p, log)
	for i := 0; i < 20; i++ {
		c.sync(p, NewMessage("T", bytes.Repeat([]byte("b"), 100)).WithTags("TagA").WithKeys("key-"+strconv.Itoa(i)).WithProperty("user", "value"))
	}
	c.sync(p, NewMessage("T", bytes.Repeat([]byte("B"), maxBytes)))
	testutil.WaitFor(t, 5*time.Second, "21 sends waiting", func() bool { return pendingSends(p, "T") == 20 && len(log.all()) == 2 })
	c.release(t, release)
	qs.check(t, c.results)
	batched := 0
	for _, r := range log.all() {
		if r.code != remoting.RequestSendBatchMessage {
			continue
		}
		entries, _ := wire.DecodeBatch(r.body)
		batched += len(entries)
		if len(r.body) > maxBytes {
			t.Fatalf("batch body of %d bytes (%d entries), above maxBytes %d", len(r.body), len(entries), maxBytes)
		}
	}
	if batched != 20 {
		t.Fatalf("%d messages batched, want the 20 small ones", batched)
	}
}

// TestAutoBatchStress: many senders with short, random deadlines and
// cancellations against brokers that answer late or refuse at random.
// Every call returns, every success names its own stored message, and
// afterwards no slot or waiting send is left behind (a leaked slot would
// stall the topic for good).
func TestAutoBatchStress(t *testing.T) {
	ns := startNameServer(t)
	qs := newQueueStore()
	var n atomic.Int64
	flaky := func(fb *fakeBroker, c *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		switch k := n.Add(1); {
		case k%7 == 0:
			return answerCode(remoting.ResponseSystemBusy, nil)(fb, c, req)
		case k%5 == 0:
			time.Sleep(3 * time.Millisecond) // a slow answer: callers' deadlines pass
		}
		return qs.answer(fb, c, req)
	}
	for _, name := range []string{"broker-a", "broker-b"} {
		fb := startFakeBroker(t, name, &requestLog{discard: true})
		fb.register(t, ns, 0, 1, map[string]int{"T": 2})
		fb.setAnswer(flaky)
	}
	for name, opts := range map[string][]ProducerOpt{
		"default":                {AutoBatch(8, 64<<10, 0)},
		"inflight 1, idempotent": {AutoBatch(8, 64<<10, 0), AutoBatchInflight(1), Idempotent(true)},
		"linger 2ms, inflight 3": {AutoBatch(8, 64<<10, 2*time.Millisecond), AutoBatchInflight(3)},
	} {
		p := newTestProducer(t, ns, opts...)
		var c sendCollector
		for g := 0; g < 16; g++ {
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				for i := 0; i < 40; i++ {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+(g+i)%6)*2*time.Millisecond)
					if i%9 == 0 {
						cancel() // already cancelled
					}
					msg := NewMessage("T", []byte(fmt.Sprintf("g%d-%d", g, i)))
					if i%2 == 0 {
						c.add(p.SendSync(ctx, msg))
						cancel()
						continue
					}
					c.wg.Add(1)
					if err := p.SendAsync(ctx, msg, func(res *SendResult, err error) { defer c.wg.Done(); c.add(res, err) }); err != nil {
						c.wg.Done()
						c.add(nil, err)
					}
					cancel()
				}
			}()
		}
		c.wg.Wait()
		if len(c.results)+len(c.errs) != 16*40 {
			t.Fatalf("%d results + %d errors for %d sends", len(c.results), len(c.errs), 16*40)
		}
		qs.mu.Lock()
		ids := map[string]bool{}
		for _, r := range c.results {
			q := qs.stored[r.Queue]
			if ids[r.MsgID] || r.QueueOffset >= int64(len(q)) || q[r.QueueOffset].props[wire.PropertyUniqKey] != r.MsgID {
				qs.mu.Unlock()
				t.Fatalf("result %v does not name its own stored message", r)
			}
			ids[r.MsgID] = true
		}
		qs.mu.Unlock()
		// Nothing left behind: a fresh send goes through, and the topic has
		// no slot in use and no waiting send.
		if _, err := p.SendSync(context.Background(), NewMessage("T", []byte("after"))); err != nil {
			t.Fatal(err)
		}
		p.acc.mu.Lock()
		tq := p.acc.topics["T"]
		left, inflight := len(tq.pending), tq.inflight
		p.acc.mu.Unlock()
		if left != 0 || inflight != 0 {
			t.Fatalf("after the sends: %d waiting, %d slots in use", left, inflight)
		}
		t.Logf("%s: %d succeeded, %d failed", name, len(c.results), len(c.errs))
	}
}
