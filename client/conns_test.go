package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
)

// laneRecord is one send as an orderedBroker saw it.
type laneRecord struct {
	peer  string // the client side of the connection it came on
	queue int
	body  string
	seq   string // PropertySequence, "" when absent
}

// startOrderedBroker is a fake broker whose sends are handled by one
// worker, so it records them in the order each connection delivered them.
func startOrderedBroker(t *testing.T, name string) (*fakeBroker, func() []laneRecord) {
	t.Helper()
	var mu sync.Mutex
	var recs []laneRecord
	fb := &fakeBroker{t: t, name: name, log: &requestLog{discard: true}, nsClient: remoting.NewClient(remoting.ClientConfig{}, nil)}
	fb.srv = remoting.NewServer(remoting.ServerConfig{}, nil)
	h := func(_ context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		var hdr sendMessageHeaderV2
		if err := req.DecodeHeader(&hdr); err != nil {
			return nil, err
		}
		r := laneRecord{peer: conn.RemoteAddr(), queue: hdr.QueueID, body: string(req.Body)}
		for _, kv := range strings.Split(hdr.Properties, "\x02") {
			if k, v, ok := strings.Cut(kv, "\x01"); ok && k == PropertySequence {
				r.seq = v
			}
		}
		mu.Lock()
		recs = append(recs, r)
		mu.Unlock()
		return fb.stored(req), nil
	}
	for _, code := range []int16{remoting.RequestSendMessage, remoting.RequestSendMessageV2} {
		fb.srv.Register(code, h, 1, 1024)
	}
	fb.srv.RegisterDefault(func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 64)
	if err := fb.srv.Start(); err != nil {
		t.Fatal(err)
	}
	fb.addr = fb.srv.Addr().String()
	t.Cleanup(func() { fb.stop() })
	return fb, func() []laneRecord {
		mu.Lock()
		defer mu.Unlock()
		return append([]laneRecord(nil), recs...)
	}
}

func TestConnectionsPerBrokerValidation(t *testing.T) {
	for _, n := range []int{0, -1, remoting.MaxConnsPerAddr + 1} {
		if _, err := NewProducer(NameServers("127.0.0.1:9876"), ConnectionsPerBroker(n)); !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("ConnectionsPerBroker(%d): %v", n, err)
		}
	}
	for _, n := range []int{1, 4, remoting.MaxConnsPerAddr} {
		if _, err := NewProducer(NameServers("127.0.0.1:9876"), ConnectionsPerBroker(n)); err != nil {
			t.Fatalf("ConnectionsPerBroker(%d): %v", n, err)
		}
	}
}

// TestConnectionsPerBrokerSpreadsAndKeepsQueueOrder: with 3 connections
// and 4 queues, the sends of each queue all use one connection (queue 3
// shares queue 0's), 3 connections carry sends, every queue's messages and
// the idempotent producer's sequences arrive in send order, and Close
// closes every connection.
func TestConnectionsPerBrokerSpreadsAndKeepsQueueOrder(t *testing.T) {
	ns := startNameServer(t)
	fb, records := startOrderedBroker(t, "broker-a")
	fb.register(t, ns, 0, 1, map[string]int{"T": 4})
	p := newTestProducer(t, ns, ConnectionsPerBroker(3), Idempotent(true))
	if got := p.rc.Lanes(); got != 3 {
		t.Fatalf("remoting client has %d lanes, want 3", got)
	}
	const perQueue = 40
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for q := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sel := ManualSelector(MessageQueue{Topic: "T", BrokerName: "broker-a", QueueID: q})
			for i := range perQueue {
				if _, err := p.SendWithSelector(context.Background(), NewMessage("T", fmt.Appendf(nil, "%d-%d", q, i)), sel); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	recs := records()
	if len(recs) != 4*perQueue {
		t.Fatalf("broker got %d sends, want %d", len(recs), 4*perQueue)
	}
	peerOf := map[int]string{}
	next := map[int]int{}
	peers := map[string]bool{}
	for _, r := range recs {
		if p, ok := peerOf[r.queue]; ok && p != r.peer {
			t.Fatalf("queue %d used connections %s and %s", r.queue, p, r.peer)
		}
		peerOf[r.queue] = r.peer
		peers[r.peer] = true
		if want := fmt.Sprintf("%d-%d", r.queue, next[r.queue]); r.body != want {
			t.Fatalf("queue %d: got %q, want %q", r.queue, r.body, want)
		}
		if r.seq != strconv.Itoa(next[r.queue]) {
			t.Fatalf("queue %d message %d carries sequence %q", r.queue, next[r.queue], r.seq)
		}
		next[r.queue]++
	}
	if len(peers) != 3 {
		t.Fatalf("sends came on %d connections, want 3", len(peers))
	}
	if peerOf[0] != peerOf[3] {
		t.Fatalf("queues 0 and 3 (lane 0) on different connections %s, %s", peerOf[0], peerOf[3])
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	// The broker sees every connection of the producer go away.
	waitNoClientConns(t, fb, peers)
}

// waitNoClientConns waits until fb has no connection from peers.
func waitNoClientConns(t *testing.T, fb *fakeBroker, peers map[string]bool) {
	t.Helper()
	testutil.WaitFor(t, 5*time.Second, "broker sees the producer's connections closed", func() bool {
		for _, c := range fb.srv.Conns() {
			if peers[c.RemoteAddr()] {
				return false
			}
		}
		return true
	})
}
