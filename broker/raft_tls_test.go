package broker

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testutil"
)

// forger is a Raft transport on its own port that sends hand-made RPCs.
type forger struct {
	t     *testing.T
	trans *raft.NetworkTransport
}

// newForger builds a forger whose stream layer is plain TCP (tls zero) or
// mutual TLS with the given files.
func newForger(t *testing.T, tls RaftTLSConfig) *forger {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stream, _, err := newRaftStream(ln, tls, "broker-a")
	if err != nil {
		t.Fatal(err)
	}
	trans := raft.NewNetworkTransport(stream, 1, 2*time.Second, nil)
	t.Cleanup(func() { _ = closeTransport(trans) })
	return &forger{t: t, trans: trans}
}

func (f *forger) header(id string) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(id), Addr: []byte(f.trans.LocalAddr())}
}

// send forges a TimeoutNow to target and two AppendEntries with a much
// higher term (the heartbeat shape, which takes the transport's fast path,
// and the ordinary one), and returns the errors.
func (f *forger) send(target *testNode, id string, term uint64) []error {
	addr := raft.ServerAddress(strings.SplitN(peerAddr(target), "-", 2)[1])
	var errs []error
	var tr raft.TimeoutNowResponse
	errs = append(errs, f.trans.TimeoutNow(raft.ServerID(target.id), addr, &raft.TimeoutNowRequest{RPCHeader: f.header(id)}, &tr))
	for _, commit := range []uint64{0, 1} {
		var ar raft.AppendEntriesResponse
		errs = append(errs, f.trans.AppendEntries(raft.ServerID(target.id), addr, &raft.AppendEntriesRequest{
			RPCHeader: f.header(id), Term: term, LeaderCommitIndex: commit}, &ar))
	}
	return errs
}

// peerAddr is target's dLegerPeers entry ("n0-127.0.0.1:port").
func peerAddr(target *testNode) string {
	for _, p := range strings.Split(target.cfg.Raft.DLegerPeers, ";") {
		if strings.HasPrefix(p, target.id+"-") {
			return p
		}
	}
	return ""
}

func terms(c *testCluster) []uint64 {
	var out []uint64
	for _, n := range c.nodes {
		out = append(out, n.g().raft.CurrentTerm())
	}
	return out
}

// TestRaftMutualTLSRefusesForgedRPCs: a group on mutual TLS replicates;
// TimeoutNow and AppendEntries forged by a host without a certificate,
// with one from another CA, or with a certificate of the group's CA that
// names no member are all refused and change no member's term. A
// certificate naming a member does get a TimeoutNow through (it starts an
// election), so the refusals are not an accident of the forgery.
func TestRaftMutualTLSRefusesForgedRPCs(t *testing.T) {
	ca := testutil.NewTestCA(t, "group-ca")
	c := newTestCluster(t, clusterOpts{disk: true, tune: func(cfg *GroupConfig) {
		f := ca.Issue(cfg.Raft.DLegerSelfID)
		cfg.RaftTLS = RaftTLSConfig{CertPath: f.CertPath, KeyPath: f.KeyPath, CAPath: ca.CertPath}
	}})
	c.createTopic("T", 2)
	c.sendSeq(0, 100)
	// Every member has taken the leader's term before it is recorded: a
	// member that had not heard from the new leader yet would move to its
	// term during the forgeries and look like their doing.
	c.waitCaughtUp()
	l := c.leader()
	follower := c.nodes[c.followerOf(l)]
	before := terms(c)

	valid := ca.Issue("evil")
	other := testutil.NewTestCA(t, "other-ca")
	otherCert := other.Issue("n1")
	cases := map[string]struct {
		tls RaftTLSConfig
		id  string
	}{
		"no certificate":                {id: "n1"},
		"certificate of another CA":     {tls: RaftTLSConfig{CertPath: otherCert.CertPath, KeyPath: otherCert.KeyPath, CAPath: other.CertPath}, id: "n1"},
		"valid certificate, non-member": {tls: RaftTLSConfig{CertPath: valid.CertPath, KeyPath: valid.KeyPath, CAPath: ca.CertPath}, id: "evil"},
	}
	for name, tc := range cases {
		f := newForger(t, tc.tls)
		for _, target := range []*testNode{l, follower} {
			for i, err := range f.send(target, tc.id, before[0]+100) {
				if err == nil {
					t.Errorf("%s: forged RPC %d to %s accepted", name, i, target.id)
				}
			}
		}
	}
	if tlsOf(l).Refused() == 0 || tlsOf(follower).Refused() == 0 {
		t.Errorf("certificate naming no member: refusals %d (leader), %d (follower), want some on both",
			tlsOf(l).Refused(), tlsOf(follower).Refused())
	}
	if after := terms(c); !equalTerms(before, after) {
		t.Fatalf("forged RPCs changed terms: %v → %v", before, after)
	}
	if !c.leader().g().IsLeader() || c.leader() != l {
		t.Fatalf("leadership moved from %s", l.id)
	}
	c.sendSeq(1, 100)

	// Sensitivity: a certificate naming a member (the leader, here in its
	// "<group>-<id>" form) gets a TimeoutNow to a follower through, and it
	// starts an election.
	member := ca.Issue("broker-a-" + l.id)
	f := newForger(t, RaftTLSConfig{CertPath: member.CertPath, KeyPath: member.KeyPath, CAPath: ca.CertPath})
	var tr raft.TimeoutNowResponse
	addr := raft.ServerAddress(strings.SplitN(peerAddr(follower), "-", 2)[1])
	if err := f.trans.TimeoutNow(raft.ServerID(follower.id), addr, &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{
		ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(l.id), Addr: []byte(strings.SplitN(peerAddr(l), "-", 2)[1])}}, &tr); err != nil {
		t.Fatalf("TimeoutNow with a member's identity: %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, "an election after a member's TimeoutNow", func() bool {
		return follower.g().raft.CurrentTerm() > before[0]
	})
}

// tlsOf is n's mutual-TLS stream layer.
func tlsOf(n *testNode) *tlsStream { return n.g().trans.(*raftTransport).tls }

func equalTerms(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

func TestRaftTLSConfigValidate(t *testing.T) {
	ca := testutil.NewTestCA(t, "group-ca")
	f := ca.Issue("n0")
	for _, c := range []RaftTLSConfig{
		{CertPath: f.CertPath},
		{CertPath: f.CertPath, KeyPath: f.KeyPath},
		{CertPath: f.CertPath, KeyPath: f.CertPath, CAPath: ca.CertPath},
		{CertPath: f.CertPath, KeyPath: f.KeyPath, CAPath: f.KeyPath},
	} {
		if err := c.Validate(); !errors.Is(err, ErrInvalidGroupConfig) {
			t.Errorf("%+v: got %v, want ErrInvalidGroupConfig", c, err)
		}
	}
	if err := (RaftTLSConfig{CertPath: f.CertPath, KeyPath: f.KeyPath, CAPath: ca.CertPath}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestRaftMutualTLSMembersNamedByHost: members whose dLegerPeers entries
// are host names (as under Kubernetes) and whose certificates name them in
// the "<group>-<id>" form elect a leader and replicate over mutual TLS,
// with no handshake refused.
func TestRaftMutualTLSMembersNamedByHost(t *testing.T) {
	ca := testutil.NewTestCA(t, "group-ca")
	c := newTestCluster(t, clusterOpts{disk: true, tune: func(cfg *GroupConfig) {
		cfg.Raft.DLegerPeers = strings.ReplaceAll(cfg.Raft.DLegerPeers, "127.0.0.1:", "localhost:")
		f := ca.Issue(cfg.Raft.DLegerGroup + "-" + cfg.Raft.DLegerSelfID)
		cfg.RaftTLS = RaftTLSConfig{CertPath: f.CertPath, KeyPath: f.KeyPath, CAPath: ca.CertPath}
	}})
	c.createTopic("T", 2)
	c.sendSeq(0, 100)
	for _, n := range c.nodes {
		if r := tlsOf(n).Refused(); r != 0 {
			t.Fatalf("%s: %d member handshakes refused", n.id, r)
		}
	}
}

// TestRaftMutualTLSRefusesInboundBeforeBound: until the stream is bound to
// its member's Raft configuration, an inbound handshake is refused even
// with a certificate of the CA: it cannot yet be told to name a member,
// and a connection accepted then would stay open unchecked. Once bound,
// a member's certificate passes and another of the CA does not.
func TestRaftMutualTLSRefusesInboundBeforeBound(t *testing.T) {
	ca := testutil.NewTestCA(t, "group-ca")
	stream, s := tlsStreamFor(t, ca, "n0")
	t.Cleanup(func() { _ = stream.Close() })
	go func() {
		for {
			c, err := stream.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = c.Write([]byte{1}) // after the handshake, which it runs
			}()
		}
	}()
	// dial reports how a handshake with a certificate naming name ends:
	// nil once the server's byte arrived, its refusal otherwise (TLS 1.3
	// delivers the server's verdict on the client with the first read).
	dial := func(name string) error {
		_, peer := tlsStreamFor(t, ca, name)
		c, err := peer.Dial(raft.ServerAddress(stream.Addr().String()), 2*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		return err
	}
	if err := dial("n1"); err == nil {
		t.Fatal("unbound stream accepted the handshake of n1")
	}
	conf := func() raft.Configuration {
		return raft.Configuration{Servers: []raft.Server{{ID: "n0"}, {ID: "n1"}}}
	}
	s.members.Store(&conf)
	if err := dial("n1"); err != nil {
		t.Fatalf("bound stream refused member n1: %v", err)
	}
	if err := dial("x9"); err == nil {
		t.Fatal("bound stream accepted x9, which names no member")
	}
}

// tlsStreamFor is a mutual-TLS stream layer on a new loopback port with a
// certificate of ca naming name.
func tlsStreamFor(t *testing.T, ca *testutil.TestCA, name string) (raft.StreamLayer, *tlsStream) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := ca.Issue(name)
	stream, s, err := newRaftStream(ln, RaftTLSConfig{CertPath: f.CertPath, KeyPath: f.KeyPath, CAPath: ca.CertPath}, "broker-a")
	if err != nil {
		t.Fatal(err)
	}
	return stream, s
}
