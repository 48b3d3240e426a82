package broker

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// heldReplica is a fakeReplica with the asynchronous put: completions are
// parked until the test releases them, like entries waiting for Raft.
type heldReplica struct {
	*fakeReplica
	held chan func()
}

func (r *heldReplica) PutMessagesAsync(ctx context.Context, msgs []*store.Message, done func([]PutResult, error)) {
	r.held <- func() { done(r.PutMessages(ctx, msgs)) }
}

func testTopicConfig(name string, queues int) wire.TopicConfig {
	return wire.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues,
		Perm: wire.PermRead | wire.PermWrite, TopicFilterType: "SINGLE_TAG"}
}

// TestSendAsyncAnsweredBeforeShutdownReturns: a send whose entry has not
// completed keeps Controller.Shutdown waiting; completing it delivers the
// answer to the client and only then Shutdown returns.
func TestSendAsyncAnsweredBeforeShutdownReturns(t *testing.T) {
	ns, nsAddr := startProcNameServer(t)
	_ = ns
	port := testutil.FreePort(t)
	cfg := testBrokerConfig(t, nsAddr, port)
	rep := &heldReplica{fakeReplica: newFakeReplica(t, "127.0.0.1:"+strconv.Itoa(port)), held: make(chan func(), 8)}
	c, err := New(cfg, rep, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	cl := remoting.NewClient(remoting.DefaultClientConfig(), nil)
	defer func() { _ = cl.Close() }()
	if err := rep.UpdateTopic(context.Background(), testTopicConfig("T", 4)); err != nil {
		t.Fatal(err)
	}

	type result struct {
		resp *remoting.RemotingCommand
		err  error
	}
	got := make(chan result, 1)
	go func() {
		req := remoting.NewRequest(remoting.RequestSendMessage, nil, []byte("held"))
		for k, v := range sendExt("T", 1, "") {
			req.ExtFields[k] = v
		}
		resp, err := cl.InvokeSync(context.Background(), c.Addr(), req)
		got <- result{resp, err}
	}()
	complete := <-rep.held // the send is pending: its entry "in flight"

	stopped := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stopped <- c.Shutdown(ctx)
	}()
	testutil.WaitFor(t, 5*time.Second, "shutdown began", func() bool { return c.state.Load() == stateStopping })
	select {
	case err := <-stopped:
		t.Fatalf("Shutdown returned (%v) with a send pending", err)
	case r := <-got:
		t.Fatalf("send answered (%v, %v) before its entry completed", r.resp, r.err)
	default:
	}
	complete()
	r := <-got
	if r.err != nil || r.resp.Code != remoting.ResponseSuccess || r.resp.ExtFields["queueId"] != "1" || r.resp.ExtFields["msgId"] == "" {
		t.Fatalf("pending send answered %v, %v", r.resp, r.err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestSendInlineChoice: only sends that cannot wait on a Raft write of their
// own run on the connection's reader.
func TestSendInlineChoice(t *testing.T) {
	rep := &heldReplica{fakeReplica: newFakeReplica(t, "127.0.0.1:1"), held: make(chan func(), 1)}
	if err := rep.UpdateTopic(context.Background(), testTopicConfig("T", 4)); err != nil {
		t.Fatal(err)
	}
	c := &Controller{rep: rep}
	mk := func(ext map[string]string) *remoting.RemotingCommand {
		req := remoting.NewRequest(remoting.RequestSendMessageV2, nil, nil)
		req.ExtFields = ext
		return req
	}
	cases := []struct {
		name string
		ext  map[string]string
		want bool
	}{
		{"existing topic", sendExt("T", 0, ""), true},
		{"existing topic, v2 names", map[string]string{"b": "T", "i": "TAGS\x01a\x02"}, true},
		{"missing topic (auto-create)", sendExt("Nope", 0, ""), false},
		{"retry topic", sendExt("%RETRY%g", 0, ""), false},
		{"delay level", sendExt("T", 0, "DELAY\x013\x02"), false},
		{"delay level, v2 names", map[string]string{"b": "T", "i": "DELAY\x013\x02"}, false},
	}
	for _, tc := range cases {
		if got := c.sendInline(mk(tc.ext)); got != tc.want {
			t.Errorf("%s: inline %v, want %v", tc.name, got, tc.want)
		}
	}
	// A Replica without the asynchronous put never runs inline.
	c.rep = rep.fakeReplica
	if c.sendInline(mk(sendExt("T", 0, ""))) {
		t.Error("synchronous Replica: inline")
	}
}

// TestSendsDuringLeadershipTransfer: sends over RPC keep flowing while the
// leader hands over: every one is answered SUCCESS or not-leader — none
// fails otherwise or goes unanswered (sends caught in the transfer wait in
// the batcher) — and the new leader takes sends.
func TestSendsDuringLeadershipTransfer(t *testing.T) {
	pc := startRealCluster(t, withProdRaftTimings)
	l := pc.leader()
	pc.createTopic(pc.nodes[l].Addr(), "TT", 4)
	f := (l + 1) % 3
	newLeader := pc.nodes[f].Addr()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[int16]int{}
	var bad []string
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				req := remoting.NewRequest(remoting.RequestSendMessage, nil, []byte("x"))
				for k, v := range sendExt("TT", w%4, "") {
					req.ExtFields[k] = v
				}
				cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
				resp, err := pc.client.InvokeSync(cctx, pc.nodes[l].Addr(), req)
				ccancel()
				mu.Lock()
				switch {
				case err != nil:
					bad = append(bad, err.Error())
				case resp.Code == remoting.ResponseSuccess:
				case resp.Code == remoting.ResponseServiceNotAvailable:
					// not leader (naming the new one once known): the SDK
					// re-sends there.
				default:
					bad = append(bad, strconv.Itoa(int(resp.Code))+" "+resp.Remark)
				}
				if err == nil {
					counts[resp.Code]++
				}
				mu.Unlock()
			}
		}(w)
	}
	testutil.WaitFor(t, 10*time.Second, "sends flowing", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return counts[remoting.ResponseSuccess] >= 50
	})
	r := pc.call(pc.nodes[l].Addr(), remoting.RequestLeadershipTransfer, map[string]string{"targetId": pc.groups[f].SelfID()}, nil)
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("transfer: %d %q", r.Code, r.Remark)
	}
	testutil.WaitFor(t, 10*time.Second, "old leader answers not-leader", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return counts[remoting.ResponseServiceNotAvailable] > 0
	})
	cancel()
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d sends failed otherwise, first: %s", len(bad), bad[0])
	}
	req := remoting.NewRequest(remoting.RequestSendMessage, nil, []byte("after"))
	for k, v := range sendExt("TT", 0, "") {
		req.ExtFields[k] = v
	}
	resp, err := pc.client.InvokeSync(context.Background(), newLeader, req)
	if err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("send to the new leader: %v, %v", resp, err)
	}
	t.Logf("answers during the transfer: %v", counts)
}
