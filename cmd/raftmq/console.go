package main

import (
	"errors"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/console"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
)

// mountConsole serves the web console on n's monitoring port unless
// consoleEnable=false. A name server without that port runs without the
// console, with a warning. The console's own connections (to brokers and
// to this name server) use the name server's client TLS keys (tlsEnable,
// tlsClient*). The nil Console it may return closes as a no-op.
func mountConsole(n *namesrv.NameServer, cfg namesrv.ConsoleConfig, tlsKeys remoting.TLSConfig, log *zap.Logger) (*console.Console, error) {
	if !cfg.ConsoleEnable {
		return nil, nil
	}
	opts := console.Options{AccessKey: cfg.ConsoleAccessKey, SecretKey: cfg.ConsoleSecretKey, Logger: log.Named("console"),
		AllowedHosts: cfg.AllowedHosts()}
	tc, err := tlsKeys.ClientTLS()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts.ClientOptions = append(opts.ClientOptions, client.WithTLSConfig(tc))
	}
	c, err := console.New(n, opts)
	if err != nil {
		return nil, err
	}
	if err := c.Mount(); errors.Is(err, console.ErrNoHTTP) {
		log.Warn("web console off: the name server has no HTTP port (metricsPort=-1)")
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if cfg.ConsoleAccessKey == "" {
		log.Info("web console: read-only (no consoleAccessKey/consoleSecretKey; leadership actions are refused)")
	}
	return c, nil
}
