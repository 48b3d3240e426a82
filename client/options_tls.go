package client

import (
	"crypto/tls"
	"fmt"

	"github.com/raftmq/raftmq/remoting"
)

// tlsOption is the TLS setting of every connection a client opens (to name
// servers and brokers alike, its inner producers' too, as RocketMQ's
// clients do).
type tlsOption struct {
	cfg *tls.Config // nil: plaintext
	err error       // reported by the constructor
}

// WithTLS makes every connection use TLS, like RocketMQ's tls.enable and
// the official Go client's WithTls(true). With trustCertPath (a PEM bundle
// of CA certificates) a server's certificate must chain to one of them;
// its host name is not checked, as brokers are reached at the IP they
// register. An empty trustCertPath does not verify the server at all
// (RocketMQ's test mode): the link is encrypted but not authenticated.
// A file that does not load fails the constructor.
func WithTLS(trustCertPath string) Opt {
	return commonOpt(func(c *commonConfig) {
		cfg, err := remoting.NewClientTLS(trustCertPath, "", "")
		if err != nil {
			err = fmt.Errorf("%w: WithTLS: %v", ErrInvalidOption, err)
		}
		c.tls = tlsOption{cfg: cfg, err: err}
	})
}

// WithTLSConfig makes every connection use TLS with cfg as given (client
// certificates, custom verification); nil turns TLS off.
func WithTLSConfig(cfg *tls.Config) Opt {
	return commonOpt(func(c *commonConfig) { c.tls = tlsOption{cfg: cfg} })
}
