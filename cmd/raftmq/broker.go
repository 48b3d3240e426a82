package main

import (
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
			"preferredLeaderId); unknown keys are an error. Runs until SIGINT or SIGTERM.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := broker.DefaultConfig()
			if confPath != "" {
				if err := config.LoadFile(confPath, &cfg); err != nil {
					return err
				}
			}
			if err := cfg.Derive(); err != nil {
				return err
			}
			if printOnly {
				if err := config.Print(cmd.OutOrStdout(), &cfg); err != nil {
					return err
				}
				return cfg.Validate()
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			node, err := broker.OpenNode(cfg, log)
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
