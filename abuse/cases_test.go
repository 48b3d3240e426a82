package abuse

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// cases lists the attacks in the order they run. Acks the cases collect
// themselves (the idempotence victim's) are appended to extra.
func cases(extra *[]ack) []attack {
	return []attack{
		{name: "half frames", bound: func(p profile) int64 { return perConnBound(p.halfFrames) }, start: halfFrames},
		{name: "slowloris", bound: func(p profile) int64 { return perConnBound(p.slowloris) }, start: slowloris},
		{name: "topic flood", bound: fixed(64 << 20), start: topicFlood},
		{name: "retry-queue bomb", bound: fixed(64 << 20), start: retryQueueBomb},
		{name: "offset-key flood", bound: fixed(64 << 20), start: offsetKeyFlood},
		{name: "held pulls", bound: func(p profile) int64 { return int64(p.heldPulls)*(8<<10) + 64<<20 }, start: heldPulls},
		// Held by design: two write buffers of maxWriteQueueBytes plus a
		// frame (the queue and the one being flushed), 16 pull workers'
		// 256 KiB answers and what the kernel buffers took: about 50 MiB
		// (~190 answers are produced before the stall, with 600 requests
		// as with 4000), which is what heap profiles taken during the
		// attack attribute. Those answers are produced in the first
		// second, and a GC forced during that burst counts what it is
		// still copying: the heap read right after it has been 16–220 MiB
		// over the baseline across runs. The bound covers that spread.
		{name: "client that never reads", bound: fixed(256 << 20), start: neverReads},
		{name: "spoofed idempotence id", bound: fixed(64 << 20), start: func(ctx context.Context, e *env) func() string {
			return spoofedIdempotence(ctx, e, extra)
		}},
	}
}

// perConnBound is what n abusive connections may cost the broker's heap:
// a half frame's 4 KiB first step, the connection's 32 KiB read buffer
// and bookkeeping (a claimed 16 MiB is never allocated), plus 64 MiB for
// the rest of the broker's work meanwhile.
func perConnBound(n int) int64 { return int64(n)*(64<<10) + 64<<20 }

// fixed is a bound that does not depend on the profile.
func fixed(b int64) func(profile) int64 { return func(profile) int64 { return b } }

// halfFrames opens connections that each claim a 16 MiB frame and send one
// byte of it, and holds them during the measurement (the broker closes
// them after its frame read timeout, the profile's connTimeout).
func halfFrames(_ context.Context, e *env) func() string {
	n := e.prof.halfFrames
	hdr := binary.BigEndian.AppendUint32(nil, remoting.DefaultMaxFrameSize)
	hdr = append(hdr, 0)
	conns := make([]net.Conn, 0, n)
	e.t.Cleanup(func() {
		for _, nc := range conns {
			_ = nc.Close()
		}
	})
	for range n {
		nc := e.dial()
		conns = append(conns, nc)
		if _, err := nc.Write(hdr); err != nil {
			e.t.Fatal(err)
		}
	}
	var peak float64
	testutil.WaitFor(e.t, 10*time.Second, "the leader reading every half frame", func() bool {
		peak, _ = e.metric("raftmq_broker_incomplete_frame_bytes", "")
		return peak >= float64(n*4<<10)
	})
	return func() string {
		for _, nc := range conns {
			_ = nc.Close()
		}
		return fmt.Sprintf("%d connections × 16 MiB claimed (%d GiB); the leader held %d KiB of frames",
			n, n*16>>10, int64(peak)>>10)
	}
}

// slowloris trickles valid frames a byte every 200 ms on many
// connections: each must be closed by the frame read timeout (the
// profile's connTimeout, frameReadTimeoutMillis) with no request served.
func slowloris(_ context.Context, e *env) func() string {
	n := e.prof.slowloris
	bound := e.prof.connTimeout
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@slowloris"})
	f := frame(e.t, remoting.RequestHeartBeat, nil, hb)
	if trickle := time.Duration(len(f)) * 200 * time.Millisecond; trickle < 2*bound {
		e.t.Fatalf("a %d-byte frame trickles in %v, not well past the frame read timeout %v", len(f), trickle, bound)
	}
	before := e.counter("raftmq_broker_connection_limit_closes_total", `limit="frameReadTimeoutMillis"`)
	var closed, answered, early atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		nc := e.dial()
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := readFrame(nc); err == nil {
				answered.Add(1)
			}
			// The frame's first byte is written after start: a close
			// sooner than the bound after it is not the timeout's.
			if time.Since(start) < bound {
				early.Add(1)
			}
			closed.Add(1)
		}()
		go func() {
			defer wg.Done()
			defer nc.Close()
			for i := 0; i < len(f); i++ {
				if _, err := nc.Write(f[i : i+1]); err != nil {
					return
				}
				// Trickling goes on after the measurement, until the
				// broker closes us (checked below).
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	return func() string {
		testutil.WaitFor(e.t, bound+20*time.Second, fmt.Sprintf("the leader closing every slowloris connection (frame read timeout %v)", bound), func() bool {
			return closed.Load() == int64(n)
		})
		took := time.Since(start)
		wg.Wait()
		if answered.Load() > 0 {
			e.t.Errorf("%d trickled frames were served", answered.Load())
		}
		if early.Load() > 0 {
			e.t.Errorf("%d slowloris connections closed before the frame read timeout %v", early.Load(), bound)
		}
		if closes := e.counter("raftmq_broker_connection_limit_closes_total", `limit="frameReadTimeoutMillis"`) - before; closes != float64(n) {
			e.t.Errorf("connection_limit_closes_total{frameReadTimeoutMillis} grew %v, want %d", closes, n)
		}
		return fmt.Sprintf("%d connections trickling a byte / 200 ms; all closed %.1f s after the first byte (frame read timeout %g s)",
			n, took.Seconds(), bound.Seconds())
	}
}

// Attack rates (see pace): 50× what the limits let through (10 topics
// per second), and floods of what they never let through (a retry queue
// count over 1024, an offset for an unknown key, a held pull beyond the
// cap).
const (
	topicFloodRate  = 500  // sends to new topics per second
	retryBombRate   = 100  // rounds of four requests per second
	offsetFloodRate = 2000 // commits per second
	heldPullRate    = 2000 // pulls asking to be held per second
)

// topicFlood sends to distinct new topic names from 4 goroutines: the
// leader creates at most autoCreateTopicMaxPerSecond (bursts of as many) and
// refuses the rest with a remark naming the key.
func topicFlood(ctx context.Context, e *env) func() string {
	n := e.prof.topicFlood
	before := e.counter("raftmq_broker_limit_refusals_total", `limit="autoCreateTopicMaxPerSecond"`)
	var next, created, refused, other atomic.Int64
	var badRemark atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait := pace(topicFloodRate / 4)
			for ctx.Err() == nil {
				wait()
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				topic := "FLOOD-" + strings.Repeat("x", 100) + "-" + strconv.FormatInt(i, 10)
				resp, err := e.call(e.leaderAddr(), remoting.RequestSendMessage, sendExt(topic, 0, ""), []byte("x"))
				switch {
				case err != nil:
					other.Add(1)
				case resp.Code == remoting.ResponseSuccess:
					created.Add(1)
				case resp.Code == remoting.ResponseSystemBusy || resp.Code == remoting.ResponseSystemError:
					refused.Add(1)
					if !strings.Contains(resp.Remark, "autoCreate") {
						badRemark.Store(resp.Remark)
					}
				default:
					other.Add(1)
					badRemark.Store(fmt.Sprintf("code %d: %s", resp.Code, resp.Remark))
				}
			}
		}()
	}
	return func() string {
		wg.Wait()
		took := time.Since(start)
		if r := badRemark.Load(); r != nil {
			e.t.Errorf("refusal without the key in its remark: %v", r)
		}
		// Defaults: 10 per second, bursts of 10.
		if most := int64(10 + 10*took.Seconds() + 10); created.Load() > most {
			e.t.Errorf("%d topics created in %v, above the rate limit's %d", created.Load(), took, most)
		}
		counted := e.counter("raftmq_broker_limit_refusals_total", `limit="autoCreateTopicMaxPerSecond"`) - before
		if int64(counted) != refused.Load() {
			e.t.Errorf("limit_refusals_total{autoCreateTopicMaxPerSecond} grew %v, %d refusals seen", counted, refused.Load())
		}
		return fmt.Sprintf("%d sends to new topics in %.1f s: %d created, %d refused (autoCreateTopicMaxPerSecond), %d other",
			min(next.Load(), int64(n)), took.Seconds(), created.Load(), refused.Load(), other.Load())
	}
}

// retryQueueBomb is the out-of-memory sequence: updateSubGroup with
// retryQueueNums 2^31−1, a heartbeat of the group, topicStatus of its
// retry topic; and a topic claiming 2^31−1 queues.
func retryQueueBomb(ctx context.Context, e *env) func() string {
	sg := wire.DefaultSubscriptionGroupConfig("evil")
	sg.RetryQueueNums = math.MaxInt32
	body, _ := json.Marshal(sg)
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@evil", ConsumerDataSet: []wire.HeartbeatConsumerData{{
		GroupName: "evil", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "GOOD", SubString: "*", SubVersion: 1}},
	}}})
	var rounds atomic.Int64
	var failure atomic.Value
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait := pace(retryBombRate)
		for ctx.Err() == nil {
			wait()
			resp, err := e.call(e.leaderAddr(), remoting.RequestUpdateAndCreateSubscriptionGroup, nil, body)
			if err != nil || resp.Code != remoting.ResponseInvalidParameter || !strings.Contains(resp.Remark, "1..1024") {
				failure.Store(fmt.Sprintf("updateSubGroup -q 2147483647: %v %v", resp, err))
				return
			}
			if resp, err = e.call(e.leaderAddr(), remoting.RequestHeartBeat, nil, hb); err != nil || resp.Code != remoting.ResponseSuccess {
				failure.Store(fmt.Sprintf("heartbeat: %v %v", resp, err))
				return
			}
			resp, err = e.call(e.leaderAddr(), remoting.RequestGetTopicStatsInfo, map[string]string{"topic": wire.RetryGroupTopicPrefix + "evil"}, nil)
			if err != nil {
				failure.Store(fmt.Sprintf("topicStatus: %v", err))
				return
			}
			if n := strings.Count(string(resp.Body), `"queueId"`); n > 1024 {
				failure.Store(fmt.Sprintf("topicStatus lists %d queues", n))
				return
			}
			resp, err = e.call(e.leaderAddr(), remoting.RequestUpdateAndCreateTopic, map[string]string{"topic": "BOMB",
				"readQueueNums": "2147483647", "writeQueueNums": "2147483647", "perm": "6"}, nil)
			if err != nil || resp.Code != remoting.ResponseInvalidParameter {
				failure.Store(fmt.Sprintf("updateTopic 2^31 queues: %v %v", resp, err))
				return
			}
			rounds.Add(1)
		}
	}()
	return func() string {
		<-done
		if f := failure.Load(); f != nil {
			e.t.Error(f)
		}
		return fmt.Sprintf("%d rounds of updateSubGroup -q 2147483647 (refused: INVALID_PARAMETER), heartbeat, topicStatus %%RETRY%%evil, updateTopic 2^31 queues (refused)",
			rounds.Load())
	}
}

// offsetKeyFlood commits offsets for unknown topics and groups with long
// names: every commit is refused before replication and counted.
func offsetKeyFlood(ctx context.Context, e *env) func() string {
	n := e.prof.offsetFlood
	before := e.counter("raftmq_broker_limit_refusals_total", `limit="offsetCommit"`)
	var next, accepted atomic.Int64
	var wg sync.WaitGroup
	long := strings.Repeat("k", 4000)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait := pace(offsetFloodRate / 8)
			for ctx.Err() == nil {
				wait()
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				topic, group := "OFF-"+strconv.FormatInt(i, 10), "G-"+strconv.FormatInt(i, 10)
				switch i % 3 {
				case 1:
					topic += long
				case 2:
					group += long
				}
				resp, err := e.call(e.leaderAddr(), remoting.RequestUpdateConsumerOffset, map[string]string{"consumerGroup": group,
					"topic": topic, "queueId": strconv.Itoa(w), "commitOffset": "7"}, nil)
				if err == nil && resp.Code == remoting.ResponseSuccess {
					accepted.Add(1)
				}
			}
		}()
	}
	return func() string {
		wg.Wait()
		sent := min(next.Load(), int64(n))
		if accepted.Load() > 0 {
			e.t.Errorf("%d commits for unknown keys accepted", accepted.Load())
		}
		counted := e.counter("raftmq_broker_limit_refusals_total", `limit="offsetCommit"`) - before
		if int64(counted) != sent {
			e.t.Errorf("limit_refusals_total{offsetCommit} grew %v for %d commits", counted, sent)
		}
		return fmt.Sprintf("%d commits for unknown topics/groups (a third with 4000-byte names): all refused before replication", sent)
	}
}

// heldPulls asks the leader to hold many pulls on an empty topic (two
// connections): it holds up to maxHeldPullsPerConnection per connection
// and answers the rest SYSTEM_BUSY at once; a message then wakes every
// held pull.
func heldPulls(_ context.Context, e *env) func() string {
	n := e.prof.heldPulls
	const queues = 8
	e.createTopic("HOLD", queues)
	perConn := int64(e.prof.heldPerConn)
	const conns = 2
	busyBefore := e.counter("raftmq_broker_limit_refusals_total", `limit="maxHeldPullsPerConnection"`)
	var answered, busy atomic.Int64
	var wg sync.WaitGroup
	var ncs []net.Conn
	for c := range conns {
		nc := e.dial()
		ncs = append(ncs, nc)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				resp, err := readFrame(nc)
				if err != nil {
					return
				}
				answered.Add(1)
				if resp.Code == remoting.ResponseSystemBusy {
					busy.Add(1)
				}
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Paced like the floods (heldPullRate): the burst of 10,000
			// at once is CPU for decoding on a shared 2-core host, which
			// can delay the leader's Raft heartbeats past their timeout.
			wait := pace(heldPullRate / conns / 100)
			var buf []byte
			for i := c; i < n; i += conns {
				buf = append(buf, frame(e.t, remoting.RequestPullMessage, pullExt("HOLDERS", "HOLD", i%queues, 0, time.Minute), nil)...)
				if len(buf) > 0 && (i/conns)%100 == 99 || i+conns >= n {
					wait()
					if _, err := nc.Write(buf); err != nil {
						return
					}
					buf = buf[:0]
				}
			}
		}()
	}
	e.t.Cleanup(func() {
		for _, nc := range ncs {
			_ = nc.Close()
		}
	})
	each := int64(n / conns)
	wantHeld := conns * min(each, perConn)
	var held float64
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		held, _ = e.metric("raftmq_broker_long_polls_held", "")
		if int64(held) == wantHeld && busy.Load() == int64(n)-wantHeld {
			break
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("after 60 s the leader holds %v pulls and refused %d, want %d and %d", held, busy.Load(), wantHeld, int64(n)-wantHeld)
		}
	}
	return func() string {
		counted := e.counter("raftmq_broker_limit_refusals_total", `limit="maxHeldPullsPerConnection"`) - busyBefore
		if int64(counted) != busy.Load() {
			e.t.Errorf("limit_refusals_total{maxHeldPullsPerConnection} grew %v, %d SYSTEM_BUSY seen", counted, busy.Load())
		}
		// One message per queue wakes every held pull.
		for q := range queues {
			resp, err := e.call(e.leaderAddr(), remoting.RequestSendMessage, sendExt("HOLD", q, ""), []byte("wake"))
			if err != nil || resp.Code != remoting.ResponseSuccess {
				e.t.Fatalf("wake-up send: %v %v", resp, err)
			}
		}
		testutil.WaitFor(e.t, 60*time.Second, "every held pull answered", func() bool { return answered.Load() == int64(n) })
		for _, nc := range ncs {
			_ = nc.Close()
		}
		wg.Wait()
		return fmt.Sprintf("%d pulls on %d connections: %d held (maxHeldPullsPerConnection %d), %d answered SYSTEM_BUSY; one send per queue answered every held pull",
			n, conns, int64(held), perConn, busy.Load())
	}
}

// neverReads asks for large pull answers and never reads them: the
// leader queues at most maxWriteQueueBytes for it and closes it after
// its write timeout (the profile's connTimeout, writeTimeoutMillis).
func neverReads(_ context.Context, e *env) func() string {
	bound := e.prof.connTimeout
	const msgs, size = 64, 64 << 10
	e.createTopic("BIG", 1)
	body := make([]byte, size)
	for range msgs {
		resp, err := e.call(e.leaderAddr(), remoting.RequestSendMessage, sendExt("BIG", 0, ""), body)
		if err != nil || resp.Code != remoting.ResponseSuccess {
			e.t.Fatalf("fill BIG: %v %v", resp, err)
		}
	}
	before := e.counter("raftmq_broker_connection_limit_closes_total", `limit="maxWriteQueueBytes"`)
	nc, err := net.Dial("tcp", e.leaderAddr())
	if err != nil {
		e.t.Fatal(err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	start := time.Now()
	closedAt := make(chan time.Duration, 1)
	go func() {
		defer nc.Close()
		req := frame(e.t, remoting.RequestPullMessage, pullExt("NEVER_READS", "BIG", 0, 0, 0), nil)
		for i := 0; ; i++ {
			if i >= e.prof.neverReads {
				// All asked: one more request now and then shows when
				// the broker dropped the connection.
				time.Sleep(100 * time.Millisecond)
				if _, err := nc.Write(req); err != nil {
					closedAt <- time.Since(start)
					return
				}
				if time.Since(start) > bound+50*time.Second {
					closedAt <- -1
					return
				}
				continue
			}
			if _, err := nc.Write(req); err != nil {
				closedAt <- time.Since(start)
				return
			}
		}
	}()
	return func() string {
		var took time.Duration
		select {
		case took = <-closedAt:
		case <-time.After(bound + 80*time.Second):
			took = -1
		}
		switch {
		case took < 0:
			e.t.Errorf("the connection that never reads was not closed within %v (write timeout %v)", bound+50*time.Second, bound)
		case took < bound:
			// The first answer was asked for after start: the stall
			// began later, and the write timeout ran after it.
			e.t.Errorf("the connection that never reads was closed after %v, before the write timeout %v", took, bound)
		}
		closes := e.counter("raftmq_broker_connection_limit_closes_total", `limit="maxWriteQueueBytes"`) - before
		if closes < 1 {
			e.t.Errorf("connection_limit_closes_total{maxWriteQueueBytes} grew %v", closes)
		}
		return fmt.Sprintf("%d pulls of ~256 KiB answers, never read: closed after %.1f s (maxWriteQueueBytes, write timeout %g s)",
			e.prof.neverReads, took.Seconds(), bound.Seconds())
	}
}

// spoofedIdempotence: an idempotent producer's stored id is read back
// from its message and another client sends seq 2^62 under it; the
// producer's later sends are all stored. A retry under the producer's
// real id is still recognised as a duplicate.
func spoofedIdempotence(_ context.Context, e *env, extra *[]ack) func() string {
	e.createTopic("IDEM", 1)
	victim, err := client.NewProducer(client.NameServers(e.pc.NS.Addr()), client.ProducerGroup("VICTIM"), client.Idempotent(true))
	if err != nil {
		e.t.Fatal(err)
	}
	if err := victim.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = victim.Close(context.Background()) }()
	send := func(i int) *client.SendResult {
		body := []byte("victim-" + strconv.Itoa(i))
		var res *client.SendResult
		testutil.WaitFor(e.t, 30*time.Second, "a victim send", func() bool {
			var err error
			res, err = victim.SendSync(context.Background(), client.NewMessage("IDEM", body))
			return err == nil && res.Status == client.SendOK
		})
		*extra = append(*extra, ack{addr: res.Addr, offsetMsgID: res.OffsetMsgID, topic: "IDEM", body: body})
		return res
	}
	first := send(0)
	m, err := e.view(first.Addr, first.OffsetMsgID)
	if err != nil {
		e.t.Fatal(err)
	}
	stored := m.Properties[wire.PropertyProducerID]
	if stored == "" || stored == victim.ProducerID() {
		e.t.Fatalf("stored producer id %q: the client's id %q must not be readable", stored, victim.ProducerID())
	}
	// The attack: seq 2^62 under the id anyone can read.
	props := wire.EncodeProperties(map[string]string{wire.PropertyProducerID: stored, wire.PropertySequence: strconv.FormatInt(1<<62, 10),
		wire.PropertyUniqKey: "SPOOF"})
	resp, err := e.call(first.Addr, remoting.RequestSendMessage, sendExt("IDEM", 0, props), []byte("spoof"))
	if err != nil || resp.Code != remoting.ResponseSuccess {
		e.t.Fatalf("spoofed send: %v %v", resp, err)
	}
	// A retry of the first message under the real id: a duplicate,
	// answered with the original offset.
	seq := m.Properties[wire.PropertySequence]
	if seq == "" {
		e.t.Fatalf("the victim's first message was stored without its sequence: %v", m.Properties)
	}
	props = wire.EncodeProperties(map[string]string{wire.PropertyProducerID: victim.ProducerID(), wire.PropertySequence: seq,
		wire.PropertyUniqKey: "RETRY"})
	resp, err = e.call(first.Addr, remoting.RequestSendMessage, sendExt("IDEM", 0, props), []byte("victim-0"))
	if err != nil || resp.Code != remoting.ResponseSuccess || resp.ExtFields["queueOffset"] != strconv.FormatInt(first.QueueOffset, 10) {
		e.t.Fatalf("retry under the real id: %v %v, want the original queue offset %d", resp, err, first.QueueOffset)
	}
	const later = 20
	last := first.QueueOffset
	for i := 1; i <= later; i++ {
		res := send(i)
		if res.QueueOffset <= last {
			e.t.Errorf("victim send %d at queue offset %d, not after %d: treated as a duplicate", i, res.QueueOffset, last)
		}
		last = res.QueueOffset
	}
	return func() string {
		return fmt.Sprintf("seq 2^62 sent under the stored id %s…; the victim's %d later sends all stored (queue offsets %d..%d); a retry under its real id answered with the original offset",
			stored[:8], later, first.QueueOffset+2, last)
	}
}
