package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
)

// adminFlags are shared by every `raftmq admin` command.
type adminFlags struct {
	g       *globalFlags
	namesrv string
	json    bool
	timeout time.Duration
}

// newAdminCmd is `raftmq admin`: mqadmin's command names and flags
// (RocketMQ's tools/command/*SubCommand) plus the Raft commands. Every
// command needs -n; output is a table unless --json is given.
func newAdminCmd(g *globalFlags) *cobra.Command {
	f := &adminFlags{g: g}
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "mqadmin-style administration: topics, groups, messages, offsets, broker config, Raft leadership",
		Long: "Administration commands named and flagged like RocketMQ's mqadmin (updateTopic, topicList, clusterList, " +
			"consumerProgress, ...) plus raftmq's raftStatus, leadershipTransfer and balanceLeaders. Every command takes " +
			"-n NAMESRV (host:port, several separated by ';'). Output is a table; --json prints JSON for scripts.",
	}
	cmd.PersistentFlags().StringVarP(&f.namesrv, "namesrvAddr", "n", "", "name server address(es), host:port[;host:port] (required)")
	cmd.PersistentFlags().BoolVar(&f.json, "json", false, "print JSON instead of a table")
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", 5*time.Second, "timeout of each request")
	cmd.AddCommand(
		newUpdateTopicCmd(f), newDeleteTopicCmd(f), newTopicListCmd(f), newTopicRouteCmd(f), newTopicStatusCmd(f),
		newClusterListCmd(f), newBrokerStatusCmd(f),
		newConsumerProgressCmd(f), newQueryMsgByIDCmd(f), newQueryMsgByKeyCmd(f), newResetOffsetByTimeCmd(f),
		newGetBrokerConfigCmd(f), newUpdateBrokerConfigCmd(f), newUpdateSubGroupCmd(f), newSendMessageCmd(f),
		newRaftStatusCmd(f), newLeadershipTransferCmd(f), newBalanceLeadersCmd(f),
	)
	return cmd
}

// nameServers splits -n.
func (f *adminFlags) nameServers() ([]string, error) {
	var out []string
	for _, a := range strings.FieldsFunc(f.namesrv, func(r rune) bool { return r == ';' || r == ',' }) {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: -n NAMESRV is required (e.g. -n 127.0.0.1:9876)", errAdminUsage)
	}
	return out, nil
}

// logger is quiet unless --log-level asks for debug: admin output is the
// table, not the logs.
func (f *adminFlags) logger() *zap.Logger {
	if f.g != nil && f.g.logLevel == "debug" {
		if l, err := f.g.logger(); err == nil {
			return l
		}
	}
	return zap.NewNop()
}

// adminSession is one command's connections: the SDK's admin client for
// the mqadmin commands and a raw remoting client for raftmq's own codes.
type adminSession struct {
	f   *adminFlags
	ns  []string
	a   *client.Admin
	rc  *remoting.Client
	out io.Writer
}

// open builds the session; close it with close().
func (f *adminFlags) open(cmd *cobra.Command) (*adminSession, error) {
	ns, err := f.nameServers()
	if err != nil {
		return nil, err
	}
	log := f.logger()
	a, err := client.NewAdmin(client.NameServers(ns...), client.RequestTimeout(f.timeout), client.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errAdminUsage, err)
	}
	rcfg := remoting.DefaultClientConfig()
	rcfg.DefaultTimeout = f.timeout
	return &adminSession{f: f, ns: ns, a: a, rc: remoting.NewClient(rcfg, log), out: cmd.OutOrStdout()}, nil
}

func (s *adminSession) close() {
	_ = s.a.Close()
	_ = s.rc.Close()
}

// ctx bounds a whole command: a few requests' worth of timeouts.
func (s *adminSession) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	return context.WithTimeout(parent, 6*s.f.timeout)
}

// explain turns transport failures into errors that name the address and
// what to check; everything else passes through.
func (s *adminSession) explain(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, client.ErrNoNameServer):
		return fmt.Errorf("%w: cannot reach name server %s — check -n (host:port) and that `raftmq namesrv` is running there: %v",
			errUnreachable, strings.Join(s.ns, ";"), err)
	case errors.Is(err, remoting.ErrConnClosed), errors.Is(err, remoting.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: a broker did not answer — check that the broker address is right and the broker is running "+
			"(`raftmq admin clusterList -n %s` lists registered brokers): %v", errUnreachable, strings.Join(s.ns, ";"), err)
	}
	return err
}

// brokerInvoke sends req to addr and returns the success answer; a
// non-success answer is a *remoting.RemoteError.
func (s *adminSession) brokerInvoke(ctx context.Context, addr string, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	cctx, cancel := context.WithTimeout(ctx, s.f.timeout)
	defer cancel()
	resp, err := s.rc.InvokeSync(cctx, addr, req)
	if err != nil {
		return nil, fmt.Errorf("%w: broker %s did not answer (is it running? is the address right?): %w", errUnreachable, addr, err)
	}
	if err := remoting.ResponseError(addr, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// emit prints v as JSON with --json, else calls table with a tabwriter.
func (s *adminSession) emit(v any, table func(w *tabwriter.Writer)) error {
	if s.f.json {
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	w := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	table(w)
	return w.Flush()
}

// row writes tab-separated cells and a newline.
func row(w io.Writer, cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(w, "\t")
		}
		fmt.Fprint(w, c)
	}
	fmt.Fprintln(w)
}

// run is the RunE body shared by every admin command: open a session,
// bound it, explain unreachable peers.
func (f *adminFlags) run(body func(ctx context.Context, s *adminSession) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		s, err := f.open(cmd)
		if err != nil {
			return err
		}
		defer s.close()
		ctx, cancel := s.ctx(cmd.Context())
		defer cancel()
		return s.explain(body(ctx, s))
	}
}

// required marks flags required (cobra then names the missing one).
func required(cmd *cobra.Command, names ...string) {
	for _, n := range names {
		_ = cmd.MarkFlagRequired(n)
	}
}

// fmtTime prints a time for tables ("-" for zero).
func fmtTime(t time.Time) string {
	if t.IsZero() || t.UnixMilli() <= 0 {
		return "-"
	}
	return t.Format("2006-01-02 15:04:05.000")
}
