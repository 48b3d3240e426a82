package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// hungAddr accepts connections and never answers: a host that is down
// behind a firewall, or a process stopped (SIGSTOP) mid-way.
func hungAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// fakeRemoting serves one request code with a fixed JSON body.
func fakeRemoting(t *testing.T, code int16, body []byte) string {
	t.Helper()
	srv := remoting.NewServer(remoting.ServerConfig{ListenAddr: "127.0.0.1:0"}, nil)
	srv.Register(code, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		resp := remoting.NewResponse(remoting.ResponseSuccess, "")
		resp.Body = body
		return resp, nil
	}, 1, 16)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv.Addr().String()
}

func fakeNameServerRouting(t *testing.T, brokerName string, addrs map[int64]string) string {
	t.Helper()
	ci := &wire.ClusterInfo{BrokerAddrTable: map[string]wire.BrokerData{}}
	if addrs != nil {
		ci.BrokerAddrTable[brokerName] = wire.BrokerData{Cluster: "C", BrokerName: brokerName, BrokerAddrs: addrs}
	}
	return fakeRemoting(t, remoting.RequestGetBrokerClusterInfo, wire.EncodeClusterInfo(ci, true))
}

func fakeMember(t *testing.T, st RaftStatus) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return fakeRemoting(t, remoting.RequestRaftStatus, b)
}

// The join check finds a running group within its bound although one of
// the name servers or the routed leader's host does not answer at all,
// and although a name server (just restarted) routes no member yet: the
// others are asked too, not after the silent one's time ran out.
func TestJoinCheckDespiteSilentPeers(t *testing.T) {
	const bn = "b"
	follower := fakeMember(t, RaftStatus{SelfID: "n2", State: "Follower", LastLogIndex: 40, LastLogTerm: 2})
	cases := map[string]func() []string{
		"leader host silent": func() []string {
			return []string{fakeNameServerRouting(t, bn, map[int64]string{0: hungAddr(t), 1: follower})}
		},
		"first name server silent": func() []string {
			return []string{hungAddr(t), fakeNameServerRouting(t, bn, map[int64]string{0: follower})}
		},
		"first name server routes nobody": func() []string {
			return []string{fakeNameServerRouting(t, bn, nil), fakeNameServerRouting(t, bn, map[int64]string{1: follower})}
		},
	}
	for name, nameServers := range cases {
		t.Run(name, func(t *testing.T) {
			cl := remoting.NewClient(remoting.DefaultClientConfig(), nil)
			defer cl.Close()
			p := groupPeers{client: cl, nameServers: nameServers(), brokerName: bn}
			ctx, cancel := context.WithTimeout(context.Background(), joinCheckTimeout)
			defer cancel()
			start := time.Now()
			why, tried := p.runningLog(ctx, "127.0.0.1:1", "n1")
			if why == "" {
				t.Fatalf("bootstraps although follower n2 holds the group's log (asked: %v)", tried)
			}
			if took := time.Since(start); took >= joinCheckTimeout {
				t.Fatalf("the check took %v, its bound is %v", took, joinCheckTimeout)
			}
		})
	}
}

// With nothing answering, the check gives up at its bound and the member
// bootstraps.
func TestJoinCheckBoundWhenNothingAnswers(t *testing.T) {
	t.Parallel()
	cl := remoting.NewClient(remoting.DefaultClientConfig(), nil)
	defer cl.Close()
	ns := fakeNameServerRouting(t, "b", map[int64]string{0: hungAddr(t), 1: hungAddr(t)})
	p := groupPeers{client: cl, nameServers: []string{hungAddr(t), ns}, brokerName: "b"}
	ctx, cancel := context.WithTimeout(context.Background(), joinCheckTimeout)
	defer cancel()
	start := time.Now()
	why, tried := p.runningLog(ctx, "127.0.0.1:1", "n1")
	if why != "" {
		t.Fatalf("joins with no member answering: %s", why)
	}
	if len(tried) != 2 {
		t.Fatalf("asked %v, want both routed members", tried)
	}
	if took := time.Since(start); took > joinCheckTimeout+time.Second {
		t.Fatalf("the check took %v, its bound is %v", took, joinCheckTimeout)
	}
}

// A wiped member whose start fails on a configuration error (here a
// clusterAuth pair missing its secret, which the join check signs with)
// must not have bootstrapped first: the next start, with the error
// fixed, would find its own index-1 entry and never ask the group.
func TestJoinCheckConfigErrorLeavesNoRaftState(t *testing.T) {
	pc := startRealCluster(t, nil)
	w := (pc.leader() + 1) % 3
	pc.stopNode(w)
	pc.wipe(w)
	cfg := pc.cfgs[w]
	cfg.ClusterAuthAccessKey = "cluster"
	pc.started[w] = true
	if n, err := NewNode(cfg, pc.parts[w], testLogger()); err == nil {
		_ = n.Close()
		t.Fatal("started with clusterAuthAccessKey but no clusterAuthSecretKey")
	}
	term, err := pc.parts[w].Stable.GetUint64([]byte("CurrentTerm"))
	if err != nil {
		t.Fatal(err)
	}
	if term != 0 {
		t.Fatalf("the failed start bootstrapped (current term %d) before it failed", term)
	}
}

// fakeRaftPeer is a Raft transport that answers every pre-vote request
// with term, as id when id is set, and records the terms it was asked at.
func fakeRaftPeer(t *testing.T, term uint64, id string) (raft.ServerAddress, *[]uint64) {
	t.Helper()
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			var rpc raft.RPC
			select {
			case rpc = <-tr.Consumer():
			case <-stop:
				return
			}
			req, ok := rpc.Command.(*raft.RequestPreVoteRequest)
			if !ok {
				rpc.Respond(nil, fmt.Errorf("unexpected %T", rpc.Command))
				continue
			}
			mu.Lock()
			asked = append(asked, req.Term)
			mu.Unlock()
			rpc.Respond(&raft.RequestPreVoteResponse{RPCHeader: raft.RPCHeader{ID: []byte(id)}, Term: term}, nil)
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		tr.CloseStreams()
		_ = tr.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, term := range asked {
			if term != 0 {
				t.Errorf("a peer was asked at term %d; the check must never carry a term to a member", term)
			}
		}
	})
	return tr.LocalAddr(), &asked
}

func probeTransport(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tr.CloseStreams()
		_ = tr.Close()
	})
	return tr
}

// Over Raft, a member at a term past 1 means a running group, found
// within the bound although another member's host never answers; members
// that only bootstrapped (term 1) or are down mean a first start.
func TestRaftPeersRunning(t *testing.T) {
	self := probeTransport(t)
	conf := func(peers ...raft.ServerAddress) raft.Configuration {
		c := raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: self.LocalAddr()}}}
		for i, a := range peers {
			c.Servers = append(c.Servers, raft.Server{ID: raft.ServerID(fmt.Sprintf("p%d", i)), Address: a})
		}
		return c
	}
	running, asked := fakeRaftPeer(t, 5, "")
	bootstrapped, _ := fakeRaftPeer(t, 1, "")
	stranger, _ := fakeRaftPeer(t, 9, "n7")
	ctx, cancel := context.WithTimeout(context.Background(), joinCheckTimeout)
	defer cancel()
	start := time.Now()
	why, tried := raftPeersRunning(ctx, self, conf(raft.ServerAddress(hungAddr(t)), running), "n1")
	if why == "" {
		t.Fatalf("bootstraps although a member is at term 5 (asked: %v)", tried)
	}
	if took := time.Since(start); took >= joinCheckTimeout {
		t.Fatalf("the check took %v, its bound is %v", took, joinCheckTimeout)
	}
	if len(*asked) != 1 {
		t.Fatalf("the running member was asked %d times", len(*asked))
	}

	refused := raft.ServerAddress(fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)))
	ctx2, cancel2 := context.WithTimeout(context.Background(), joinCheckTimeout)
	defer cancel2()
	why, tried = raftPeersRunning(ctx2, self, conf(bootstrapped, refused), "n1")
	if why != "" {
		t.Fatalf("joins at a first start: %s", why)
	}
	if len(tried) != 2 {
		t.Fatalf("asked %v, want both members", tried)
	}

	// Another group's member at a peer's address (a typo in dLegerPeers)
	// answers as itself: its term is not this group's.
	ctx3, cancel3 := context.WithTimeout(context.Background(), joinCheckTimeout)
	defer cancel3()
	if why, tried := raftPeersRunning(ctx3, self, conf(stranger), "n1"); why != "" || len(tried) != 1 || !strings.Contains(tried[0], "answered as n7") {
		t.Fatalf("a process answering as n7 at p0's address: why %q, asked %v", why, tried)
	}
}

// Members of a group starting for the first time run their join checks
// side by side; a member in its check answers the others' asks itself
// (term 0), so no check waits for its bound on a peer whose Raft has not
// started yet.
func TestJoinCheckAnswersPeersChecks(t *testing.T) {
	a, b := probeTransport(t), probeTransport(t)
	stop := answerProbes(b, "n2")
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	conf := raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: a.LocalAddr()}, {ID: "n2", Address: b.LocalAddr()}}}
	ctx, cancel := context.WithTimeout(context.Background(), joinCheckTimeout)
	defer cancel()
	why, tried := raftPeersRunning(ctx, a, conf, "n1")
	if why != "" || len(tried) != 1 || !strings.Contains(tried[0], "term 0") {
		t.Fatalf("n2 in its own check: why %q, asked %v; want its answer at term 0", why, tried)
	}
	// Other RPCs get an error, not a hang: the sender retries once Raft runs.
	var resp raft.AppendEntriesResponse
	if err := a.AppendEntries("n2", b.LocalAddr(), &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax}}, &resp); err == nil {
		t.Fatal("an AppendEntries reaching a member in its join check was answered without error")
	}
	stop()
	stopped = true
	// Once stopped, the consumer is free for Raft: nothing answers now.
	select {
	case rpc := <-b.Consumer():
		t.Fatalf("an RPC was left on the consumer: %T", rpc.Command)
	default:
	}
}

// Over Raft mutual TLS, the check's pre-vote goes through with a member's
// certificate (a rebuilt member keeps its certificate) and finds the
// running group; with a certificate naming no member it is refused, and
// the terms of the group do not move either way.
func TestRaftPeersRunningOverMutualTLS(t *testing.T) {
	ca := testutil.NewTestCA(t, "group-ca")
	c := newTestCluster(t, clusterOpts{disk: true, tune: func(cfg *GroupConfig) {
		f := ca.Issue(cfg.Raft.DLegerSelfID)
		cfg.RaftTLS = RaftTLSConfig{CertPath: f.CertPath, KeyPath: f.KeyPath, CAPath: ca.CertPath}
	}})
	c.createTopic("T", 2)
	// Every member holds the leader's entries, so its term is the
	// leader's: a member still at the election's term would move later.
	c.waitCaughtUp()
	before := terms(c)
	l := c.leader()
	var conf raft.Configuration
	var self raft.ServerID
	for _, n := range c.nodes {
		id := raft.ServerID(n.id)
		conf.Servers = append(conf.Servers, raft.Server{ID: id, Address: raft.ServerAddress(strings.SplitN(peerAddr(n), "-", 2)[1])})
		if n != l {
			self = id
		}
	}
	probe := func(certName string) (string, []string) {
		cert := ca.Issue(certName)
		f := newForger(t, RaftTLSConfig{CertPath: cert.CertPath, KeyPath: cert.KeyPath, CAPath: ca.CertPath})
		ctx, cancel := context.WithTimeout(context.Background(), joinCheckTimeout)
		defer cancel()
		return raftPeersRunning(ctx, f.trans, conf, self)
	}
	if why, tried := probe(string(self)); why == "" {
		t.Fatalf("with member %s's certificate: bootstraps although the group runs (asked: %v)", self, tried)
	}
	if why, _ := probe("evil"); why != "" {
		t.Fatalf("with a certificate naming no member the check got an answer: %s", why)
	}
	if after := terms(c); !equalTerms(before, after) {
		t.Fatalf("the check moved terms: %v → %v", before, after)
	}
}
