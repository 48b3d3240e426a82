package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/internal/logging"
)

// addLogFlags registers --log-format and --log-file next to --log-level.
// Given on the command line they override the config file's logFormat and
// logFile (and --log-level its logLevel).
func addLogFlags(root *cobra.Command, g *globalFlags) {
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "json", "log line format: json or text (overrides logFormat)")
	root.PersistentFlags().StringVar(&g.logFile, "log-file", "",
		"log to this file instead of stderr, rotated by size and reopened on SIGHUP (overrides logFile)")
}

// openLog opens the process logger from c, with the log flags that were
// given on the command line taking precedence, and reopens a log file on
// SIGHUP. The caller closes it.
func (g *globalFlags) openLog(cmd *cobra.Command, c logging.Config) (*logging.Logger, error) {
	fl := cmd.Flags()
	if fl.Changed("log-level") {
		c.Level = g.logLevel
	}
	if fl.Changed("log-format") {
		c.Format = g.logFormat
	}
	if fl.Changed("log-file") {
		c.File = g.logFile
	}
	l, err := logging.Open(c)
	if err != nil {
		return nil, err
	}
	l.ReopenOnSIGHUP()
	return l, nil
}

// startServer is what `raftmq namesrv` and `raftmq broker` do with their
// loaded config cfg (its load report rep and every problem found, cerr):
// with -p print it and return cerr; else fail on cerr, open the logger
// from logCfg and warn once about the RocketMQ keys that were ignored (on
// stderr while there is no logger yet). A nil logger with a nil error
// means done (-p).
func (g *globalFlags) startServer(cmd *cobra.Command, cfg any, logCfg logging.Config, rep config.Report, cerr error, printOnly bool) (*logging.Logger, error) {
	warnStderr := func() {
		if w := rep.Warning(); w != "" {
			fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
		}
	}
	if printOnly {
		if err := config.Print(cmd.OutOrStdout(), cfg); err != nil {
			return nil, err
		}
		warnStderr()
		return nil, refused(cerr)
	}
	if cerr != nil {
		warnStderr()
		return nil, refused(cerr)
	}
	log, err := g.openLog(cmd, logCfg)
	if err != nil {
		return nil, err
	}
	if w := rep.Warning(); w != "" {
		log.Warn(w)
	}
	return log, nil
}
