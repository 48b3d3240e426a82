package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/wire"
)

// devFlags configure `raftmq dev`.
type devFlags struct {
	dir         string
	basePort    int
	namesrvPort int
}

// newDevCmd is `raftmq dev`: a name server and one 3-node Raft group
// (broker-a of DefaultCluster) in one process on loopback.
func newDevCmd(g *globalFlags) *cobra.Command {
	f := &devFlags{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local cluster: one name server and a 3-node broker group on 127.0.0.1",
		Long: "Run a name server on 127.0.0.1:9876 and a 3-node Raft broker group broker-a (cluster DefaultCluster) " +
			"with brokers on 10911, 10921 and 10931 (Raft on 40911/40921/40931) and autoCreateTopicEnable on. " +
			"Data lives under --dir with small segments. Prints one ready line once a leader is registered; " +
			"Ctrl-C stops everything cleanly.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			return runDev(cmd.Context(), f, log, func(s string) { fmt.Fprintln(cmd.OutOrStdout(), s) })
		},
	}
	cmd.Flags().StringVar(&f.dir, "dir", "raftmq-dev", "data directory (created if missing)")
	cmd.Flags().IntVar(&f.basePort, "base-port", 10911, "listenPort of the first broker; the others use +10 and +20, Raft uses +30000")
	cmd.Flags().IntVar(&f.namesrvPort, "namesrv-port", 9876, "name server port")
	return cmd
}

// devBrokerConfigs builds the three members' configs.
func devBrokerConfigs(f *devFlags, nsAddr string) ([]broker.BrokerConfig, error) {
	var peers []string
	for i := 0; i < 3; i++ {
		peers = append(peers, fmt.Sprintf("n%d-127.0.0.1:%d", i, f.basePort+30000+10*i))
	}
	var out []broker.BrokerConfig
	for i := 0; i < 3; i++ {
		cfg := broker.DefaultConfig()
		cfg.BrokerClusterName, cfg.BrokerName = "DefaultCluster", "broker-a"
		cfg.ListenAddr, cfg.BrokerIP1, cfg.ListenPort = "127.0.0.1", "127.0.0.1", f.basePort+10*i
		cfg.NamesrvAddr = nsAddr
		cfg.AutoCreateTopicEnable = true
		cfg.Store.StorePathRootDir = filepath.Join(f.dir, fmt.Sprintf("n%d", i))
		cfg.Store.MappedFileSizeCommitLog = 64 << 20
		cfg.Store.MappedFileSizeConsumeQueue = 100_000 * store.CQUnitSize
		cfg.Store.MaxHashSlotNum, cfg.Store.MaxIndexNum = 100_000, 400_000
		cfg.Raft.DLegerPeers = strings.Join(peers, ";")
		cfg.Raft.DLegerSelfID = fmt.Sprintf("n%d", i)
		if err := cfg.Derive(); err != nil {
			return nil, err
		}
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		out = append(out, cfg)
	}
	return out, nil
}

// runDev runs the dev cluster until ctx is done. ready is told the
// addresses once a leader is registered with the name server.
func runDev(ctx context.Context, f *devFlags, log *zap.Logger, ready func(string)) (err error) {
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return fmt.Errorf("dev: data directory: %w", err)
	}
	nsCfg := namesrv.DefaultConfig()
	nsCfg.ListenAddr, nsCfg.ListenPort = "127.0.0.1", f.namesrvPort
	nsCfg.KVConfigPath = filepath.Join(f.dir, "namesrv", "kvConfig.json")
	// Gossip on: the name server hears of a dead broker node within a second
	// (the brokers join it on namesrv port+2 by default).
	nsCfg.GossipEnable = true
	ns, err := namesrv.New(nsCfg, log.Named("namesrv"))
	if err != nil {
		return err
	}
	if err := ns.Start(); err != nil {
		return err
	}
	nsAddr := nsCfg.Addr()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = errors.Join(err, ns.Shutdown(sctx))
	}()
	cfgs, err := devBrokerConfigs(f, nsAddr)
	if err != nil {
		return err
	}
	var groups []*broker.Group
	var ctls []*broker.Controller
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, c := range ctls {
			err = errors.Join(err, c.Shutdown(sctx))
		}
		for _, g := range groups {
			err = errors.Join(err, g.Close())
		}
	}()
	for _, cfg := range cfgs {
		nlog := log.Named(cfg.Raft.DLegerSelfID)
		g, err := broker.NewGroup(cfg.GroupConfig, cfg.RemotingAddr(), nlog)
		if err != nil {
			return err
		}
		groups = append(groups, g)
		c, err := broker.New(cfg, g, nlog)
		if err != nil {
			return err
		}
		if err := c.Start(); err != nil {
			return err
		}
		ctls = append(ctls, c)
	}
	// Ready once the name server routes brokerId 0 of broker-a.
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		bd, ok := ns.Routes().ClusterInfo().BrokerAddrTable["broker-a"]
		if ok && bd.BrokerAddrs[wire.MasterID] != "" {
			ready(fmt.Sprintf("raftmq dev ready: namesrv %s, broker-a leader %s, members %s, %s, %s, data %s — try: raftmq bench produce -n %s -t TestTopic -m 1000",
				nsAddr, bd.BrokerAddrs[wire.MasterID], ctls[0].Addr(), ctls[1].Addr(), ctls[2].Addr(), f.dir, nsAddr))
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
	<-ctx.Done()
	log.Info("dev cluster stopping")
	return nil
}
