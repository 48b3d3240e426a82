package broker

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
)

// RaftTLSConfig turns on mutual TLS between the members of a group (the
// raftTls* keys, all three or none). Every member presents a certificate
// signed by the group's CA that names it (see tlsStream), and accepts only
// peers whose certificate chains to that CA and names a member of the
// current configuration, on both the listening and the dialing side, so a
// host without such a certificate cannot send a Raft RPC at all (see
// docs/adr/0016-raft-mutual-tls.md).
type RaftTLSConfig struct {
	// CertPath and KeyPath are this member's PEM certificate (chain) and
	// key; the certificate must allow both server and client use
	// (extKeyUsage serverAuth, clientAuth) and name the member: subject
	// CN or a DNS name "<dLegerSelfId>" or "<dLegerGroup>-<dLegerSelfId>".
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
// mutual TLS when cfg enables it (then also returned as *tlsStream, for
// bindMembership). group is the dLegerGroup, part of a member's name.
func newRaftStream(ln net.Listener, cfg RaftTLSConfig, group string) (raft.StreamLayer, *tlsStream, error) {
	server, client, err := cfg.tlsConfigs()
	if err != nil {
		return nil, nil, err
	}
	if server == nil {
		return &tcpStream{Listener: ln}, nil, nil
	}
	s := &tlsStream{addr: ln.Addr(), group: group}
	// Both sides check that the peer's certificate names a member.
	server.VerifyConnection = func(cs tls.ConnectionState) error { return s.verifyPeer(cs, true) }
	client.VerifyConnection = func(cs tls.ConnectionState) error { return s.verifyPeer(cs, false) }
	s.Listener, s.client = tls.NewListener(ln, server), client
	return s, s, nil
}

// tlsStream is the mutual-TLS stream layer. Accept returns before the
// handshake (the transport's accept loop is one goroutine; the handshake
// runs on the connection's first read, in its own handler), so a peer
// without a valid certificate fails on its first RPC and is disconnected.
//
// Once bound to the group's Raft (bindMembership), a peer's certificate
// must also name a server of the current configuration: its subject
// common name or one of its DNS names is the member's dLegerSelfId
// ("n0") or "<dLegerGroup>-<id>" ("broker-a-n0"). The check runs once per
// connection, in the handshake, so RPCs cost nothing more. While the
// configuration is empty (a member never bootstrapped), any certificate
// of the CA is accepted. Before the stream is bound (the moments between
// the transport's start and NewRaft's return) inbound handshakes are
// refused, since an accepted connection stays open unchecked, and
// outbound ones accepted: they go to the configured peers' addresses, and
// Raft retries what the refusal costs a peer.
type tlsStream struct {
	net.Listener
	addr    net.Addr
	client  *tls.Config
	group   string
	members atomic.Pointer[func() raft.Configuration]
	refused atomic.Uint64
	warned  atomic.Bool
	log     atomic.Pointer[zap.Logger]
}

// Addr is the TCP address (the member's dLegerPeers address).
func (s *tlsStream) Addr() net.Addr { return s.addr }

// Dial implements raft.StreamLayer: the handshake is part of the dial.
func (s *tlsStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", string(address), s.client)
}

// Refused counts the handshakes refused because the peer's certificate
// named no member.
func (s *tlsStream) Refused() uint64 { return s.refused.Load() }

func (s *tlsStream) verifyPeer(cs tls.ConnectionState, inbound bool) error {
	f := s.members.Load()
	if f == nil && inbound {
		return fmt.Errorf("%w: this member's raft is not running yet", ErrNotMember)
	}
	if f == nil || len(cs.PeerCertificates) == 0 {
		return nil // chain checks already ran
	}
	conf := (*f)()
	if len(conf.Servers) == 0 {
		return nil
	}
	cert := cs.PeerCertificates[0]
	names := append([]string{cert.Subject.CommonName}, cert.DNSNames...)
	for _, srv := range conf.Servers {
		id := string(srv.ID)
		for _, n := range names {
			if n == id || n == s.group+"-"+id {
				return nil
			}
		}
	}
	s.refused.Add(1)
	if l := s.log.Load(); l != nil && !s.warned.Swap(true) { // once: a refused peer redials forever
		l.Warn("refusing a raft peer whose certificate names no member (logged once)",
			zap.String("subject", cert.Subject.CommonName), zap.Strings("dns", cert.DNSNames))
	}
	return fmt.Errorf("%w: certificate %q", ErrNotMember, cert.Subject.CommonName)
}

// raftTransport is the disk members' transport: hashicorp/raft's
// NetworkTransport (all its methods, RPCs straight to Raft) with the TLS
// stream layer kept for bindMembership.
type raftTransport struct {
	*raft.NetworkTransport
	tls *tlsStream // nil without raftTls* keys
	// watch reports ended inbound connections (fastelect.go).
	watch *closeWatchStream
}

// bindMembership makes trans's TLS stream layer, if any, check peers
// against r's configuration.
func bindMembership(trans raft.Transport, r *raft.Raft, log *zap.Logger) {
	if t, ok := trans.(*raftTransport); ok && t.tls != nil {
		f := func() raft.Configuration { return r.GetConfiguration().Configuration() }
		t.tls.log.Store(log)
		t.tls.members.Store(&f)
	}
}
