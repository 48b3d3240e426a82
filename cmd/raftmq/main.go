package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/internal/logging"
	"github.com/raftmq/raftmq/raftlog"
)

// globalFlags are shared by every subcommand.
type globalFlags struct {
	logLevel  string
	logFormat string
	logFile   string
	gcPercent int
}

// defaultGCPercent is the GOGC the raftmq process runs with unless GOGC or
// --gc-percent says otherwise. A broker's live heap is small (message bytes
// live in mmap'd files, off the Go heap) but it allocates per request, so
// Go's default of 100 runs a collection every few MB of traffic; 400 trades
// a few more MB of heap for ~4x fewer collections (evidence in
// docs/adr/0006-gogc-400.md). Like a JVM broker's
// -Xmx, it is a deployment knob.
const defaultGCPercent = 400

// gcPercent is the GOGC value the process should set: the flag when given,
// else none when the GOGC environment variable is set (the runtime already
// applied it), else defaultGCPercent.
func gcPercent(flagSet bool, flag int, env string) (int, bool) {
	switch {
	case flagSet:
		return flag, true
	case env != "":
		return 0, false
	default:
		return defaultGCPercent, true
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "raftmq:", err)
		os.Exit(exitCode(err))
	}
}

// exitRefused is the exit status of a server that refuses to start, or
// stops, for a reason a restart does not change: a bad configuration, a
// member removed from its group, a damaged log (sysexits.h EX_CONFIG). A
// supervisor told not to restart on it (deploy's systemd unit:
// RestartPreventExitStatus) leaves the process down for the operator
// instead of starting it again every few seconds.
const exitRefused = 78

// refusedError marks an error whose cause a restart does not change.
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// refused marks err (nil stays nil) as one a restart does not change.
func refused(err error) error {
	if err == nil {
		return nil
	}
	return &refusedError{err: err}
}

// exitCode is the process's exit status for err: exitRefused for a
// refusal a restart does not change, else 1.
func exitCode(err error) int {
	var r *refusedError
	if errors.As(err, &r) || errors.Is(err, broker.ErrRemovedMember) || errors.Is(err, raftlog.ErrDamagedLog) {
		return exitRefused
	}
	return 1
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
	addLogFlags(root, g)
	root.PersistentFlags().IntVar(&g.gcPercent, "gc-percent", defaultGCPercent,
		"Go GC target percentage (GOGC) for this process; a negative value turns the GC off. Default: the GOGC environment variable if set, else 400")
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		if p, ok := gcPercent(cmd.Flags().Changed("gc-percent"), g.gcPercent, os.Getenv("GOGC")); ok {
			debug.SetGCPercent(p)
		}
	}
	root.AddCommand(newNamesrvCmd(g))
	root.AddCommand(newBrokerCmd(g))
	root.AddCommand(newDevCmd(g))
	root.AddCommand(newBenchCmd(g))
	root.AddCommand(newAdminCmd(g))
	root.AddCommand(newFailoverCmd(g))
	root.AddCommand(newVersionCmd())
	return root
}

// logger builds the logger of the short-lived commands (admin, bench,
// failover) from the global flags: the level, and the format and file
// when given.
func (g *globalFlags) logger() (*zap.Logger, error) {
	c := logging.DefaultConfig()
	c.Level, c.Format, c.File = g.logLevel, g.logFormat, g.logFile
	l, err := logging.Open(c)
	if err != nil {
		return nil, err
	}
	return l.Logger, nil
}
