package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/namesrv"
)

// newNamesrvCmd is `raftmq namesrv`: flags → config → namesrv.New → Run.
func newNamesrvCmd(g *globalFlags) *cobra.Command {
	var (
		confPath  string
		listen    string
		printOnly bool
	)
	cmd := &cobra.Command{
		Use:   "namesrv",
		Short: "Run a name server (RocketMQ NameServer protocol, default port 9876)",
		Long: "Run a name server. Keys in the -c file are RocketMQ's NamesrvConfig/NettyServerConfig keys " +
			"(listenPort, kvConfigPath, scanNotActiveBrokerInterval, ...) and the log keys (logFormat, logFile, ...); " +
			"RocketMQ keys it does not use load with one warning saying why, an unknown key is an error naming the " +
			"closest known one, and every bad key or setting is reported in one run. " +
			"Runs until SIGINT or SIGTERM.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			cfg, rep, cerr := namesrvConfig(confPath, listen)
			log, err := g.startServer(cmd, &cfg, cfg.Log, rep, cerr, printOnly)
			if log == nil {
				return err
			}
			defer func() { err = errors.Join(err, log.Close()) }()
			n, err := namesrv.New(cfg, log.Logger)
			if err != nil {
				return err
			}
			con, err := mountConsole(n, cfg.ConsoleConfig, cfg.TLS, log.Logger)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, con.Close()) }()
			return n.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&confPath, "config", "c", "", "name server config file (Java properties, e.g. namesrv.conf)")
	cmd.Flags().BoolVarP(&printOnly, "print", "p", false, "print the effective config and exit")
	cmd.Flags().StringVar(&listen, "listen", "", "listen address host:port, overriding listenAddr and listenPort")
	return cmd
}

// namesrvConfig layers defaults, the config file and the --listen flag,
// and validates the result. The error lists every bad key and setting
// (config.Explain); the report holds the ignored RocketMQ keys to warn of.
func namesrvConfig(confPath, listen string) (namesrv.Config, config.Report, error) {
	cfg := namesrv.DefaultConfig()
	var rep config.Report
	var errs []error
	if confPath != "" {
		var err error
		rep, err = config.Load(confPath, &cfg)
		errs = append(errs, err)
	}
	if listen != "" {
		host, port, err := net.SplitHostPort(listen)
		p, perr := strconv.Atoi(port)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--listen %q: want host:port: %w", listen, err))
		case perr != nil:
			errs = append(errs, fmt.Errorf("--listen %q: port is not a number", listen))
		default:
			if host == "" {
				host = "0.0.0.0"
			}
			cfg.ListenAddr, cfg.ListenPort = host, p
		}
	}
	errs = append(errs, cfg.Validate())
	source := confPath
	if source == "" {
		source = "name server config"
	}
	return cfg, rep, config.Explain(source, errors.Join(errs...))
}
