package remoting

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// TLSMode is a server's TLS policy (RocketMQ's tls.server.mode).
type TLSMode int

// The server TLS modes.
const (
	// TLSDisabled serves plaintext only; a TLS ClientHello fails to parse
	// as a frame and closes the connection.
	TLSDisabled TLSMode = iota
	// TLSPermissive serves TLS and plaintext on one port: the first byte a
	// client sends decides (0x16, a TLS handshake record, or the first
	// byte of a frame's length, which is 0 for any frame below 16 MiB).
	// RocketMQ's TlsModeHandler does the same; it lets clients move to TLS
	// one at a time.
	TLSPermissive
	// TLSEnforcing serves TLS only: a plaintext client's first bytes fail
	// the handshake and its connection is closed.
	TLSEnforcing
)

// String returns the mode's config value.
func (m TLSMode) String() string {
	switch m {
	case TLSPermissive:
		return "permissive"
	case TLSEnforcing:
		return "enforcing"
	default:
		return "disabled"
	}
}

// ParseTLSMode parses tlsServerMode ("disabled", "permissive",
// "enforcing"; case-insensitive; empty is disabled).
func ParseTLSMode(s string) (TLSMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "disabled":
		return TLSDisabled, nil
	case "permissive":
		return TLSPermissive, nil
	case "enforcing":
		return TLSEnforcing, nil
	}
	return TLSDisabled, fmt.Errorf("%w: tlsServerMode=%q (want disabled, permissive or enforcing)", ErrTLSConfig, s)
}

// TLSConfig holds the TLS keys of broker.conf and namesrv.conf, named after
// RocketMQ's tls.* system properties (tls.server.mode → tlsServerMode).
// The server keys secure the node's listeners; the client keys its own
// outbound links (a broker's registrations with the name servers) and the
// command-line tools.
type TLSConfig struct {
	// ServerMode is disabled (default), permissive or enforcing.
	ServerMode string `prop:"tlsServerMode"`
	// ServerCertPath and ServerKeyPath are the PEM certificate (chain) and
	// private key the listeners present; required unless disabled.
	ServerCertPath string `prop:"tlsServerCertPath"`
	ServerKeyPath  string `prop:"tlsServerKeyPath"`
	// ServerNeedClientAuth asks clients for a certificate: none (default),
	// optional or require (RocketMQ's tls.server.need.client.auth).
	ServerNeedClientAuth string `prop:"tlsServerNeedClientAuth"`
	// ServerAuthClient verifies client certificates against
	// ServerTrustCertPath (RocketMQ's tls.server.authClient); with
	// tlsServerNeedClientAuth=none it implies require.
	ServerAuthClient bool `prop:"tlsServerAuthClient"`
	// ServerTrustCertPath is the PEM bundle of CAs client certificates must
	// chain to when ServerAuthClient is set.
	ServerTrustCertPath string `prop:"tlsServerTrustCertPath"`

	// ClientEnable makes outbound remoting connections use TLS
	// (RocketMQ's tls.enable).
	ClientEnable bool `prop:"tlsEnable"`
	// UseTLS is RocketMQ's NettyClientConfig key for the same switch, as a
	// stock broker.conf may carry it: true means tlsEnable=true.
	UseTLS bool `prop:"useTLS"`
	// ClientTrustCertPath is the PEM bundle of CAs a server's certificate
	// must chain to. Empty: the server is not verified (RocketMQ's test
	// mode, and what the official Go client always does).
	ClientTrustCertPath string `prop:"tlsClientTrustCertPath"`
	// ClientCertPath and ClientKeyPath are presented to servers that ask
	// for a client certificate.
	ClientCertPath string `prop:"tlsClientCertPath"`
	ClientKeyPath  string `prop:"tlsClientKeyPath"`
}

// Validate checks the keys' values and that the files they name load.
func (c TLSConfig) Validate() error {
	if _, _, err := c.ServerTLS(); err != nil {
		return err
	}
	_, err := c.ClientTLS()
	return err
}

// ServerTLS builds the listeners' mode and TLS configuration (nil when
// disabled).
func (c TLSConfig) ServerTLS() (TLSMode, *tls.Config, error) {
	mode, err := ParseTLSMode(c.ServerMode)
	if err != nil {
		return mode, nil, err
	}
	if mode == TLSDisabled {
		// Disabled is the default (RocketMQ's is permissive): certificate
		// keys without a mode would leave the listeners plaintext only.
		if set := c.serverKeysSet(); set != "" {
			return mode, nil, fmt.Errorf("%w: %s is set but tlsServerMode is disabled (the default), so the listeners would serve "+
				"plaintext only: set tlsServerMode=permissive or enforcing, or remove the tlsServer* keys", ErrTLSConfig, set)
		}
		return mode, nil, nil
	}
	if c.ServerCertPath == "" || c.ServerKeyPath == "" {
		return mode, nil, fmt.Errorf("%w: tlsServerMode=%s needs tlsServerCertPath and tlsServerKeyPath", ErrTLSConfig, mode)
	}
	cert, err := tls.LoadX509KeyPair(c.ServerCertPath, c.ServerKeyPath)
	if err != nil {
		return mode, nil, fmt.Errorf("%w: tlsServerCertPath/tlsServerKeyPath: %v", ErrTLSConfig, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	need := strings.ToLower(strings.TrimSpace(c.ServerNeedClientAuth))
	switch need {
	case "", "none":
		cfg.ClientAuth = tls.NoClientCert
		if c.ServerAuthClient {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	case "optional":
		cfg.ClientAuth = tls.RequestClientCert
		if c.ServerAuthClient {
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		}
	case "require":
		cfg.ClientAuth = tls.RequireAnyClientCert
		if c.ServerAuthClient {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	default:
		return mode, nil, fmt.Errorf("%w: tlsServerNeedClientAuth=%q (want none, optional or require)", ErrTLSConfig, c.ServerNeedClientAuth)
	}
	if c.ServerAuthClient {
		if c.ServerTrustCertPath == "" {
			return mode, nil, fmt.Errorf("%w: tlsServerAuthClient=true needs tlsServerTrustCertPath (the CAs client certificates chain to)", ErrTLSConfig)
		}
		pool, err := LoadCertPool(c.ServerTrustCertPath)
		if err != nil {
			return mode, nil, fmt.Errorf("%w: tlsServerTrustCertPath: %v", ErrTLSConfig, err)
		}
		cfg.ClientCAs = pool
	}
	return mode, cfg, nil
}

// ClientTLS builds the outbound TLS configuration: nil unless ClientEnable
// or UseTLS.
func (c TLSConfig) ClientTLS() (*tls.Config, error) {
	if !c.ClientEnable && !c.UseTLS {
		if set := c.clientKeysSet(); set != "" {
			return nil, fmt.Errorf("%w: %s is set but tlsEnable is false, so the outbound links would be plaintext: "+
				"set tlsEnable=true, or remove the tlsClient* keys", ErrTLSConfig, set)
		}
		return nil, nil
	}
	return NewClientTLS(c.ClientTrustCertPath, c.ClientCertPath, c.ClientKeyPath)
}

// serverKeysSet names the first tlsServer* key (other than the mode) that
// asks for something, "" when none does.
func (c TLSConfig) serverKeysSet() string {
	need := strings.ToLower(strings.TrimSpace(c.ServerNeedClientAuth))
	switch {
	case c.ServerCertPath != "":
		return "tlsServerCertPath"
	case c.ServerKeyPath != "":
		return "tlsServerKeyPath"
	case c.ServerTrustCertPath != "":
		return "tlsServerTrustCertPath"
	case c.ServerAuthClient:
		return "tlsServerAuthClient"
	case need != "" && need != "none":
		return "tlsServerNeedClientAuth"
	}
	return ""
}

// clientKeysSet names the first tlsClient* key that is set, "" when none is.
func (c TLSConfig) clientKeysSet() string {
	switch {
	case c.ClientTrustCertPath != "":
		return "tlsClientTrustCertPath"
	case c.ClientCertPath != "":
		return "tlsClientCertPath"
	case c.ClientKeyPath != "":
		return "tlsClientKeyPath"
	}
	return ""
}

// NewClientTLS returns a client TLS configuration. With trustPath the
// server's certificate must chain to one of its CAs; its host name is not
// checked, as RocketMQ's clients do not check it (brokers are reached at
// the IP they register, so a per-address certificate would be needed).
// Without trustPath the server is not verified at all (RocketMQ's test
// mode; the official Go client's WithTls). certPath and keyPath, if given,
// are presented when the server asks for a client certificate.
func NewClientTLS(trustPath, certPath, keyPath string) (*tls.Config, error) {
	// Verification is done by VerifyPeerCertificate below (chain only), so
	// the standard check, which includes the host name, is skipped.
	cfg := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // see above
	if certPath != "" || keyPath != "" {
		cert, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return nil, fmt.Errorf("%w: tlsClientCertPath/tlsClientKeyPath: %v", ErrTLSConfig, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if trustPath != "" {
		pool, err := LoadCertPool(trustPath)
		if err != nil {
			return nil, fmt.Errorf("%w: tlsClientTrustCertPath: %v", ErrTLSConfig, err)
		}
		cfg.VerifyPeerCertificate = VerifyChain(pool, x509.ExtKeyUsageServerAuth)
	}
	return cfg, nil
}

// VerifyChain returns a tls.Config.VerifyPeerCertificate that accepts a
// peer certificate chaining to roots for usage, whatever its host name.
func VerifyChain(roots *x509.CertPool, usage x509.ExtKeyUsage) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("remoting: peer presented no certificate")
		}
		certs := make([]*x509.Certificate, len(raw))
		for i, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return fmt.Errorf("remoting: peer certificate: %w", err)
			}
			certs[i] = c
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
}

// LoadCertPool reads a PEM bundle of CA certificates.
func LoadCertPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// tlsListener wraps ln for the server's TLS mode; on error it closes ln.
func (c ServerConfig) tlsListener(ln net.Listener) (net.Listener, error) {
	switch {
	case c.TLSMode == TLSDisabled:
		return ln, nil
	case c.TLS == nil:
		_ = ln.Close()
		return nil, fmt.Errorf("%w: tlsServerMode=%s without a certificate", ErrTLSConfig, c.TLSMode)
	case c.TLSMode == TLSPermissive:
		return &sniffListener{Listener: ln, cfg: c.TLS}, nil
	default:
		return tls.NewListener(ln, c.TLS), nil
	}
}

// clientTLS runs the TLS handshake on a dialed connection when the client
// is configured for TLS, within ctx and deadline, so a refused handshake
// fails the dial rather than the first call.
func (c ClientConfig) clientTLS(ctx context.Context, nc net.Conn, addr string, deadline time.Time) (net.Conn, error) {
	if c.TLS == nil {
		return nc, nil
	}
	cfg := c.TLS
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host // SNI only: verification is chain-only
		}
	}
	d := time.Now().Add(c.ConnectTimeout)
	if !deadline.IsZero() && deadline.Before(d) {
		d = deadline
	}
	ctx, cancel := context.WithDeadline(ctx, d)
	defer cancel()
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("%w: TLS handshake with %s: %v", ErrConnClosed, addr, err)
	}
	return tc, nil
}

// sniffListener serves TLS and plaintext on one port (TLSPermissive).
type sniffListener struct {
	net.Listener
	cfg *tls.Config
}

// Accept returns at once: the first byte is read by the connection's own
// reader goroutine (sniffConn.Read), never by the accept loop, so a client
// that connects and sends nothing holds up no one else.
func (l *sniffListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: nc, cfg: l.cfg, ready: make(chan struct{}), closed: make(chan struct{})}, nil
}

// tlsRecordHandshake is the first byte of a TLS ClientHello record.
const tlsRecordHandshake = 0x16

// sniffConn decides on its first Read whether the peer speaks TLS. A
// plaintext frame cannot start with 0x16: its first byte is the top byte
// of the frame length, which MaxFrameSize (16 MiB) keeps at 0.
type sniffConn struct {
	net.Conn // the TCP connection; deadlines apply to it in both modes
	cfg      *tls.Config

	once   sync.Once
	ready  chan struct{} // closed once the first byte was read (or failed)
	closed chan struct{}
	cOnce  sync.Once
	c      net.Conn // set before ready closes: tls.Server or the replaying conn
	err    error    // set before ready closes
}

func (s *sniffConn) decide() {
	s.once.Do(func() {
		defer close(s.ready)
		var b [1]byte
		if _, err := io.ReadFull(s.Conn, b[:]); err != nil {
			s.err = err
			return
		}
		pc := &replayConn{Conn: s.Conn, first: b[0], pending: true}
		if b[0] == tlsRecordHandshake {
			s.c = tls.Server(pc, s.cfg)
		} else {
			s.c = pc
		}
	})
}

// Read implements net.Conn.
func (s *sniffConn) Read(p []byte) (int, error) {
	s.decide()
	if s.err != nil {
		return 0, s.err
	}
	return s.c.Read(p)
}

// Write implements net.Conn. The server writes only answers, after the
// first Read; a write racing a close returns net.ErrClosed.
func (s *sniffConn) Write(p []byte) (int, error) {
	select {
	case <-s.ready:
	case <-s.closed:
		return 0, net.ErrClosed
	}
	if s.err != nil {
		return 0, s.err
	}
	return s.c.Write(p)
}

// Close implements net.Conn.
func (s *sniffConn) Close() error {
	s.cOnce.Do(func() { close(s.closed) })
	select {
	case <-s.ready:
		if s.c != nil {
			return s.c.Close()
		}
	default:
	}
	return s.Conn.Close()
}

// replayConn returns the sniffed first byte before the rest of the stream.
type replayConn struct {
	net.Conn
	first   byte
	pending bool // only the reader goroutine touches it
}

func (r *replayConn) Read(p []byte) (int, error) {
	if r.pending && len(p) > 0 {
		p[0] = r.first
		r.pending = false
		return 1, nil
	}
	return r.Conn.Read(p)
}
