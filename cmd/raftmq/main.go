// Command raftmq is the single raftmq binary: name server, broker node, local
// dev cluster, admin CLI and load generator, as cobra subcommands.
//
// Each subcommand only turns flags into a config, builds the component with
// New and runs it with a context that SIGINT/SIGTERM cancel. Library code
// never exits the process; main is the only place that sets the exit code.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/logging"
)

// globalFlags are shared by every subcommand.
type globalFlags struct {
	logLevel string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "raftmq:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "raftmq",
		Short:         "RocketMQ-compatible message broker whose broker groups are Raft groups",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.AddCommand(newNamesrvCmd(g))
	root.AddCommand(newBrokerCmd(g))
	root.AddCommand(newDevCmd(g))
	root.AddCommand(newBenchCmd(g))
	root.AddCommand(newAdminCmd(g))
	root.AddCommand(newFailoverCmd(g))
	return root
}

// logger builds the process logger from the global flags.
func (g *globalFlags) logger() (*zap.Logger, error) {
	return logging.New(g.logLevel)
}
