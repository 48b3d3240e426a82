package main

import (
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
			"(listenPort, kvConfigPath, scanNotActiveBrokerInterval, ...); unknown keys are an error. " +
			"Runs until SIGINT or SIGTERM.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := namesrvConfig(confPath, listen)
			if err != nil {
				return err
			}
			if printOnly {
				if err := config.Print(cmd.OutOrStdout(), &cfg); err != nil {
					return err
				}
				return cfg.Validate()
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			n, err := namesrv.New(cfg, log)
			if err != nil {
				return err
			}
			return n.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&confPath, "config", "c", "", "name server config file (Java properties, e.g. namesrv.conf)")
	cmd.Flags().BoolVarP(&printOnly, "print", "p", false, "print the effective config and exit")
	cmd.Flags().StringVar(&listen, "listen", "", "listen address host:port, overriding listenAddr and listenPort")
	return cmd
}

// namesrvConfig layers defaults, the config file and the --listen flag.
func namesrvConfig(confPath, listen string) (namesrv.Config, error) {
	cfg := namesrv.DefaultConfig()
	if confPath != "" {
		if err := config.LoadFile(confPath, &cfg); err != nil {
			return cfg, err
		}
	}
	if listen != "" {
		host, port, err := net.SplitHostPort(listen)
		if err != nil {
			return cfg, fmt.Errorf("--listen %q: want host:port: %w", listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return cfg, fmt.Errorf("--listen %q: port is not a number", listen)
		}
		if host == "" {
			host = "0.0.0.0"
		}
		cfg.ListenAddr, cfg.ListenPort = host, p
	}
	return cfg, nil
}
