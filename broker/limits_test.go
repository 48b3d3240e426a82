package broker

import (
	"errors"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestLimitsAgainstAbuse runs the limits of limits.go against a real
// 3-node group: auto-creation rate and cap, held pulls per connection,
// idempotence ids stored as digests, and reads past the applied position.
func TestLimitsAgainstAbuse(t *testing.T) {
	pc := startRealCluster(t, func(c *BrokerConfig) {
		c.AutoCreateTopicMaxPerSecond = 10 // bursts of 10
		c.MaxHeldPullsPerConnection = 3
	})
	l := pc.leader()
	addr, c := pc.nodes[l].Addr(), pc.nodes[l]
	refusals := func(limit string) float64 {
		var m dto.Metric
		if err := c.metrics.limitRefusals.WithLabelValues(limit).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}

	t.Run("auto-create rate and cap", func(t *testing.T) {
		// The bucket's clock stands still while the sends run, however
		// long they take, and moves only when the test moves it.
		var clock atomic.Int64
		clock.Store(time.Now().UnixNano())
		now := func() time.Time { return time.Unix(0, clock.Load()) }
		c.autoCreate = autoCreateLimiter{now: now}
		autoCreate := func(from, to int) (created int, last *remoting.RemotingCommand) {
			for i := from; i < to; i++ {
				last = pc.call(addr, remoting.RequestSendMessage, sendExt("AUTO"+strconv.Itoa(i), 0, ""), []byte("x"))
				if last.Code == remoting.ResponseSuccess {
					created++
				}
			}
			return created, last
		}
		created, last := autoCreate(0, 30)
		if created != 10 {
			t.Fatalf("%d of 30 topics auto-created at one instant, want the burst of 10", created)
		}
		if last.Code != remoting.ResponseSystemBusy || !strings.Contains(last.Remark, "autoCreateTopicMaxPerSecond") {
			t.Fatalf("refusal: code %d remark %q", last.Code, last.Remark)
		}
		if got := refusals("autoCreateTopicMaxPerSecond"); got != 20 {
			t.Fatalf("refusals %v, want 20", got)
		}
		// Half a second refills 5 tokens at 10/s.
		clock.Add(int64(500 * time.Millisecond))
		if created, last := autoCreate(30, 36); created != 5 || last.Code != remoting.ResponseSystemBusy {
			t.Fatalf("%d of 6 topics auto-created half a second later (last: code %d), want 5", created, last.Code)
		}
		// The cap: the node holds more topics than autoCreateMaxTopics.
		cfg := *c.live()
		cfg.AutoCreateMaxTopics = 1
		c.liveCfg.Store(&cfg)
		c.autoCreate = autoCreateLimiter{now: now} // a full bucket again
		resp := pc.call(addr, remoting.RequestSendMessage, sendExt("AUTO-CAPPED", 0, ""), []byte("x"))
		if resp.Code != remoting.ResponseSystemError || !strings.Contains(resp.Remark, "autoCreateMaxTopics is 1") {
			t.Fatalf("cap refusal: code %d remark %q", resp.Code, resp.Remark)
		}
		// An existing topic still takes sends.
		if resp := pc.call(addr, remoting.RequestSendMessage, sendExt("AUTO0", 0, ""), []byte("x")); resp.Code != remoting.ResponseSuccess {
			t.Fatalf("send to an existing topic: %d %s", resp.Code, resp.Remark)
		}
	})

	t.Run("held pulls per connection", func(t *testing.T) {
		pc.createTopic(addr, "HELD", 1)
		before := refusals("maxHeldPullsPerConnection")
		// One client, one connection: three pulls are held, the fourth
		// answered at once.
		type answer struct {
			resp *remoting.RemotingCommand
			err  error
		}
		answers := make(chan answer, 4)
		for range 3 {
			go func() {
				req := remoting.NewRequest(remoting.RequestPullMessage, nil, nil)
				for k, v := range pullExt("HG", "HELD", 0, 0, 30000) {
					req.ExtFields[k] = v
				}
				resp, err := pc.client.InvokeSync(t.Context(), addr, req)
				answers <- answer{resp, err}
			}()
		}
		testutil.WaitFor(t, 10*time.Second, "three pulls held", func() bool { return c.hold.heldCount() == 3 })
		resp := pc.call(addr, remoting.RequestPullMessage, pullExt("HG", "HELD", 0, 0, 30000), nil)
		if resp.Code != remoting.ResponseSystemBusy || !strings.Contains(resp.Remark, "maxHeldPullsPerConnection") {
			t.Fatalf("fourth pull: code %d remark %q", resp.Code, resp.Remark)
		}
		if got := refusals("maxHeldPullsPerConnection") - before; got != 1 {
			t.Fatalf("refusals %v, want 1", got)
		}
		if r := pc.call(addr, remoting.RequestSendMessage, sendExt("HELD", 0, ""), []byte("wake")); r.Code != remoting.ResponseSuccess {
			t.Fatal(r.Remark)
		}
		for range 3 {
			a := <-answers
			if a.err != nil || a.resp.Code != remoting.ResponseSuccess {
				t.Fatalf("held pull answer: %v %v", a.resp, a.err)
			}
		}
		if n := c.hold.heldCount(); n != 0 {
			t.Fatalf("%d pulls still counted as held", n)
		}
	})

	t.Run("idempotence id digest", func(t *testing.T) {
		pc.createTopic(addr, "IDEM", 1)
		send := func(pid string, seq int64, body string) *remoting.RemotingCommand {
			props := wire.EncodeProperties(map[string]string{wire.PropertyProducerID: pid, wire.PropertySequence: strconv.FormatInt(seq, 10)})
			return pc.call(addr, remoting.RequestSendMessage, sendExt("IDEM", 0, props), []byte(body))
		}
		first := send("victim-secret", 0, "m0")
		if first.Code != remoting.ResponseSuccess {
			t.Fatal(first.Remark)
		}
		off, _ := strconv.ParseInt(first.ExtFields["queueOffset"], 10, 64)
		m := readStored(t, pc, addr, "IDEM", 0, off)
		stored := m.Properties[wire.PropertyProducerID]
		if stored != producerDigest("victim-secret") || strings.Contains(stored, "victim") {
			t.Fatalf("stored producer id %q", stored)
		}
		// Spoof with what a consumer can read; the victim's stream is untouched.
		if r := send(stored, math.MaxInt64/2, "spoof"); r.Code != remoting.ResponseSuccess {
			t.Fatal(r.Remark)
		}
		if r := send("victim-secret", 1, "m1"); r.ExtFields["queueOffset"] != strconv.FormatInt(off+2, 10) {
			t.Fatalf("victim's next send at %s, want %d (stored, not a duplicate)", r.ExtFields["queueOffset"], off+2)
		}
		// A retry under the real id is still a duplicate.
		if r := send("victim-secret", 0, "m0"); r.ExtFields["queueOffset"] != strconv.FormatInt(off, 10) {
			t.Fatalf("retry answered at %s, want the original %d", r.ExtFields["queueOffset"], off)
		}
	})

	// Offsets a client names are read only below the applied position:
	// past it the CommitLog may hold entries Raft never commits, and a
	// send-back or a transaction commit would copy one of them.
	t.Run("reads past the applied position", func(t *testing.T) {
		applied := c.st.DispatchedOffset()
		for _, off := range []int64{applied, applied + 1<<20, -1} {
			o := strconv.FormatInt(off, 10)
			for name, r := range map[string]*remoting.RemotingCommand{
				"VIEW": pc.call(addr, remoting.RequestViewMessageByID, map[string]string{"offset": o}, nil),
				"SEND_BACK": pc.call(addr, remoting.RequestConsumerSendMsgBack,
					map[string]string{"offset": o, "group": "READER", "delayLevel": "0", "originMsgId": "x", "originTopic": "IDEM"}, nil),
				"END_TRANSACTION": pc.call(addr, remoting.RequestEndTransaction,
					map[string]string{"producerGroup": "PG", "tranStateTableOffset": "0", "commitLogOffset": o,
						"commitOrRollback": strconv.Itoa(int(wire.SysFlagTransCommit)), "fromTransactionCheck": "false", "msgId": "x"}, nil),
			} {
				if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "applied position") {
					t.Errorf("%s at %d: code %d remark %q", name, off, r.Code, r.Remark)
				}
			}
		}
	})

	// An applied offset where no message starts (a mistyped msgId) is bad
	// input, not CommitLog damage.
	t.Run("offsets inside a message", func(t *testing.T) {
		pc.createTopic(addr, "INSIDE", 1)
		if r := pc.call(addr, remoting.RequestSendMessage, sendExt("INSIDE", 0, ""), []byte("a body long enough to aim into")); r.Code != remoting.ResponseSuccess {
			t.Fatal(r.Remark)
		}
		m := readStored(t, pc, addr, "INSIDE", 0, 0)
		for _, off := range []int64{0, m.PhysicalOffset + 1, m.PhysicalOffset + int64(wire.OffPhysicalOffset), m.PhysicalOffset + 40} {
			r := pc.call(addr, remoting.RequestViewMessageByID, map[string]string{"offset": strconv.FormatInt(off, 10)}, nil)
			if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "no message starts at offset") {
				t.Errorf("VIEW at %d (message at %d): code %d remark %q", off, m.PhysicalOffset, r.Code, r.Remark)
			}
		}
		r := pc.call(addr, remoting.RequestViewMessageByID, map[string]string{"offset": strconv.FormatInt(m.PhysicalOffset, 10)}, nil)
		if r.Code != remoting.ResponseSuccess {
			t.Fatalf("VIEW at the message's own offset %d: code %d remark %q", m.PhysicalOffset, r.Code, r.Remark)
		}
	})
}

// readStored decodes the message at topic/queue/offset through a pull.
func readStored(t *testing.T, pc *procCluster, addr, topic string, queue int, offset int64) *wire.Message {
	t.Helper()
	resp := pc.call(addr, remoting.RequestPullMessage, pullExt("READER", topic, queue, offset, 0), nil)
	if resp.Code != remoting.ResponseSuccess {
		t.Fatalf("pull %s/%d@%d: %d %s", topic, queue, offset, resp.Code, resp.Remark)
	}
	m, _, err := wire.DecodeMessage(resp.Body, true)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAutoCreateCoalesced: concurrent first sends to one new topic (a new
// service's senders starting together) share one creation and one
// autoCreateTopicMaxPerSecond token; each taking its own refused all but
// the first ten of a burst with SYSTEM_BUSY.
func TestAutoCreateCoalesced(t *testing.T) {
	pc, rep := startFakeProc(t, func(c *BrokerConfig) { c.AutoCreateTopicMaxPerSecond = 10 })
	c := pc.nodes[0]
	gate := make(chan struct{})
	rep.mu.Lock()
	rep.topicGate = gate
	rep.mu.Unlock()
	const senders = 32
	refused := make(chan *remoting.RemotingCommand, senders)
	var started sync.WaitGroup
	started.Add(senders)
	for range senders {
		go func() {
			started.Done()
			_, r := c.autoCreateTopic(t.Context(), "BURST", 4)
			refused <- r
		}()
	}
	started.Wait()
	testutil.WaitFor(t, 10*time.Second, "the creation under way", func() bool { return rep.topicWrites.Load() > 0 })
	close(gate)
	for range senders {
		if r := <-refused; r != nil {
			t.Fatalf("a first send to a new topic refused: %d %s", r.Code, r.Remark)
		}
	}
	if n := rep.topicWrites.Load(); n != 1 {
		t.Fatalf("%d creations of one topic", n)
	}
}

// TestConnectionTimeoutKeys: frameReadTimeoutMillis and writeTimeoutMillis
// reach the broker's listener. With both at 1 s, a half-sent frame and a
// client that never reads its answers are closed within a few seconds,
// where the 10 s defaults would hold them past the test's waits.
func TestConnectionTimeoutKeys(t *testing.T) {
	pc, _ := startFakeProc(t, func(c *BrokerConfig) { c.FrameReadTimeout, c.WriteTimeout = time.Second, time.Second })
	c := pc.nodes[0]
	addr := c.Addr()

	t.Run("half-sent frame", func(t *testing.T) {
		f, err := remoting.EncodeFrame(remoting.NewRequest(remoting.RequestHeartBeat, nil, []byte("{}")))
		if err != nil {
			t.Fatal(err)
		}
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		start := time.Now()
		if _, err := nc.Write(f[:5]); err != nil { // the length and one byte more
			t.Fatal(err)
		}
		_ = nc.SetReadDeadline(start.Add(8 * time.Second))
		_, err = nc.Read(make([]byte, 1))
		took := time.Since(start)
		if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a half-sent frame was not closed within 8 s (frameReadTimeoutMillis=1000): %v", err)
		}
		if took < time.Second {
			t.Fatalf("closed after %v, before frameReadTimeoutMillis=1000: %v", took, err)
		}
		t.Logf("closed %v after the first byte", took)
	})

	t.Run("client that never reads", func(t *testing.T) {
		// Pull answers of ~240 KiB fill the socket buffers in a few dozen
		// pulls; then the write queue stays full for the write timeout.
		body := make([]byte, 60<<10)
		for range 4 {
			if r := pc.call(addr, remoting.RequestSendMessage, sendExt("STALL", 0, ""), body); r.Code != remoting.ResponseSuccess {
				t.Fatalf("send: %d %s", r.Code, r.Remark)
			}
		}
		before := c.srv.LimitCounts().WriteStalls
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4 << 10) // a small window: the broker's writes block soon
		}
		pull := remoting.NewRequest(remoting.RequestPullMessage, nil, nil)
		for k, v := range pullExt("NEVER_READS", "STALL", 0, 0, 0) {
			pull.ExtFields[k] = v
		}
		req, err := remoting.EncodeFrame(pull)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 4096 {
				if _, err := nc.Write(req); err != nil {
					return // closed by the broker
				}
			}
		}()
		testutil.WaitFor(t, 8*time.Second, "the broker closing a client that never reads (writeTimeoutMillis=1000)", func() bool {
			return c.srv.LimitCounts().WriteStalls > before
		})
		t.Logf("closed %v after the first pull", time.Since(start))
		_ = nc.Close()
		<-done
	})
}

// TestConnectionTimeoutKeysValidate: frameReadTimeoutMillis and
// writeTimeoutMillis load as milliseconds (or a Go duration), default to
// 10 s, and a value outside 1 s..10 min is refused naming its key, both
// keys in one report.
func TestConnectionTimeoutKeysValidate(t *testing.T) {
	load := func(kv map[string]string) (BrokerConfig, error) {
		c := DefaultConfig()
		c.Raft.DLegerPeers, c.Raft.DLegerSelfID = "n0-127.0.0.1:40911", "n0"
		if err := config.Apply(kv, "broker.conf", &c); err != nil {
			return c, err
		}
		if err := c.Derive(); err != nil {
			return c, err
		}
		return c, c.Validate()
	}
	c, err := load(nil)
	if err != nil || c.FrameReadTimeout != 10*time.Second || c.WriteTimeout != 10*time.Second {
		t.Fatalf("defaults: %v, %v (%v); want 10 s each", c.FrameReadTimeout, c.WriteTimeout, err)
	}
	c, err = load(map[string]string{"frameReadTimeoutMillis": "3000", "writeTimeoutMillis": "2500ms"})
	if err != nil || c.FrameReadTimeout != 3*time.Second || c.WriteTimeout != 2500*time.Millisecond {
		t.Fatalf("3000 and 2500ms: %v, %v (%v)", c.FrameReadTimeout, c.WriteTimeout, err)
	}
	for _, v := range []string{"0", "-1", "999", "600001", "1h"} {
		_, err := load(map[string]string{"frameReadTimeoutMillis": v, "writeTimeoutMillis": v})
		if !errors.Is(err, ErrInvalidBrokerConfig) || !strings.Contains(err.Error(), "frameReadTimeoutMillis") ||
			!strings.Contains(err.Error(), "writeTimeoutMillis") {
			t.Errorf("%s: %v; want an error naming both keys", v, err)
		}
	}
	for _, v := range []string{"1000", "600000"} {
		if _, err := load(map[string]string{"frameReadTimeoutMillis": v, "writeTimeoutMillis": v}); err != nil {
			t.Errorf("%s: %v", v, err)
		}
	}
}
