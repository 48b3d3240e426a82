package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/internal/config"
)

// newBrokerCmd is `raftmq broker -c broker.conf`: one member of a Raft
// broker group plus its request processors.
func newBrokerCmd(g *globalFlags) *cobra.Command {
	var (
		confPath  string
		printOnly bool
	)
	cmd := &cobra.Command{
		Use:   "broker",
		Short: "Run a broker node: one member of a Raft broker group (RocketMQ broker protocol, default port 10911)",
		Long: "Run a broker node. Keys in the -c file are RocketMQ's broker.conf keys (brokerClusterName, brokerName, " +
			"namesrvAddr, listenPort, brokerIP1, autoCreateTopicEnable, ...), the store keys (storePathRootDir, " +
			"mappedFileSizeCommitLog, flushDiskType, ...) and DLedger's (dLegerGroup, dLegerPeers, dLegerSelfId, " +
			"preferredLeaderId). RocketMQ keys raftmq does not use (brokerRole, haListenPort, ...) load with one warning " +
			"saying why; an unknown key is an error naming the closest known one, and every bad key or setting is " +
			"reported in one run (docs/config.md). Logs go to logFile or stderr (SIGHUP reopens the file). " +
			"Runs until SIGINT or SIGTERM.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			cfg := broker.DefaultConfig()
			var rep config.Report
			var errs []error
			if confPath != "" {
				var lerr error
				rep, lerr = config.Load(confPath, &cfg)
				errs = append(errs, lerr)
			}
			errs = append(errs, cfg.Derive(), cfg.Validate())
			source := confPath
			if source == "" {
				source = "broker config"
			}
			cerr := config.Explain(source, errors.Join(errs...))
			log, err := g.startServer(cmd, &cfg, cfg.Log, rep, cerr, printOnly)
			if log == nil {
				return err
			}
			defer func() { err = errors.Join(err, log.Close()) }()
			node, err := broker.OpenNode(cfg, log.Logger)
			if err != nil {
				return err
			}
			return node.Run(cmd.Context())
		},
	}
	cmd.Flags().StringVarP(&confPath, "config", "c", "", "broker config file (Java properties, e.g. broker.conf)")
	cmd.Flags().BoolVarP(&printOnly, "print", "p", false, "print the effective config and exit")
	return cmd
}
