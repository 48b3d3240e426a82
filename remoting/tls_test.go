package remoting

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// tlsServer starts an echo server in mode with a certificate from ca.
func tlsServer(t *testing.T, mode TLSMode, ca *testutil.TestCA, cfgs ...func(*TLSConfig)) *Server {
	t.Helper()
	files := ca.Issue("server")
	tc := TLSConfig{ServerMode: mode.String(), ServerCertPath: files.CertPath, ServerKeyPath: files.KeyPath}
	for _, f := range cfgs {
		f(&tc)
	}
	m, cfg, err := tc.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, ServerConfig{TLSMode: m, TLS: cfg}, nil, func(s *Server) { s.Register(1, echo, 1, 8) })
}

func call(c *Client, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := c.InvokeSync(ctx, addr, NewRequest(1, nil, nil))
	if err == nil && resp.Code != ResponseSuccess {
		err = errors.New(resp.Remark)
	}
	return err
}

func clientTLS(t *testing.T, trust string) *tls.Config {
	t.Helper()
	cfg, err := NewClientTLS(trust, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestTLSEnforcingRefusesPlaintext(t *testing.T) {
	ca := testutil.NewTestCA(t, "rmq")
	s := tlsServer(t, TLSEnforcing, ca)
	addr := s.Addr().String()

	for name, cfg := range map[string]*tls.Config{
		"verified":  clientTLS(t, ca.CertPath),
		"test mode": clientTLS(t, ""), // no trust path: the official client's behaviour
	} {
		if err := call(newTestClient(t, ClientConfig{TLS: cfg}), addr); err != nil {
			t.Fatalf("%s TLS client against enforcing: %v", name, err)
		}
	}
	if err := call(newTestClient(t, ClientConfig{}), addr); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("plaintext client against enforcing: got %v, want ErrConnClosed", err)
	}
	// A server certificate from another CA fails verification.
	other := testutil.NewTestCA(t, "other")
	if err := call(newTestClient(t, ClientConfig{TLS: clientTLS(t, other.CertPath)}), addr); !errors.Is(err, ErrConnClosed) {
		t.Fatalf("client trusting another CA: got %v, want a failed handshake", err)
	}
}

func TestTLSPermissiveServesBoth(t *testing.T) {
	ca := testutil.NewTestCA(t, "rmq")
	s := tlsServer(t, TLSPermissive, ca)
	addr := s.Addr().String()
	if err := call(newTestClient(t, ClientConfig{TLS: clientTLS(t, ca.CertPath)}), addr); err != nil {
		t.Fatalf("TLS client against permissive: %v", err)
	}
	if err := call(newTestClient(t, ClientConfig{}), addr); err != nil {
		t.Fatalf("plaintext client against permissive: %v", err)
	}
	// A connection that sends nothing does not hold up the next one.
	idle := dialRaw(t, addr)
	defer idle.nc.Close()
	if err := call(newTestClient(t, ClientConfig{}), addr); err != nil {
		t.Fatalf("plaintext client after an idle connection: %v", err)
	}
}

func TestTLSDisabledRefusesTLS(t *testing.T) {
	s := startServer(t, ServerConfig{}, nil, func(s *Server) { s.Register(1, echo, 1, 8) })
	if err := call(newTestClient(t, ClientConfig{TLS: clientTLS(t, ""), ConnectTimeout: time.Second}), s.Addr().String()); err == nil {
		t.Fatal("TLS client against a plaintext server succeeded")
	}
}

func TestTLSServerAuthClient(t *testing.T) {
	ca := testutil.NewTestCA(t, "rmq")
	s := tlsServer(t, TLSEnforcing, ca, func(c *TLSConfig) {
		c.ServerAuthClient = true
		c.ServerTrustCertPath = ca.CertPath
	})
	addr := s.Addr().String()
	if err := call(newTestClient(t, ClientConfig{TLS: clientTLS(t, ca.CertPath)}), addr); err == nil {
		t.Fatal("client without a certificate accepted by tlsServerAuthClient=true")
	}
	files := ca.Issue("client")
	cfg, err := TLSConfig{ClientEnable: true, ClientTrustCertPath: ca.CertPath,
		ClientCertPath: files.CertPath, ClientKeyPath: files.KeyPath}.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	if err := call(newTestClient(t, ClientConfig{TLS: cfg}), addr); err != nil {
		t.Fatalf("client with a CA-signed certificate: %v", err)
	}
	// A certificate from another CA is refused.
	bad := testutil.NewTestCA(t, "other").Issue("client")
	cfg, err = NewClientTLS("", bad.CertPath, bad.KeyPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := call(newTestClient(t, ClientConfig{TLS: cfg}), addr); err == nil {
		t.Fatal("client certificate from another CA accepted")
	}
}

func TestTLSConfigErrors(t *testing.T) {
	ca := testutil.NewTestCA(t, "rmq")
	files := ca.Issue("server")
	for _, c := range []TLSConfig{
		{ServerMode: "strict"},
		{ServerMode: "enforcing"},
		{ServerMode: "permissive", ServerCertPath: files.CertPath, ServerKeyPath: files.CertPath},
		{ServerMode: "enforcing", ServerCertPath: files.CertPath, ServerKeyPath: files.KeyPath, ServerAuthClient: true},
		{ServerMode: "enforcing", ServerCertPath: files.CertPath, ServerKeyPath: files.KeyPath, ServerNeedClientAuth: "maybe"},
		{ClientEnable: true, ClientTrustCertPath: files.KeyPath},
		// Keys that ask for TLS while the switch is off, which would
		// leave the connections plaintext.
		{ServerCertPath: files.CertPath, ServerKeyPath: files.KeyPath},
		{ServerMode: "disabled", ServerCertPath: files.CertPath, ServerKeyPath: files.KeyPath},
		{ServerAuthClient: true, ServerTrustCertPath: ca.CertPath},
		{ServerNeedClientAuth: "require"},
		{ClientTrustCertPath: ca.CertPath},
		{ClientCertPath: files.CertPath, ClientKeyPath: files.KeyPath},
	} {
		if err := c.Validate(); !errors.Is(err, ErrTLSConfig) {
			t.Errorf("%+v: got %v, want ErrTLSConfig", c, err)
		}
	}
	if err := (TLSConfig{ServerMode: "Enforcing", ServerCertPath: files.CertPath, ServerKeyPath: files.KeyPath}).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (TLSConfig{ServerMode: "disabled", ServerNeedClientAuth: "none"}).Validate(); err != nil {
		t.Fatalf("tlsServerNeedClientAuth=none with TLS off: %v", err)
	}
	// RocketMQ's useTLS key is the same switch as tlsEnable.
	if cfg, err := (TLSConfig{UseTLS: true}).ClientTLS(); err != nil || cfg == nil {
		t.Fatalf("useTLS=true: %v, %v", cfg, err)
	}
	if err := NewServer(ServerConfig{TLSMode: TLSEnforcing}, nil).Start(); !errors.Is(err, ErrTLSConfig) {
		t.Fatalf("enforcing without a certificate started: %v", err)
	}
}

// FuzzParseTLSMode: any string parses to a mode or ErrTLSConfig, and a
// parsed mode's name parses back to itself.
func FuzzParseTLSMode(f *testing.F) {
	for _, s := range []string{"", "disabled", "permissive", "ENFORCING", " enforcing ", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseTLSMode(s)
		if err != nil {
			if !errors.Is(err, ErrTLSConfig) {
				t.Fatal(err)
			}
			return
		}
		if back, err := ParseTLSMode(m.String()); err != nil || back != m {
			t.Fatalf("%q → %v → %v, %v", s, m, back, err)
		}
	})
}

// memConn is a connection whose peer sent exactly in and discards what is
// written back.
type memConn struct {
	net.Conn // nil: only the methods below are used
	r        *bytes.Reader
}

func (c *memConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *memConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c *memConn) Close() error                     { return nil }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }
func (c *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }

// FuzzPermissiveSniff: whatever a client sends first, the permissive
// listener's connection either replays it byte for byte as plaintext (any
// first byte but 0x16) or hands it to TLS, which yields nothing without a
// handshake.
func FuzzPermissiveSniff(f *testing.F) {
	frame, _ := EncodeFrame(NewRequest(1, nil, []byte("x")))
	for _, s := range [][]byte{frame, {0x16, 3, 1, 0, 5, 1, 0, 0, 1, 0}, {0x16}, {0}, {0x17, 0x16}} {
		f.Add(s)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12} // no certificate: every handshake fails
	f.Fuzz(func(t *testing.T, in []byte) {
		sc := &sniffConn{Conn: &memConn{r: bytes.NewReader(in)}, cfg: cfg, ready: make(chan struct{}), closed: make(chan struct{})}
		got, err := io.ReadAll(sc)
		switch {
		case len(in) == 0:
			if len(got) != 0 {
				t.Fatalf("read %d bytes from nothing", len(got))
			}
		case in[0] != tlsRecordHandshake:
			if err != nil || !bytes.Equal(got, in) {
				t.Fatalf("plaintext not replayed: %q, %v", got, err)
			}
		default: // no handshake can succeed, so no byte may come through
			if len(got) != 0 {
				t.Fatalf("TLS without a certificate read %q (%v)", got, err)
			}
		}
		_ = sc.Close()
	})
}
