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
)

// putRequest is one PutMessages call waiting for its entry.
type putRequest struct {
	data  []byte    // the request's messages, stored format, concatenated
	count int       // messages in data
	idem  []idemKey // Index relative to this request
	// done receives the outcome exactly once, on the goroutine that
	// completes the entry (or fails the batch); it must not block.
	done func([]PutResult, error)
}

type putResponse struct {
	results []PutResult
	err     error
}

// batcher turns concurrent PutMessages calls into few Raft entries: one
// goroutine collects requests while up to RaftMaxInflight entries are in
// flight, so batches grow with load (bounded by RaftBatchMaxBytes and
// RaftBatchMaxCount) and a lone request is proposed at once. One Apply
// future answers every request of its entry.
type batcher struct {
	g     *Group
	in    chan *putRequest
	slots chan struct{} // one token per entry in flight
	quit  chan struct{}
	done  chan struct{}
	wg    sync.WaitGroup // waiter goroutines
}

func newBatcher(g *Group) *batcher {
	b := &batcher{g: g, in: make(chan *putRequest, 1024), slots: make(chan struct{}, g.cfg.RaftMaxInflight),
		quit: make(chan struct{}), done: make(chan struct{})}
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

func (b *batcher) run() {
	defer close(b.done)
	cfg := &b.g.cfg
	var carry *putRequest
	prev := 0 // requests in the previous entry
	for {
		var batch []*putRequest
		size := 0
		// early counts the requests that arrived while every in-flight
		// slot was taken: closed-loop senders have one request out, so
		// these came from senders other than the ones the last entry is
		// about to answer (see drain).
		early := 0
		if carry != nil {
			batch, size, carry = append(batch, carry), len(carry.data), nil
		} else {
			select {
			case <-b.quit:
				return
			case r := <-b.in:
				batch, size = append(batch, r), len(r.data)
				if len(b.slots) == cap(b.slots) {
					early++
				}
			}
		}
		open := func() bool { return carry == nil && len(batch) < cfg.RaftBatchMaxCount && size < cfg.RaftBatchMaxBytes }
		add := func(r *putRequest) {
			if size+len(r.data) > cfg.RaftBatchMaxBytes {
				carry = r // starts the next entry
				return
			}
			batch, size = append(batch, r), size+len(r.data)
		}
		// Gather while every in-flight slot is taken.
		gotSlot := false
	gather:
		for open() {
			select {
			case r := <-b.in:
				add(r)
				early++
			case b.slots <- struct{}{}:
				gotSlot = true
				break gather
			case <-b.quit:
				b.fail(batch, ErrGroupClosed)
				return
			}
		}
		if !gotSlot {
			select {
			case b.slots <- struct{}{}:
			case <-b.quit:
				b.fail(batch, ErrGroupClosed)
				return
			}
		}
		target := prev
		if early > 0 {
			target = min(prev+early, cfg.RaftBatchMaxCount)
		}
		b.drain(open, add, func() int { return len(batch) }, target)
		prev = len(batch)
		b.propose(batch, size)
	}
}

// drain adds what is already queued (and, with a linger, what arrives
// within it) while the entry has room. Without a fixed linger it waits
// adaptively: for up to RaftBatchAdaptiveWait until the entry holds target
// requests — the previous entry's count plus the requests that arrived
// while it was in flight. Closed-loop senders come back a few hundred µs
// after their answers, and an entry proposed with only the first few of
// them costs a full round of fsyncs on every replica (on one disk shared by
// the replicas, the flush count is the throughput limit). Counting the
// early arrivals matters over the network: there the round trip back to the
// batcher is long enough that 64 senders otherwise settle into two cohorts
// that alternate entries of ~32 (each cohort arriving while the other's
// entry is in flight), twice the fsync rounds per message. A lone sender
// (previous entry of one request, nothing early) is never delayed, and a
// target that is no longer reached decays with the entry sizes.
func (b *batcher) drain(open func() bool, add func(*putRequest), n func() int, target int) {
	linger := b.g.cfg.RaftBatchLinger
	if linger <= 0 && target > n() {
		linger = b.g.cfg.RaftBatchAdaptiveWait
	} else if linger <= 0 {
		target = 0
	}
	if linger > 0 {
		t := time.NewTimer(linger)
		defer t.Stop()
		for open() && (target == 0 || n() < target) {
			select {
			case r := <-b.in:
				add(r)
			case <-t.C:
				return
			case <-b.quit:
				return
			}
		}
	}
	for open() {
		select {
		case r := <-b.in:
			add(r)
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
// waiter goroutine, which frees the in-flight slot when done.
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
	ext, data, _ := EncodeCommand(c, data)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		resp, err := b.g.applyLog(raft.Log{Type: raft.LogCommand, Data: data, Extensions: ext}, b.g.cfg.ApplyTimeout)
		// Free the slot before answering: a sender answered below must find
		// it free when it comes back, or run would count it as an early
		// arrival and hold the next entry for a sender that is not there
		// (a lone sender would wait out RaftBatchAdaptiveWait every time).
		<-b.slots
		if err == nil {
			if res, ok := resp.(*applyResult); ok && res.err != nil {
				err = fmt.Errorf("%w: apply: %w", store.ErrServiceNotAvailable, res.err)
			} else if ok {
				off := 0
				for _, r := range batch {
					rs := res.results[off : off+r.count]
					off += r.count
					for i := range rs {
						rs[i].MsgID = b.g.msgID(&rs[i])
					}
					r.done(rs, nil)
				}
				return
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
// is rebuilt from the stored copy.
func (g *Group) msgID(r *PutResult) string {
	if r.Duplicate && r.QueueOffset >= 0 {
		if s, err := g.ms.CommitLog().ReadMessage(r.PhysicalOffset); err == nil {
			m, _, err := store.DecodeMessage(s.B, false)
			s.Release()
			if err == nil {
				return m.MsgID()
			}
		}
	}
	return store.OffsetMsgID(g.cfg.Store.StoreHost, r.PhysicalOffset)
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
	r := &putRequest{count: len(msgs)}
	for i, m := range msgs {
		m.StoreHost = g.cfg.Store.StoreHost
		before := len(r.data)
		var err error
		if r.data, err = store.AppendMessage(r.data, m); err != nil {
			return nil, err
		}
		if sz := len(r.data) - before; sz > g.cfg.Store.MaxMessageSize {
			return nil, fmt.Errorf("%w: message of %d bytes exceeds maxMessageSize %d", store.ErrMessageIllegal, sz, g.cfg.Store.MaxMessageSize)
		}
		if pid := m.Properties[propertyProducerID]; pid != "" {
			seq, err := strconv.ParseInt(m.Properties[propertySequence], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: property %s=%q is not a number", store.ErrMessageIllegal, propertySequence, m.Properties[propertySequence])
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
