package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/internal/logging"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
)

// devFlags configure `raftmq dev`.
type devFlags struct {
	dir         string
	basePort    int
	namesrvPort int
	// consoleAK and consoleSK are the web console's admin account.
	consoleAK, consoleSK string
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
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			log, err := g.openLog(cmd, logging.DefaultConfig())
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, log.Close()) }()
			return runDev(cmd.Context(), f, log.Logger, func(s string) { fmt.Fprintln(cmd.OutOrStdout(), s) })
		},
	}
	cmd.Flags().StringVar(&f.dir, "dir", "raftmq-dev", "data directory (created if missing)")
	cmd.Flags().IntVar(&f.basePort, "base-port", 10911, "listenPort of the first broker; the others use +10 and +20, Raft uses +30000")
	cmd.Flags().IntVar(&f.namesrvPort, "namesrv-port", 9876, "name server port")
	cmd.Flags().StringVar(&f.consoleAK, "console-access-key", "", "web console admin accessKey (with --console-secret-key; unset: the console is read-only)")
	cmd.Flags().StringVar(&f.consoleSK, "console-secret-key", "", "web console admin secretKey")
	return cmd
}

// devOptions shapes the cluster: fixed loopback ports from the flags, VIP
// channels on, segments and index files smaller than a production broker's.
func devOptions(f *devFlags, log *zap.Logger) devcluster.Options {
	return devcluster.Options{
		Dir:         f.dir,
		NamesrvPort: f.namesrvPort,
		// Gossip on: the name server hears of a dead broker node within a
		// second (the brokers join it on namesrv port+2 by default).
		NamesrvGossip: true,
		Ports: func(_, m int) (int, int) {
			return f.basePort + 10*m, f.basePort + 30000 + 10*m
		},
		VIPChannel:          true,
		SegmentBytes:        64 << 20,
		ConsumeQueueEntries: 100_000,
		IndexSlots:          100_000,
		IndexEntries:        400_000,
		Logger:              log,
	}
}

// runDev runs the dev cluster until ctx is done. ready is told the
// addresses once a leader is registered with the name server.
func runDev(ctx context.Context, f *devFlags, log *zap.Logger, ready func(string)) (err error) {
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return fmt.Errorf("dev: data directory: %w", err)
	}
	c, err := devcluster.Start(devOptions(f, log))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Close()) }()
	con, err := mountConsole(c.Namesrv(), namesrv.ConsoleConfig{ConsoleEnable: true, ConsoleAccessKey: f.consoleAK, ConsoleSecretKey: f.consoleSK}, remoting.TLSConfig{}, log)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, con.Close()) }()
	if c.WaitReady(ctx) != nil {
		return nil // stopped before a leader was routed
	}
	ms := c.Members(0)
	ready(fmt.Sprintf("raftmq dev ready: namesrv %s, broker-a leader %s, members %s, %s, %s, data %s, console http://%s/console/ — try: raftmq bench produce -n %s -t TestTopic -m 1000",
		c.NamesrvAddr(), c.RoutedLeader(0), ms[0].Addr(), ms[1].Addr(), ms[2].Addr(), f.dir, c.Namesrv().MetricsAddr(), c.NamesrvAddr()))
	<-ctx.Done()
	log.Info("dev cluster stopping")
	return nil
}
