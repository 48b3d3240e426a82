package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
)

// RaftTLSConfig turns on mutual TLS between the members of a group (the
// raftTls* keys, all three or none). Every member presents a certificate
// signed by the group's CA and accepts only peers that do, on both the
// listening and the dialing side, so a host without such a certificate
// cannot send a Raft RPC at all (see docs/adr/0014-raft-mutual-tls.md).
type RaftTLSConfig struct {
	// CertPath and KeyPath are this member's PEM certificate (chain) and
	// key; the certificate must allow both server and client use
	// (extKeyUsage serverAuth, clientAuth).
	CertPath string `prop:"raftTlsCertPath"`
	KeyPath  string `prop:"raftTlsKeyPath"`
	// CAPath is the PEM bundle of the group's CA: peers' certificates must
	// chain to it. Host names are not checked: the CA is the group's own,
	// and members are addressed by their dLegerPeers entries.
	CAPath string `prop:"raftTlsCaPath"`
}

// Enabled reports whether any raftTls* key is set (Validate then requires
// all three).
func (c RaftTLSConfig) Enabled() bool { return c.CertPath != "" || c.KeyPath != "" || c.CAPath != "" }

// Validate checks that the keys are all set or all empty and that the
// files load.
func (c RaftTLSConfig) Validate() error {
	_, _, err := c.tlsConfigs()
	return err
}

// tlsConfigs builds the listening and the dialing side (nil, nil when off).
func (c RaftTLSConfig) tlsConfigs() (server, client *tls.Config, err error) {
	if !c.Enabled() {
		return nil, nil, nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: raftTlsCertPath, raftTlsKeyPath, raftTlsCaPath: %s", ErrInvalidGroupConfig, fmt.Sprintf(format, args...))
	}
	if c.CertPath == "" || c.KeyPath == "" || c.CAPath == "" {
		return nil, nil, bad("give all three or none")
	}
	cert, err := tls.LoadX509KeyPair(c.CertPath, c.KeyPath)
	if err != nil {
		return nil, nil, bad("%v", err)
	}
	pool, err := remoting.LoadCertPool(c.CAPath)
	if err != nil {
		return nil, nil, bad("%v", err)
	}
	server = &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS13,
	}
	client = &tls.Config{
		Certificates: []tls.Certificate{cert},
		// The chain is checked by VerifyPeerCertificate, without the
		// host name (see CAPath).
		InsecureSkipVerify:    true, //nolint:gosec // verified below
		VerifyPeerCertificate: remoting.VerifyChain(pool, x509.ExtKeyUsageServerAuth),
		MinVersion:            tls.VersionTLS13,
	}
	return server, client, nil
}

// newRaftStream is the Raft transport's stream layer on ln: plain TCP, or
// mutual TLS when cfg enables it.
func newRaftStream(ln net.Listener, cfg RaftTLSConfig) (raft.StreamLayer, error) {
	server, client, err := cfg.tlsConfigs()
	if err != nil {
		return nil, err
	}
	if server == nil {
		return &tcpStream{Listener: ln}, nil
	}
	return &tlsStream{Listener: tls.NewListener(ln, server), addr: ln.Addr(), client: client}, nil
}

// tlsStream is the mutual-TLS stream layer. Accept returns before the
// handshake (the transport's accept loop is one goroutine; the handshake
// runs on the connection's first read, in its own handler), so a peer
// without a valid certificate fails on its first RPC and is disconnected.
type tlsStream struct {
	net.Listener
	addr   net.Addr
	client *tls.Config
}

// Addr is the TCP address (the member's dLegerPeers address).
func (s *tlsStream) Addr() net.Addr { return s.addr }

// Dial implements raft.StreamLayer: the handshake is part of the dial.
func (s *tlsStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", string(address), s.client)
}

// ErrNotMember is the answer to a Raft RPC whose sender is not in the
// receiver's current configuration.
var ErrNotMember = errors.New("broker: raft RPC from a server outside the configuration")

// memberTransport is a NetworkTransport that refuses RPCs from servers
// outside the current configuration: the RPC header's server ID must be
// one of its servers'. The header's address is not compared: a member
// advertises its listener's resolved address, while the configuration holds
// its dLegerPeers entry, which may be a host name (Kubernetes). hashicorp/raft refuses votes from non-members
// but not AppendEntries or TimeoutNow (a higher term in either makes the
// receiver step down; TimeoutNow starts an election at once), so a removed
// member, or any host that can reach the port without Raft TLS, could
// disrupt the group. While the configuration is empty (a member that was
// never bootstrapped, about to be added) everything is accepted.
//
// RPCs reach Raft through one extra goroutine hop (the filter), and
// heartbeats through the wrapped fast-path handler.
type memberTransport struct {
	*raft.NetworkTransport
	log     *zap.Logger
	members atomic.Pointer[func() raft.Configuration] // nil until bindMembership
	out     chan raft.RPC
	done    chan struct{}
	once    sync.Once
	refused atomic.Uint64
	warned  atomic.Bool
}

func newMemberTransport(nt *raft.NetworkTransport, log *zap.Logger) *memberTransport {
	t := &memberTransport{NetworkTransport: nt, log: log, out: make(chan raft.RPC), done: make(chan struct{})}
	go t.filter(nt.Consumer())
	return t
}

// bindMembership makes trans check senders against r's configuration, if
// it is a memberTransport.
func bindMembership(trans raft.Transport, r *raft.Raft) {
	if t, ok := trans.(*memberTransport); ok {
		f := func() raft.Configuration { return r.GetConfiguration().Configuration() }
		t.members.Store(&f)
	}
}

// Consumer implements raft.Transport: only RPCs from members.
func (t *memberTransport) Consumer() <-chan raft.RPC { return t.out }

// SetHeartbeatHandler implements raft.Transport: heartbeats from
// non-members are refused before they reach Raft.
func (t *memberTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	if cb == nil {
		t.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	t.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		if err := t.check(rpc); err != nil {
			rpc.Respond(nil, err)
			return
		}
		cb(rpc)
	})
}

// Close stops the filter and closes the transport.
func (t *memberTransport) Close() error {
	t.once.Do(func() { close(t.done) })
	return t.NetworkTransport.Close()
}

// Refused counts the RPCs refused as coming from non-members.
func (t *memberTransport) Refused() uint64 { return t.refused.Load() }

func (t *memberTransport) filter(in <-chan raft.RPC) {
	for {
		select {
		case rpc := <-in:
			if err := t.check(rpc); err != nil {
				rpc.Respond(nil, err)
				continue
			}
			select {
			case t.out <- rpc:
			case <-t.done:
				rpc.Respond(nil, raft.ErrTransportShutdown)
				return
			}
		case <-t.done:
			return
		}
	}
}

func (t *memberTransport) check(rpc raft.RPC) error {
	h, ok := rpc.Command.(raft.WithRPCHeader)
	f := t.members.Load()
	if !ok || f == nil {
		return nil
	}
	conf := (*f)()
	if len(conf.Servers) == 0 {
		return nil
	}
	hdr := h.GetRPCHeader()
	for _, s := range conf.Servers {
		if string(s.ID) == string(hdr.ID) {
			return nil
		}
	}
	t.refused.Add(1)
	if !t.warned.Swap(true) { // once per transport: a removed member retries forever
		t.log.Warn("refusing raft RPCs from a server outside the configuration (logged once)",
			zap.String("id", string(hdr.ID)), zap.String("addr", string(hdr.Addr)), zap.String("rpc", fmt.Sprintf("%T", rpc.Command)))
	}
	return fmt.Errorf("%w: id %q addr %q", ErrNotMember, hdr.ID, hdr.Addr)
}
