package main

import (
	"crypto/tls"
	"errors"

	"github.com/spf13/pflag"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
)

// tlsFlags are the client-side TLS flags of admin and bench, the
// command-line form of RocketMQ's tls.enable and tls.client.trustCertPath.
type tlsFlags struct {
	enable bool
	trust  string
}

func (f *tlsFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.enable, "tls", false, "connect with TLS (servers in tlsServerMode=permissive or enforcing)")
	fs.StringVar(&f.trust, "tls-trust-cert", "", "PEM CA bundle the servers' certificates must chain to; "+
		"without it the servers are not verified (RocketMQ's test mode); implies --tls")
}

func (f *tlsFlags) on() bool { return f.enable || f.trust != "" }

// plaintextHint names --tls when a plaintext connection was closed at its
// first bytes: a server in tlsServerMode=enforcing does that, and it is
// running, so "check that it is running" alone would mislead.
func (f *tlsFlags) plaintextHint(err error) string {
	if f.on() || !errors.Is(err, remoting.ErrConnClosed) {
		return ""
	}
	return " (or, if it runs with tlsServerMode=enforcing, add --tls)"
}

// clientOpt is the SDK option (nil when TLS is off; the SDK skips nil).
func (f *tlsFlags) clientOpt() client.Opt {
	if !f.on() {
		return nil
	}
	return client.WithTLS(f.trust)
}

// remoting is the configuration of raw remoting clients (nil when off).
func (f *tlsFlags) remoting() (*tls.Config, error) {
	if !f.on() {
		return nil, nil
	}
	return remoting.NewClientTLS(f.trust, "", "")
}
