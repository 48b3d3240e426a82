package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/wire"
)

// putRequest is one PutMessages call waiting for its entry.
type putRequest struct {
	data  []byte    // the request's messages, stored format, concatenated
	buf   *[]byte   // data's pool handle (batcher_pool.go)
	count int       // messages in data
	idem  []idemKey // Index relative to this request
	at    time.Time // when the request arrived (foreground latency)
	// done receives the outcome exactly once, on the goroutine that
	// completes the entry (or fails the batch); it must not block.
	done func([]PutResult, error)
}

type putResponse struct {
	results []PutResult
	err     error
}

// batchPolicy is the batcher's part of GroupConfig.
type batchPolicy struct {
	maxBytes, maxCount int
	linger, wait       time.Duration
}

// batcher turns concurrent PutMessages calls into few Raft entries: one
// goroutine collects requests while an entry is in flight and proposes
// them as the next entry, so batches grow with load (bounded by
// RaftBatchMaxBytes and RaftBatchMaxCount) and a lone request is proposed
// at once. One Apply future answers every request in its entry. At most
// one entry is in flight.
//
// When to propose (run): every entry costs one fsync on every replica, so
// once the entry in flight is answered the batcher waits (up to
// RaftBatchAdaptiveWait) for the closed-loop senders it expects: the most
// requests it saw in flight, gathered and queued at once during the
// previous gather, minus those in the entry still in flight. That count
// never exceeds the requests really outstanding, so the wait ends when the
// last sender is back, and a lone sender is never held.
type batcher struct {
	pol   batchPolicy
	apply func(raft.Log) (any, error) // Group.applyLog with ApplyTimeout
	msgID func(*PutResult) string     // Group.msgID
	// observe, when set, gets the request count of every proposed entry
	// (the raft_batch_requests histogram).
	observe func(float64)
	// latency, when set, gets each answered request's time from arrival
	// to answer and the time it was answered (the adaptive catch-up pace's
	// signal, catchup_pace.go), so the hook reads no clock of its own.
	latency func(now time.Time, d time.Duration)
	in      chan *putRequest
	freed   chan struct{} // the entry in flight was answered (buffered 1)
	quit    chan struct{}
	done    chan struct{}
	wg      sync.WaitGroup // waiter goroutines

	mu           sync.Mutex
	inflightReqs int // requests in the entry in flight; 0 when none is
}

func newBatcher(g *Group) *batcher {
	c := &g.cfg
	pol := batchPolicy{maxBytes: c.RaftBatchMaxBytes, maxCount: c.RaftBatchMaxCount,
		linger: c.RaftBatchLinger, wait: c.RaftBatchAdaptiveWait}
	apply := func(l raft.Log) (any, error) { return g.applyLog(l, c.ApplyTimeout) }
	var observe func(float64)
	if g.metrics != nil {
		observe = g.metrics.batchRequests.Observe
	}
	b := startBatcher(pol, apply, g.msgID, observe)
	b.latency = g.catchupLatencyHook() // set before any request can arrive
	return b
}

func startBatcher(pol batchPolicy, apply func(raft.Log) (any, error), msgID func(*PutResult) string,
	observe func(float64)) *batcher {
	b := &batcher{pol: pol, apply: apply, msgID: msgID, observe: observe, in: make(chan *putRequest, 1024),
		freed: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

func (b *batcher) close() {
	close(b.quit)
	<-b.done
	b.wg.Wait()
	// Fail whatever is still queued.
	for {
		select {
		case r := <-b.in:
			r.done(nil, ErrGroupClosed)
		default:
			return
		}
	}
}

// inflight returns the requests in the entry in flight (0: none).
func (b *batcher) inflight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inflightReqs
}

// gathering is the batch being collected.
type gathering struct {
	batch []*putRequest
	size  int
	carry *putRequest // did not fit: starts the next batch
}

func (g *gathering) full(pol *batchPolicy) bool {
	return g.carry != nil || len(g.batch) >= pol.maxCount || g.size >= pol.maxBytes
}

func (g *gathering) add(r *putRequest, pol *batchPolicy) {
	if g.size+len(r.data) > pol.maxBytes {
		g.carry = r
		return
	}
	g.batch, g.size = append(g.batch, r), g.size+len(r.data)
}

func (b *batcher) run() {
	defer close(b.done)
	pol := &b.pol
	var carry *putRequest
	// pop estimates the closed-loop senders: the most requests seen in
	// flight plus gathered or queued at once during the previous gather.
	pop := 0
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		g := gathering{}
		if carry != nil {
			g.add(carry, pol)
		} else {
			select {
			case <-b.quit:
				return
			case r := <-b.in:
				g.add(r, pol)
			}
		}
		seen := 0
		armed, expired := false, false
		for {
			reqs := b.inflight()
			n := len(g.batch) + len(b.in) // gathered or queued
			seen = max(seen, reqs+n)
			target := max(max(pop, seen)-reqs, 1)
			// Only run proposes, so once no entry is in flight none appears
			// while gathering: an armed wait always runs to its end.
			if reqs == 0 {
				if g.full(pol) || expired {
					break
				}
				if pol.linger <= 0 && (n >= target || pol.wait <= 0) {
					b.drainQueued(&g)
					break
				}
				if !armed {
					armed = true
					wait := pol.wait
					if pol.linger > 0 {
						wait = pol.linger
					}
					timer.Reset(wait)
				}
			} else if g.full(pol) {
				select { // full: wait for the entry in flight to be answered
				case <-b.freed:
				case <-b.quit:
					b.fail(g.batch, ErrGroupClosed)
					return
				}
				continue
			}
			select {
			case r := <-b.in:
				g.add(r, pol)
			case <-b.freed:
			case <-timer.C:
				expired = true
				b.drainQueued(&g)
			case <-b.quit:
				b.fail(g.batch, ErrGroupClosed)
				return
			}
		}
		timer.Stop()
		pop = max(seen, len(g.batch)) // nothing is in flight here
		carry = g.carry
		b.propose(g.batch, g.size)
	}
}

// drainQueued adds what is already queued while the batch has room.
func (b *batcher) drainQueued(g *gathering) {
	for !g.full(&b.pol) {
		select {
		case r := <-b.in:
			g.add(r, &b.pol)
		default:
			return
		}
	}
}

func (b *batcher) fail(batch []*putRequest, err error) {
	for _, r := range batch {
		r.done(nil, err)
	}
}

// propose builds one entry from batch and answers its requests from a
// waiter goroutine, which signals freed when the entry is answered.
func (b *batcher) propose(batch []*putRequest, size int) {
	data := make([]byte, 0, size)
	c := &Command{Type: CmdMessages}
	n := 0
	for _, r := range batch {
		data = append(data, r.data...)
		for _, k := range r.idem {
			k.Index += uint32(n)
			c.Idem = append(c.Idem, k)
		}
		n += r.count
	}
	putEncodeBufs(batch)
	ext, data, _ := EncodeCommand(c, data)
	if b.observe != nil {
		b.observe(float64(len(batch)))
	}
	b.mu.Lock()
	b.inflightReqs = len(batch)
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		resp, err := b.apply(raft.Log{Type: raft.LogCommand, Data: data, Extensions: ext})
		// Mark the entry answered before answering its senders: a sender
		// answered below must find nothing in flight when it comes back, or
		// run would count it as still in flight and hold the next entry for
		// a sender that is not there (a lone sender would wait out
		// RaftBatchAdaptiveWait every time).
		b.mu.Lock()
		b.inflightReqs = 0
		b.mu.Unlock()
		select {
		case b.freed <- struct{}{}:
		default:
		}
		if err == nil {
			if res, ok := resp.(*applyResult); ok && res.err != nil {
				err = fmt.Errorf("%w: apply: %w", store.ErrServiceNotAvailable, res.err)
			} else if ok && len(res.results) == n {
				off := 0
				now := time.Now()
				for _, r := range batch {
					if b.latency != nil {
						b.latency(now, now.Sub(r.at))
					}
					rs := res.results[off : off+r.count]
					off += r.count
					for i := range rs {
						rs[i].MsgID = b.msgID(&rs[i])
					}
					r.done(rs, nil)
				}
				return
			} else if ok {
				err = fmt.Errorf("%w: apply answered %d results for %d messages", ErrBadCommand, len(res.results), n)
			} else {
				err = fmt.Errorf("%w: unexpected apply response %T", ErrBadCommand, resp)
			}
		}
		b.fail(batch, err)
	}()
}

// applyLog proposes l and waits for it to be applied here. During a
// leadership transfer Raft refuses new entries
// (ErrLeadershipTransferInProgress): the call waits and retries until the
// transfer ends — if this node is still leader the entry goes in, otherwise
// the caller gets ErrNotLeader naming the new leader (the SDK re-sends
// there). A lost leadership leaves the outcome unknown; it is reported as
// not-leader too (retries are safe with the idempotent producer).
func (g *Group) applyLog(l raft.Log, timeout time.Duration) (any, error) {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("%w after %v", ErrApplyTimeout, timeout)
		}
		f := g.raft.ApplyLog(l, left)
		err := f.Error()
		switch {
		case err == nil:
			return f.Response(), nil
		case errors.Is(err, raft.ErrLeadershipTransferInProgress):
			select {
			case <-g.quit:
				return nil, ErrGroupClosed
			case <-time.After(20 * time.Millisecond):
			}
			continue
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
			return nil, g.notLeaderErr(err)
		case errors.Is(err, raft.ErrRaftShutdown):
			return nil, ErrGroupClosed
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return nil, fmt.Errorf("%w after %v: %v", ErrApplyTimeout, timeout, err)
		default:
			return nil, err
		}
	}
}

// msgID is the offset message id of a result. A duplicate's original may
// have been stored by an earlier leader with another store host, so its id
// is rebuilt from the stored copy. A duplicate whose original the dedup
// window no longer holds has no id: the offset in its result is that of
// its own bytes, which no queue references and no lookup would find.
func (g *Group) msgID(r *PutResult) string {
	if r.Duplicate && r.QueueOffset < 0 {
		return ""
	}
	if r.Duplicate {
		if s, err := g.ms.CommitLog().ReadMessage(r.PhysicalOffset); err == nil {
			m, _, err := wire.DecodeMessage(s.B, false)
			s.Release()
			if err == nil {
				return m.MsgID()
			}
		}
	}
	return wire.OffsetMsgID(g.cfg.Store.StoreHost, r.PhysicalOffset)
}

// notLeaderErr wraps ErrNotLeader with the leader's remoting address when
// known (processors put it in the response's leaderAddr).
func (g *Group) notLeaderErr(cause error) error {
	addr := g.LeaderAddr()
	if cause != nil {
		return fmt.Errorf("%w; leader is %q (%v)", ErrNotLeader, addr, cause)
	}
	return fmt.Errorf("%w; leader is %q", ErrNotLeader, addr)
}

// encodeRequest encodes a request's messages for the batcher.
func (g *Group) encodeRequest(msgs []*store.Message) (*putRequest, error) {
	r := &putRequest{count: len(msgs), at: time.Now()}
	r.buf, r.data = getEncodeBuf()
	for i, m := range msgs {
		m.StoreHost = g.cfg.Store.StoreHost
		before := len(r.data)
		var err error
		if r.data, err = wire.AppendMessage(r.data, m); err != nil {
			return nil, err
		}
		if sz := len(r.data) - before; sz > g.cfg.Store.MaxMessageSize {
			return nil, fmt.Errorf("%w: message of %d bytes exceeds maxMessageSize %d", store.ErrMessageIllegal, sz, g.cfg.Store.MaxMessageSize)
		}
		if pid := m.Properties[wire.PropertyProducerID]; pid != "" {
			seq, err := strconv.ParseInt(m.Properties[wire.PropertySequence], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: property %s=%q is not a number", store.ErrMessageIllegal, wire.PropertySequence, m.Properties[wire.PropertySequence])
			}
			r.idem = append(r.idem, idemKey{Index: uint32(i), Producer: pid, Seq: seq})
		}
	}
	if len(r.data) > g.cfg.RaftBatchMaxBytes {
		return nil, fmt.Errorf("%w: request of %d bytes exceeds raftBatchMaxBytes %d", store.ErrMessageIllegal, len(r.data), g.cfg.RaftBatchMaxBytes)
	}
	return r, nil
}

// PutMessages implements Replica.
func (g *Group) PutMessages(ctx context.Context, msgs []*store.Message) ([]PutResult, error) {
	ch := make(chan putResponse, 1)
	g.PutMessagesAsync(ctx, msgs, func(results []PutResult, err error) { ch <- putResponse{results, err} })
	select {
	case resp := <-ch:
		return resp.results, resp.err
	case <-ctx.Done():
		return nil, ctx.Err() // the entry may still commit
	}
}

// PutMessagesAsync implements AsyncPutter: the request goes to the batcher
// and done runs when its entry is applied (on the entry's waiter goroutine,
// once for every request of the entry, one after another) or at once on an
// error before that. ctx bounds only the hand-off to the batcher.
func (g *Group) PutMessagesAsync(ctx context.Context, msgs []*store.Message, done func([]PutResult, error)) {
	if !g.IsLeader() {
		done(nil, g.notLeaderErr(nil))
		return
	}
	if len(msgs) == 0 {
		done(nil, nil)
		return
	}
	if err := g.ms.CheckDiskWritable(); err != nil {
		done(nil, err)
		return
	}
	r, err := g.encodeRequest(msgs)
	if err != nil {
		done(nil, err)
		return
	}
	r.done = done
	select {
	case g.batch.in <- r:
	case <-ctx.Done():
		done(nil, ctx.Err())
	case <-g.quit:
		done(nil, ErrGroupClosed)
	}
}
