package client

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

var uniqKeyRE = regexp.MustCompile(`^[0-9A-F]{32}$`)

func TestProducerSendSyncWireFormat(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"TopicA": 4})
	p := newTestProducer(t, ns, ProducerGroup("PG"))

	msg := NewMessage("TopicA", []byte("hello")).WithTags("TagA").WithKeys("k1", "k2").WithProperty("color", "red")
	msg.Flag = 7
	res, err := p.SendSync(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	reqs := log.all()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	h := r.header
	if r.code != remoting.RequestSendMessageV2 || h.ProducerGroup != "PG" || h.Topic != "TopicA" || h.DefaultTopic != "TBW102" ||
		h.DefaultTopicQueueNums != 4 || h.SysFlag != 0 || h.Flag != 7 || h.Batch || h.BrokerName != "broker-a" || h.QueueID < 0 || h.QueueID > 3 ||
		h.BornTimestamp == 0 || string(r.body) != "hello" {
		t.Fatalf("request %+v", r)
	}
	props := wire.DecodeProperties(h.Properties)
	if props["TAGS"] != "TagA" || props["KEYS"] != "k1 k2" || props["color"] != "red" || !uniqKeyRE.MatchString(props["UNIQ_KEY"]) {
		t.Fatalf("properties %q", h.Properties)
	}
	if res.Status != SendOK || res.MsgID != props["UNIQ_KEY"] || res.OffsetMsgID == "" || res.Queue != (MessageQueue{"TopicA", "broker-a", int(h.QueueID)}) ||
		res.QueueOffset != 0 || res.RegionID != "RegionX" || res.TraceOn || res.Addr != a.addr {
		t.Fatalf("result %+v", res)
	}
	// The short header names a..n are what travels.
	raw := remoting.NewRequest(remoting.RequestSendMessageV2, &wire.SendMessageRequestHeaderV2{Topic: "x"}, nil)
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m"} {
		if _, ok := raw.ExtFields[k]; !ok {
			t.Errorf("header field %s missing", k)
		}
	}
	// Successive sends rotate over the queues.
	seen := map[int]bool{}
	for i := 0; i < 8; i++ {
		res, err := p.SendSync(context.Background(), NewMessage("TopicA", []byte("x")))
		if err != nil {
			t.Fatal(err)
		}
		seen[res.Queue.QueueID] = true
	}
	if len(seen) != 4 {
		t.Fatalf("8 sends used queues %v", seen)
	}
}

func TestProducerSendStatuses(t *testing.T) {
	ns := startNameServer(t)
	a := startFakeBroker(t, "broker-a", &requestLog{})
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	// JSON headers, as the official client sends them (the default is ROCKETMQ).
	p := newTestProducer(t, ns, SendHeaderSerialization(remoting.SerializeJSON))
	for code, want := range map[int16]SendStatus{
		remoting.ResponseFlushDiskTimeout:  SendFlushDiskTimeout,
		remoting.ResponseFlushSlaveTimeout: SendFlushSlaveTimeout,
		remoting.ResponseSlaveNotAvailable: SendSlaveNotAvailable,
	} {
		a.setAnswer(answerCode(code, map[string]string{"msgId": "X", "queueId": "0", "queueOffset": "5"}))
		res, err := p.SendSync(context.Background(), NewMessage("T", []byte("x")))
		if err != nil || res.Status != want || res.QueueOffset != 5 || res.RegionID != "DefaultRegion" || !res.TraceOn {
			t.Fatalf("code %d: %v %v", code, res, err)
		}
		if res.Status.String() == "" {
			t.Fatal("no status name")
		}
	}
}

func TestProducerCompression(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns)
	big := bytes.Repeat([]byte("0123456789abcdef"), 512) // 8 KiB
	small := bytes.Repeat([]byte("s"), 4096)             // at the threshold: not compressed
	for _, body := range [][]byte{big, small} {
		if _, err := p.SendSync(context.Background(), NewMessage("T", body)); err != nil {
			t.Fatal(err)
		}
	}
	reqs := log.all()
	if reqs[0].header.SysFlag&wire.SysFlagCompressed == 0 || len(reqs[0].body) >= len(big) {
		t.Fatalf("big body sent with sysFlag %#x, %d bytes", reqs[0].header.SysFlag, len(reqs[0].body))
	}
	zr, err := zlib.NewReader(bytes.NewReader(reqs[0].body))
	if err != nil {
		t.Fatal(err)
	}
	inflated, _ := io.ReadAll(zr)
	if !bytes.Equal(inflated, big) {
		t.Fatal("compressed body does not inflate to the original")
	}
	if reqs[1].header.SysFlag != 0 || !bytes.Equal(reqs[1].body, small) {
		t.Fatalf("small body sent with sysFlag %#x", reqs[1].header.SysFlag)
	}
}

// twoGroups starts broker-a and broker-b, each serving topic T with 2 queues.
func twoGroups(t *testing.T) (*fakeBroker, *fakeBroker, *requestLog, *Producer) {
	return twoGroupsOf(t, 2)
}

// twoGroupsOf starts a name server, fake broker groups broker-a and
// broker-b serving topic T with queues queues each, and a producer with
// opts.
func twoGroupsOf(t *testing.T, queues int, opts ...ProducerOpt) (*fakeBroker, *fakeBroker, *requestLog, *Producer) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	b := startFakeBroker(t, "broker-b", log)
	a.register(t, ns, 0, 1, map[string]int{"T": queues})
	b.register(t, ns, 0, 1, map[string]int{"T": queues})
	return a, b, log, newTestProducer(t, ns, opts...)
}

// TestProducerRetriesAnotherBroker: every retriable answer and a dropped
// connection make the next attempt go to the other brokerName.
func TestProducerRetriesAnotherBroker(t *testing.T) {
	dropConn := func(_ *fakeBroker, conn *remoting.Conn, _ *remoting.RemotingCommand) *remoting.RemotingCommand {
		_ = conn.Close()
		return nil
	}
	cases := map[string]func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand{
		"SYSTEM_BUSY":           answerCode(remoting.ResponseSystemBusy, nil),
		"TOPIC_NOT_EXIST":       answerCode(remoting.ResponseTopicNotExist, nil),
		"SERVICE_NOT_AVAILABLE": answerCode(remoting.ResponseServiceNotAvailable, nil),
		"SYSTEM_ERROR":          answerCode(remoting.ResponseSystemError, nil),
		"NO_PERMISSION":         answerCode(remoting.ResponseNoPermission, nil),
		"connection drop":       dropConn,
	}
	for name, answer := range cases {
		t.Run(name, func(t *testing.T) {
			a, _, log, p := twoGroups(t)
			a.setAnswer(answer)
			for i := 0; i < 6; i++ {
				res, err := p.SendSync(context.Background(), NewMessage("T", []byte("x")))
				if err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
				if res.Queue.BrokerName != "broker-b" {
					t.Fatalf("stored on %s", res.Queue.BrokerName)
				}
			}
			// Each request to broker-a is followed by the same message
			// (same UNIQ_KEY) at broker-b.
			reqs := log.all()
			failed := 0
			for i, r := range reqs {
				if r.brokerN != "broker-a" {
					continue
				}
				failed++
				if i+1 >= len(reqs) || reqs[i+1].brokerN != "broker-b" ||
					wire.DecodeProperties(reqs[i+1].header.Properties)["UNIQ_KEY"] != wire.DecodeProperties(r.header.Properties)["UNIQ_KEY"] {
					t.Fatalf("request %d to broker-a not retried at broker-b: %+v", i, reqs)
				}
			}
			if failed == 0 {
				t.Fatal("no send tried broker-a; the rotation should have reached it")
			}
		})
	}
}

func TestProducerNonRetriableAnswer(t *testing.T) {
	a, b, log, p := twoGroups(t)
	a.setAnswer(answerCode(remoting.ResponseMessageIllegal, nil))
	b.setAnswer(answerCode(remoting.ResponseMessageIllegal, nil))
	_, err := p.SendSync(context.Background(), NewMessage("T", []byte("x")))
	var be *BrokerError
	if !errors.As(err, &be) || be.Code != remoting.ResponseMessageIllegal || !errors.Is(err, ErrSendFailed) {
		t.Fatalf("err %v", err)
	}
	if n := len(log.all()); n != 1 {
		t.Fatalf("%d attempts for a non-retriable answer", n)
	}
}

func TestProducerAllAttemptsFail(t *testing.T) {
	a, b, log, p := twoGroups(t)
	a.setAnswer(answerCode(remoting.ResponseSystemBusy, nil))
	b.setAnswer(answerCode(remoting.ResponseSystemBusy, nil))
	_, err := p.SendSync(context.Background(), NewMessage("T", []byte("x")))
	var se *SendError
	if !errors.As(err, &se) || len(se.Attempts) != 3 || !errors.Is(err, remoting.ErrServerBusy) {
		t.Fatalf("err %v", err)
	}
	reqs := log.all()
	if len(reqs) != 3 || reqs[0].brokerN == reqs[1].brokerN || reqs[1].brokerN == reqs[2].brokerN {
		t.Fatalf("attempts did not alternate brokers: %v %v %v", reqs[0].brokerN, reqs[1].brokerN, reqs[2].brokerN)
	}
}

// TestProducerLastAttemptWaitsOutElection: every group of the topic is
// electing (raftmq's NOT_LEADER_FOR_QUEUE without a leader); the first
// attempts fail over to the other group as usual, and the last one waits
// for its group's leader instead of failing the send in milliseconds.
func TestProducerLastAttemptWaitsOutElection(t *testing.T) {
	lastAttemptWaitsOut(t, func(fb *fakeBroker, conn *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		return answerCode(remoting.ResponseNotLeaderForQueue, nil)(fb, conn, req)
	})
}

// lastAttemptWaitsOut: the first three requests, wherever they go, meet
// an election answered by refuse; the send still succeeds.
func lastAttemptWaitsOut(t *testing.T, refuse func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand) {
	t.Helper()
	a, b, log, p := twoGroups(t)
	var mu sync.Mutex
	asked := 0
	electing := func(fb *fakeBroker, conn *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		mu.Lock()
		asked++
		n := asked
		mu.Unlock()
		if n <= 3 {
			return refuse(fb, conn, req)
		}
		return fb.stored(req)
	}
	a.setAnswer(electing)
	b.setAnswer(electing)
	res, err := p.SendSync(context.Background(), NewMessage("T", []byte("x")))
	if err != nil {
		t.Fatalf("send while both groups elect: %v", err)
	}
	// One group, the other, then the last attempt on the first: refused
	// once more, then stored after the wait.
	reqs := log.all()
	if len(reqs) != 4 || reqs[0].brokerN == reqs[1].brokerN || reqs[2].brokerN != reqs[0].brokerN || reqs[3].brokerN != reqs[0].brokerN {
		t.Fatalf("requests %+v", reqs)
	}
	if res.Queue.BrokerName != reqs[0].brokerN {
		t.Fatalf("stored on %s, want %s", res.Queue.BrokerName, reqs[0].brokerN)
	}
}

// TestProducerFollowsNamedLeader: the route's master answers "not leader"
// naming another member; the send goes there at once, later sends go
// straight to it while the name server still names the old one, and the
// learned leader is dropped once the route catches up.
func TestProducerFollowsNamedLeader(t *testing.T) {
	for _, code := range []int16{remoting.ResponseNotLeaderForQueue, remoting.ResponseServiceNotAvailable} {
		ns := startNameServer(t)
		log := &requestLog{}
		n0 := startFakeBroker(t, "g", log)
		n1 := startFakeBroker(t, "g", log)
		n0.register(t, ns, 0, 1, map[string]int{"T": 2})
		n1.register(t, ns, 1, 1, map[string]int{"T": 2})
		n0.setAnswer(answerCode(code, map[string]string{wire.ExtLeaderAddr: n1.addr}))
		p := newTestProducer(t, ns)

		start := time.Now()
		res, err := p.SendSync(context.Background(), NewMessage("T", []byte("x")))
		if err != nil {
			t.Fatal(err)
		}
		if res.Addr != n1.addr || time.Since(start) > time.Second {
			t.Fatalf("code %d: stored at %s after %v", code, res.Addr, time.Since(start))
		}
		reqs := log.all()
		if len(reqs) != 2 || reqs[0].addr != n0.addr || reqs[1].addr != n1.addr || reqs[0].header.QueueID != reqs[1].header.QueueID {
			t.Fatalf("requests %+v", reqs)
		}
		for i := 0; i < 3; i++ {
			if res, err := p.SendSync(context.Background(), NewMessage("T", []byte("x"))); err != nil || res.Addr != n1.addr {
				t.Fatalf("later send: %v %v", res, err)
			}
		}
		if n := len(log.all()); n != 5 {
			t.Fatalf("later sends did not go straight to the leader: %d requests", n)
		}
		// The new leader registers as master; after a refresh the route
		// is followed again (and it names n1).
		n1.register(t, ns, 0, 2, map[string]int{"T": 2})
		// (A refresh may join a fetch that started before the
		// registration, so poll.)
		testutil.WaitFor(t, 5*time.Second, "learned leader dropped once the route names it", func() bool {
			if _, err := p.routes.refresh(context.Background(), "T", false, 4); err != nil {
				t.Fatal(err)
			}
			p.routes.mu.Lock()
			defer p.routes.mu.Unlock()
			g := p.routes.brokers["g"]
			return g.leader == "" && g.members[0] == n1.addr
		})
		if addr := p.routes.brokerAddr("g"); addr != n1.addr {
			t.Fatalf("after the route caught up: %s", addr)
		}
	}
}

// TestProducerLeaderDiesProbesFollower: the only group's master is gone;
// the send tries a follower, which names the new leader, all in one call
// and well under a second.
func TestProducerLeaderDiesProbesFollower(t *testing.T) {
	_, _, n0, n1, n2, p := warmThreeMemberGroup(t)
	n0.stop()
	n1.setAnswer(answerCode(remoting.ResponseNotLeaderForQueue, map[string]string{wire.ExtLeaderAddr: n2.addr}))
	start := time.Now()
	res, err := p.SendSync(context.Background(), NewMessage("T", []byte("after")))
	gap := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if res.Addr != n2.addr || gap > time.Second {
		t.Fatalf("stored at %s after %v", res.Addr, gap)
	}
	t.Logf("send after leader death took %v", gap)
}

func TestProducerBatch(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 2})
	p := newTestProducer(t, ns)
	msgs := []*Message{
		NewMessage("T", []byte("one")).WithTags("a"),
		NewMessage("T", []byte("two")).WithKeys("k"),
		NewMessage("T", bytes.Repeat([]byte("3"), 10000)), // batches are never compressed
	}
	res, err := p.SendBatch(context.Background(), msgs)
	if err != nil {
		t.Fatal(err)
	}
	r := log.all()[0]
	if r.code != remoting.RequestSendBatchMessage || !r.header.Batch || r.header.SysFlag != 0 {
		t.Fatalf("request %+v", r.header)
	}
	entries, err := wire.DecodeBatch(r.body)
	if err != nil || len(entries) != 3 {
		t.Fatalf("batch body: %v, %d entries", err, len(entries))
	}
	var ids []string
	for i, e := range entries {
		if !bytes.Equal(e.Body, msgs[i].Body) {
			t.Fatalf("entry %d body differs", i)
		}
		props := wire.DecodeProperties(e.Properties)
		if !uniqKeyRE.MatchString(props["UNIQ_KEY"]) {
			t.Fatalf("entry %d properties %q", i, e.Properties)
		}
		ids = append(ids, props["UNIQ_KEY"])
	}
	if wire.DecodeProperties(entries[0].Properties)["TAGS"] != "a" || wire.DecodeProperties(entries[1].Properties)["KEYS"] != "k" {
		t.Fatal("per-message properties lost")
	}
	if res.MsgID != strings.Join(ids, ",") {
		t.Fatalf("batch msgId %q, want %q", res.MsgID, strings.Join(ids, ","))
	}
	for _, bad := range [][]*Message{
		nil,
		{NewMessage("T", []byte("x")), NewMessage("U", []byte("y"))},
		{{Topic: "T", Body: []byte("x"), DelayLevel: 2}},
	} {
		if _, err := p.SendBatch(context.Background(), bad); !errors.Is(err, ErrInvalidMessage) {
			t.Fatalf("bad batch: %v", err)
		}
	}
}

func TestProducerSelectors(t *testing.T) {
	a, b, log, p := twoGroups(t)
	_ = b
	// Same sharding key, same queue.
	var first MessageQueue
	for i := 0; i < 5; i++ {
		m := NewMessage("T", []byte("x"))
		m.ShardingKey = "order-42"
		res, err := p.SendWithSelector(context.Background(), m, HashSelector())
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = res.Queue
		} else if res.Queue != first {
			t.Fatalf("order-42 went to %v then %v", first, res.Queue)
		}
	}
	// Manual selection; the ordered send retries on the same queue, never
	// on the other broker.
	target := MessageQueue{Topic: "T", BrokerName: "broker-a", QueueID: 1}
	var once sync.Once
	a.setAnswer(func(fb *fakeBroker, _ *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		busy := false
		once.Do(func() { busy = true })
		if busy {
			return answerCode(remoting.ResponseSystemBusy, nil)(fb, nil, req)
		}
		return fb.stored(req)
	})
	before := len(log.all())
	res, err := p.SendWithSelector(context.Background(), NewMessage("T", []byte("x")), ManualSelector(target))
	if err != nil || res.Queue != target {
		t.Fatalf("manual: %v %v", res, err)
	}
	reqs := log.all()[before:]
	if len(reqs) != 2 || reqs[0].brokerN != "broker-a" || reqs[1].brokerN != "broker-a" || reqs[1].header.QueueID != 1 {
		t.Fatalf("ordered retry left its queue: %+v", reqs)
	}
	if _, err := p.SendWithSelector(context.Background(), NewMessage("T", []byte("x")), ManualSelector(MessageQueue{Topic: "T", BrokerName: "nope"})); !errors.Is(err, ErrNoQueue) {
		t.Fatalf("unknown queue: %v", err)
	}
	if _, err := p.SendWithSelector(context.Background(), NewMessage("T", []byte("x")), RandomSelector()); err != nil {
		t.Fatal(err)
	}
}

func TestJavaStringHash(t *testing.T) {
	// Values of Java's String.hashCode (UTF-16 code units, int overflow),
	// computed independently.
	for s, want := range map[string]int32{"": 0, "a": 97, "order-42": 1234255197, "hello world": 1794106052, "😀": 1772899} {
		if got := javaStringHash(s); got != want {
			t.Errorf("hash(%q) = %d, want %d", s, got, want)
		}
	}
}

// TestProducerIdempotentRetryKeepsIdentity: after a dropped connection
// (outcome unknown) the retry carries the same producer id and sequence
// and goes to the same queue, though another broker group exists.
func TestProducerIdempotentRetryKeepsIdentity(t *testing.T) {
	a, b, log, p := twoGroupsOf(t, 2, Idempotent(true), IdempotentProducerID("pid-1"))
	if p.ProducerID() != "pid-1" {
		t.Fatal(p.ProducerID())
	}
	var mu sync.Mutex
	dropped := map[string]bool{}
	drop := func(fb *fakeBroker, conn *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		var h wire.SendMessageRequestHeaderV2
		_ = req.DecodeHeader(&h)
		key := wire.DecodeProperties(h.Properties)["UNIQ_KEY"]
		mu.Lock()
		first := !dropped[key]
		dropped[key] = true
		mu.Unlock()
		if first {
			_ = conn.Close()
			return nil
		}
		return fb.stored(req)
	}
	a.setAnswer(drop)
	b.setAnswer(drop)
	for i := 0; i < 6; i++ {
		if _, err := p.SendSync(context.Background(), NewMessage("T", []byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	reqs := log.all()
	if len(reqs) != 12 {
		t.Fatalf("%d requests, want 6 pairs", len(reqs))
	}
	perQueue := map[MessageQueue][]string{}
	for i := 0; i < len(reqs); i += 2 {
		p1, p2 := wire.DecodeProperties(reqs[i].header.Properties), wire.DecodeProperties(reqs[i+1].header.Properties)
		if p1[wire.PropertyProducerID] != "pid-1" || p1[wire.PropertySequence] == "" || p1[wire.PropertySequence] != p2[wire.PropertySequence] ||
			p1["UNIQ_KEY"] != p2["UNIQ_KEY"] || reqs[i].brokerN != reqs[i+1].brokerN || reqs[i].header.QueueID != reqs[i+1].header.QueueID {
			t.Fatalf("retry %d changed identity or queue: %v %v / %v %v", i/2, reqs[i].brokerN, p1, reqs[i+1].brokerN, p2)
		}
		mq := MessageQueue{"T", reqs[i].brokerN, int(reqs[i].header.QueueID)}
		perQueue[mq] = append(perQueue[mq], p1[wire.PropertySequence])
	}
	for mq, seqs := range perQueue {
		first, _ := strconv.ParseUint(seqs[0], 10, 64)
		for i, s := range seqs {
			if s != strconv.FormatUint(first+uint64(i), 10) {
				t.Fatalf("queue %v sequences %v, want consecutive numbers", mq, seqs)
			}
		}
	}
}

func TestProducerAsyncAndOneway(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 4})
	p := newTestProducer(t, ns)
	const n = 50
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	wg.Add(n)
	for i := 0; i < n; i++ {
		err := p.SendAsync(context.Background(), NewMessage("T", []byte("x")), func(res *SendResult, err error) {
			defer wg.Done()
			if err == nil && res.Status != SendOK {
				err = errors.New("not SEND_OK")
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := p.SendOneway(context.Background(), NewMessage("T", []byte("oneway"))); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "oneway request arrives", func() bool {
		reqs := log.all()
		return len(reqs) == n+1 && reqs[n].oneway && string(reqs[n].body) == "oneway"
	})
}

// TestProducerCloseCancelsAsync: a broker that never answers; Close
// returns promptly and every callback gets an error.
func TestProducerCloseCancelsAsync(t *testing.T) {
	ns := startNameServer(t)
	a := startFakeBroker(t, "broker-a", &requestLog{})
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	a.setAnswer(func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand { return nil })
	p := newTestProducer(t, ns, SendTimeout(time.Minute))
	done := make(chan error, 3)
	for i := 0; i < 3; i++ {
		if err := p.SendAsync(context.Background(), NewMessage("T", []byte("x")), func(_ *SendResult, err error) { done <- err }); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("Close took %v", time.Since(start))
	}
	for i := 0; i < 3; i++ {
		if err := <-done; err == nil {
			t.Fatal("a send to a silent broker succeeded")
		}
	}
	if _, err := p.SendSync(context.Background(), NewMessage("T", []byte("x"))); !errors.Is(err, ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	if err := p.SendAsync(context.Background(), NewMessage("T", []byte("x")), func(*SendResult, error) {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("async after close: %v", err)
	}
}

func TestProducerAutoCreateTopic(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"TBW102": 8})
	p := newTestProducer(t, ns, AutoCreateTopic(true, 3))
	res, err := p.SendSync(context.Background(), NewMessage("Fresh", []byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	if res.Queue.Topic != "Fresh" || log.all()[0].header.Topic != "Fresh" || res.Queue.QueueID > 2 {
		t.Fatalf("result %+v", res)
	}
	qs, err := p.PublishQueues(context.Background(), "Fresh")
	if err != nil || len(qs) != 3 || !p.routes.isDefaultRoute("Fresh") {
		t.Fatalf("auto-created topic has queues %v (%v)", qs, err)
	}

	p2 := newTestProducer(t, ns, AutoCreateTopic(false, 4))
	if _, err := p2.SendSync(context.Background(), NewMessage("Fresh2", []byte("x"))); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("without auto-create: %v", err)
	}
}

func TestProducerLifecycleAndValidation(t *testing.T) {
	if _, err := NewProducer(); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("no name servers: %v", err)
	}
	bad := [][]ProducerOpt{
		{NameServers("nohostport")},
		{NameServers("127.0.0.1:0")},
		{NameServers("127.0.0.1:9876"), RetryTimesWhenSendFailed(-1)},
		{NameServers("127.0.0.1:9876"), SendTimeout(0)},
		{NameServers("127.0.0.1:9876"), CompressLevel(11)},
		{NameServers("127.0.0.1:9876"), MaxMessageSize(0)},
		{NameServers("127.0.0.1:9876"), ProducerGroup("bad group")},
		{NameServers("127.0.0.1:9876"), SendLatencyFaultTables([]time.Duration{1}, nil)},
		{NameServers("127.0.0.1:9876"), SendLatencyFaultTables([]time.Duration{2, 1}, []time.Duration{0, 0})},
		{NameServers("127.0.0.1:9876"), AutoCreateTopic(true, 0)},
		{NameServers("127.0.0.1:9876"), RouteRefreshInterval(time.Microsecond)},
		{NameServers("127.0.0.1:9876"), IdempotentProducerID("x")},
		{NameServers("127.0.0.1:9876"), WithLogger(nil)},
		{NameServers("127.0.0.1:9876"), MaxAsyncInflight(0)},
	}
	for i, opts := range bad {
		if _, err := NewProducer(opts...); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("case %d: err %v", i, err)
		}
	}
	p, err := NewProducer(NameServers("127.0.0.1:9876"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.SendSync(context.Background(), NewMessage("T", []byte("x"))); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("before start: %v", err)
	}
	if _, err := p.SendSync(context.Background(), NewMessage("", []byte("x"))); !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("invalid message: %v", err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("start after close: %v", err)
	}
}

// TestProducerAttemptTimeout: a broker that never answers costs one
// AttemptTimeout, then the retry stores the message elsewhere.
func TestProducerAttemptTimeout(t *testing.T) {
	a, _, _, p := twoGroupsOf(t, 1, AttemptTimeout(100*time.Millisecond), SendTimeout(10*time.Second))
	a.setAnswer(func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand { return nil })
	for i := 0; i < 4; i++ {
		start := time.Now()
		res, err := p.SendSync(context.Background(), NewMessage("T", []byte("x")))
		if err != nil {
			t.Fatal(err)
		}
		if res.Queue.BrokerName != "broker-b" || time.Since(start) > 5*time.Second {
			t.Fatalf("stored on %s after %v", res.Queue.BrokerName, time.Since(start))
		}
	}
	if _, err := NewProducer(NameServers("127.0.0.1:9876"), AttemptTimeout(-1)); !errors.Is(err, ErrInvalidOption) {
		t.Fatal(err)
	}
}

// TestProducerIdempotentSelectorQueueSequence: brokers deduplicate an
// idempotent stream by (producer, message topic, queue) within their
// group, whatever MessageQueue.Topic a selector returned. A selector that
// builds its queue by hand (no Topic) must not start a second sequence
// on a queue other sends already numbered: the broker would drop the
// message as a duplicate and answer SEND_OK.
func TestProducerIdempotentSelectorQueueSequence(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns, Idempotent(true))
	ctx := context.Background()
	if _, err := p.SendSync(ctx, NewMessage("T", []byte("plain"))); err != nil {
		t.Fatal(err)
	}
	byHand := SelectorFunc(func(_ *Message, qs []MessageQueue) (MessageQueue, bool) {
		return MessageQueue{BrokerName: qs[0].BrokerName, QueueID: qs[0].QueueID}, true
	})
	if _, err := p.SendWithSelector(ctx, NewMessage("T", []byte("ordered")), byHand); err != nil {
		t.Fatal(err)
	}
	reqs := log.all()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	s1 := wire.DecodeProperties(reqs[0].header.Properties)[wire.PropertySequence]
	s2 := wire.DecodeProperties(reqs[1].header.Properties)[wire.PropertySequence]
	if reqs[0].header.QueueID != reqs[1].header.QueueID || s1 == s2 {
		t.Fatalf("queue %d sequence %s, then queue %d sequence %s: one number for two messages of one stream",
			reqs[0].header.QueueID, s1, reqs[1].header.QueueID, s2)
	}
}

// TestProducerIdempotentFixedIDRestart: a producer restarted with the same
// IdempotentProducerID continues its streams past the numbers its
// predecessor used: brokers remember them (raftDedupProducerTTL, 1 h), and
// a number used again is dropped as a duplicate while the send is
// answered SEND_OK.
func TestProducerIdempotentFixedIDRestart(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	seqs := func() []uint64 {
		var out []uint64
		for _, r := range log.all() {
			if r.code != remoting.RequestSendMessageV2 {
				continue
			}
			n, err := strconv.ParseUint(wire.DecodeProperties(r.header.Properties)[wire.PropertySequence], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
		return out
	}
	for range 2 {
		p := newTestProducer(t, ns, Idempotent(true), IdempotentProducerID("pid-1"))
		for range 3 {
			if _, err := p.SendSync(context.Background(), NewMessage("T", []byte("x"))); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	s := seqs()
	if len(s) != 6 {
		t.Fatalf("%d sends, want 6", len(s))
	}
	for i := 1; i < len(s); i++ {
		if s[i] <= s[i-1] {
			t.Fatalf("sequences %v: the restarted producer used its predecessor's numbers again", s)
		}
	}
}

// TestProducerUnreadableSuccessNotResent: a broker that answered SUCCESS
// stored the message, even when its answer cannot be read (a malformed
// queueOffset): the send fails saying so, and is not sent again, which
// would store it once more.
func TestProducerUnreadableSuccessNotResent(t *testing.T) {
	a, b, log, p := twoGroupsOf(t, 1)
	malformed := answerCode(remoting.ResponseSuccess, map[string]string{"msgId": "X", "queueId": "0", "queueOffset": "not a number"})
	a.setAnswer(malformed)
	b.setAnswer(malformed)
	_, err := p.SendSync(context.Background(), NewMessage("T", []byte("x")))
	var se *SendError
	if !errors.As(err, &se) || len(se.Attempts) != 1 || !strings.Contains(err.Error(), "stored") {
		t.Fatalf("send answered SUCCESS unreadably: %v, want a SendError of one attempt saying the message is stored", err)
	}
	if n := log.requests(); n != 1 {
		t.Fatalf("%d requests: a stored message was sent again", n)
	}
}

// TestProducerLeaderRefusalFailsFast: the only group's leader refuses the
// send itself with SERVICE_NOT_AVAILABLE (a full disk), which no election
// will change: the send fails after its retries, in well under its
// SendTimeout, with the broker's code and remark. A not-leader answer of
// the same code without a leader is still waited out.
func TestProducerLeaderRefusalFailsFast(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 2})
	p := newTestProducer(t, ns, SendTimeout(20*time.Second))

	const remark = "send: store: service not available: disk full: 96% used, above diskMaxUsedSpaceRatio"
	a.setAnswer(func(_ *fakeBroker, _ *remoting.Conn, _ *remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseServiceNotAvailable, remark)
	})
	start := time.Now()
	_, err := p.SendSync(context.Background(), NewMessage("T", []byte("x")))
	took := time.Since(start)
	var be *BrokerError
	if !errors.As(err, &be) || be.Code != remoting.ResponseServiceNotAvailable || be.Remark != remark {
		t.Fatalf("err %v", err)
	}
	if took > 5*time.Second {
		t.Fatalf("the refusal took %v to report, SendTimeout is 20s", took)
	}
	if n := len(log.all()); n != 3 {
		t.Fatalf("%d requests, want 1 + 2 retries", n)
	}

	// An election: two not-leader answers naming no leader, then stored.
	var mu sync.Mutex
	asked := 0
	a.setAnswer(func(fb *fakeBroker, _ *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		mu.Lock()
		asked++
		n := asked
		mu.Unlock()
		if n <= 2 {
			return remoting.NewResponse(remoting.ResponseServiceNotAvailable, wire.NotLeaderRemark(""))
		}
		return fb.stored(req)
	})
	if _, err := p.SendSync(context.Background(), NewMessage("T", []byte("x"))); err != nil {
		t.Fatalf("send through an election: %v", err)
	}
}

// TestProducerLastAttemptWaitsOutNotLeader: as
// TestProducerLastAttemptWaitsOutElection, with the answer raftmq brokers
// give while their group elects (SERVICE_NOT_AVAILABLE, the not-leader
// remark, no leader named).
func TestProducerLastAttemptWaitsOutNotLeader(t *testing.T) {
	lastAttemptWaitsOut(t, func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseServiceNotAvailable, wire.NotLeaderRemark(""))
	})
}

// TestProducerOnewayFindsNewLeader: the only group's leader dies while the
// group elects, so the route fetched on noticing it names no master, and
// oneway sends go to a follower, which drops them unanswered. The producer
// asks the name servers again until the route names the new leader,
// instead of leaving oneway sends at the follower until its next
// RouteRefreshInterval.
func TestProducerOnewayFindsNewLeader(t *testing.T) {
	ns, log, n0, n1, n2, p := warmThreeMemberGroup(t)
	// The name server drops n0 when its registration connection closes.
	n0.stop()
	testutil.WaitFor(t, 5*time.Second, "the name server drops the dead leader", func() bool {
		rd, _, err := p.routes.fetchRoute(context.Background(), "T")
		return err == nil && len(rd.BrokerDatas) == 1 && rd.BrokerDatas[0].BrokerAddrs[wire.MasterID] == ""
	})
	// The first oneway send after the death fails on the closed
	// connection, and the producer fetches the route: no master yet.
	testutil.WaitFor(t, 5*time.Second, "a oneway send meets the dead leader", func() bool {
		return p.SendOneway(context.Background(), NewMessage("T", []byte("x"))) != nil
	})
	testutil.WaitFor(t, 5*time.Second, "oneway sends go to a follower", func() bool {
		if err := p.SendOneway(context.Background(), NewMessage("T", []byte("x"))); err != nil {
			t.Fatal(err)
		}
		reqs := log.all()
		return reqs[len(reqs)-1].addr == n1.addr
	})
	// n2 won the election and registers as master. (The route is fetched
	// again with a growing pause: the deadline covers a slow machine, and
	// stays well below RouteRefreshInterval's 30 s.)
	n2.register(t, ns, 0, 2, map[string]int{"T": 2})
	testutil.WaitFor(t, 15*time.Second, "oneway sends reach the new leader", func() bool {
		if err := p.SendOneway(context.Background(), NewMessage("T", []byte("x"))); err != nil {
			t.Fatal(err)
		}
		reqs := log.all()
		return reqs[len(reqs)-1].addr == n2.addr
	})
}
