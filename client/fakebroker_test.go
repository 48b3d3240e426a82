package client

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// startNameServer runs a real name server on a free loopback port.
func startNameServer(t testing.TB) *namesrv.NameServer {
	t.Helper()
	cfg := namesrv.DefaultConfig()
	cfg.ListenAddr = "127.0.0.1"
	cfg.ListenPort = 0
	cfg.KVConfigPath = filepath.Join(t.TempDir(), "kv.json")
	cfg.DefaultThreadPoolNums = 2
	cfg.ClientRequestThreadPoolNums = 2
	ns, err := namesrv.New(cfg, zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)))
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = ns.Shutdown(ctx)
	})
	return ns
}

// received is one request a fake broker got.
type received struct {
	code    int16
	header  wire.SendMessageRequestHeaderV2
	body    []byte
	oneway  bool
	at      time.Time
	brokerN string
	addr    string
}

// fakeBroker is a remoting.Server answering sends the way the test
// scripts it; it records every request. Its default answer stores the
// message: SUCCESS with msgId, queueId, queueOffset.
type fakeBroker struct {
	t          testing.TB
	name, addr string
	srv        *remoting.Server
	log        *requestLog
	// nsClient carries the broker's registrations; the name server drops
	// a broker whose registering connection closes, so it lives as long as
	// the broker.
	nsClient *remoting.Client

	mu     sync.Mutex
	answer func(fb *fakeBroker, conn *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand // guarded by mu
	offset int64                                                                                              // guarded by mu
}

// requestLog collects requests of several brokers in arrival order.
type requestLog struct {
	mu   sync.Mutex
	reqs []received
	// discard counts instead of keeping requests (benchmarks).
	discard bool
	count   int
}

func (l *requestLog) add(r received) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count++
	if !l.discard {
		l.reqs = append(l.reqs, r)
	}
}

// requests is how many requests arrived.
func (l *requestLog) requests() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

func (l *requestLog) all() []received {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]received(nil), l.reqs...)
}

func startFakeBroker(t testing.TB, name string, log *requestLog) *fakeBroker {
	t.Helper()
	fb := &fakeBroker{t: t, name: name, log: log, nsClient: remoting.NewClient(remoting.ClientConfig{}, nil)}
	fb.srv = remoting.NewServer(remoting.ServerConfig{}, nil)
	h := func(_ context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		var hdr wire.SendMessageRequestHeaderV2
		if !log.discard {
			_ = req.DecodeHeader(&hdr)
		}
		log.add(received{code: req.Code, header: hdr, body: req.Body, oneway: req.IsOneway(), at: time.Now(), brokerN: fb.name, addr: fb.addr})
		fb.mu.Lock()
		answer := fb.answer
		fb.mu.Unlock()
		if answer != nil {
			return answer(fb, conn, req), nil
		}
		return fb.stored(req), nil
	}
	// Sends, and the membership requests the admin tests script.
	for _, code := range []int16{remoting.RequestSendMessage, remoting.RequestSendMessageV2, remoting.RequestSendBatchMessage,
		remoting.RequestAddRaftMember, remoting.RequestRemoveRaftMember} {
		fb.srv.Register(code, h, 2, 1024)
	}
	// Heartbeats and whatever else a client sends: plain SUCCESS.
	fb.srv.RegisterDefault(func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 64)
	if err := fb.srv.Start(); err != nil {
		t.Fatal(err)
	}
	fb.addr = fb.srv.Addr().String()
	t.Cleanup(func() { fb.stop() })
	return fb
}

func (fb *fakeBroker) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = fb.srv.Shutdown(ctx)
	_ = fb.nsClient.Close()
}

// setAnswer scripts the broker's answers (nil restores the default).
func (fb *fakeBroker) setAnswer(f func(fb *fakeBroker, conn *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	fb.answer = f
}

// stored answers SUCCESS as a broker that stored the message.
func (fb *fakeBroker) stored(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var hdr wire.SendMessageRequestHeaderV2
	_ = req.DecodeHeader(&hdr)
	fb.mu.Lock()
	off := fb.offset
	fb.offset++
	fb.mu.Unlock()
	resp := remoting.NewResponse(remoting.ResponseSuccess, "")
	resp.ExtFields = map[string]string{
		"msgId":       fmt.Sprintf("7F00000100002A9F%016X", off*100),
		"queueId":     strconv.Itoa(int(hdr.QueueID)),
		"queueOffset": strconv.FormatInt(off, 10),
		"MSG_REGION":  "RegionX",
		"TRACE_ON":    "false",
	}
	return resp
}

// answerCode returns a scripted answer with code and extFields.
func answerCode(code int16, ext map[string]string) func(*fakeBroker, *remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand {
	return func(_ *fakeBroker, _ *remoting.Conn, _ *remoting.RemotingCommand) *remoting.RemotingCommand {
		r := remoting.NewResponse(code, fmt.Sprintf("scripted code %d", code))
		r.ExtFields = ext
		return r
	}
}

// register registers the broker with the name server as member id of its
// group, serving topics (name → queue count) read-write.
func (fb *fakeBroker) register(t testing.TB, ns *namesrv.NameServer, id int64, version int64, topics map[string]int) {
	t.Helper()
	table := map[string]wire.TopicConfig{}
	for name, n := range topics {
		table[name] = wire.TopicConfig{TopicName: name, ReadQueueNums: n, WriteQueueNums: n, Perm: 6}
	}
	body, err := wire.EncodeRegisterBrokerBody(&wire.RegisterBrokerBody{
		TopicConfigSerializeWrapper: wire.TopicConfigSerializeWrapper{
			TopicConfigTable: table,
			DataVersion:      wire.DataVersion{StateVersion: version, Timestamp: version, Counter: version},
		},
		FilterServerList: []string{},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	h := &wire.RegisterBrokerRequestHeader{BrokerName: fb.name, BrokerAddr: fb.addr, ClusterName: "C", BrokerID: id, BodyCrc32: int32(wire.BodyCRC32(body))}
	resp, err := fb.nsClient.InvokeSync(context.Background(), ns.Addr().String(), remoting.NewRequest(remoting.RequestRegisterBroker, h, body))
	if err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("register %s/%d: %v %v", fb.name, id, err, resp)
	}
}

// newTestProducer builds and starts a producer against ns.
func newTestProducer(t *testing.T, ns *namesrv.NameServer, opts ...ProducerOpt) *Producer {
	t.Helper()
	all := append([]ProducerOpt{NameServers(ns.Addr().String()), WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))}, opts...)
	p, err := NewProducer(all...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// warmThreeMemberGroup registers one group of three fake members (n0 the
// master) serving T, and a producer that has sent to it once.
func warmThreeMemberGroup(t *testing.T) (*namesrv.NameServer, *requestLog, *fakeBroker, *fakeBroker, *fakeBroker, *Producer) {
	t.Helper()
	ns := startNameServer(t)
	log := &requestLog{}
	n0 := startFakeBroker(t, "g", log)
	n1 := startFakeBroker(t, "g", log)
	n2 := startFakeBroker(t, "g", log)
	n0.register(t, ns, 0, 1, map[string]int{"T": 2})
	n1.register(t, ns, 1, 1, map[string]int{"T": 2})
	n2.register(t, ns, 2, 1, map[string]int{"T": 2})
	p := newTestProducer(t, ns)
	if _, err := p.SendSync(context.Background(), NewMessage("T", []byte("warm"))); err != nil {
		t.Fatal(err)
	}
	return ns, log, n0, n1, n2, p
}
