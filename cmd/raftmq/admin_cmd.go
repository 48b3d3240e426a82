package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
)

// adminEntry is one row of adminCommands, whatever its result type.
type adminEntry interface {
	// cobra builds the row's cobra command.
	cobra(f *adminFlags) *cobra.Command
	// spec describes the row for checks of the table itself.
	spec() entrySpec
}

// entrySpec is the type-independent part of a row.
type entrySpec struct {
	name     string
	flags    []flagSpec
	oneOf    []string
	complete bool // has a short description, a run function and a table renderer
}

// adminCommand is one admin command whose run function returns an R.
type adminCommand[R any] struct {
	name  string
	short string
	long  string
	flags []flagSpec
	// oneOf names flags of which exactly one must be non-empty (mqadmin's
	// -b brokerAddr | -c clusterName).
	oneOf []string
	// run sends the command's requests; its result is printed as JSON
	// (--json) or by table. Errors are explained by adminSession.explain.
	run   func(ctx context.Context, s *adminSession, in flagValues) (R, error)
	table func(w *tabwriter.Writer, r R)
	// perRequest leaves the whole command unbounded: its run bounds each
	// request by --timeout itself (adminSession.request), as mqadmin
	// does, because its requests grow with the cluster (statsAll).
	perRequest bool
}

// partialFailure is a run error that still comes with a result worth
// printing: some of several independent steps failed, and the result says
// which (balanceLeaders' moves).
type partialFailure struct{ error }

func (p partialFailure) Unwrap() error { return p.error }

// partial joins the failures of a write sent to several targets (name
// servers, broker groups, members). When some targets took it (done >
// 0) the error is a partialFailure, so their lines print before it, as
// mqadmin prints one per target: the operator must see what already
// changed before repeating the command.
func partial(done int, errs []error) error {
	err := errors.Join(errs...)
	if err != nil && done > 0 {
		return partialFailure{err}
	}
	return err
}

func (c adminCommand[R]) spec() entrySpec {
	return entrySpec{name: c.name, flags: c.flags, oneOf: c.oneOf, complete: c.short != "" && c.run != nil && c.table != nil}
}

// cobra is the one place a row becomes a command: flags registered with
// their short names and defaults, required ones marked (cobra then names
// the missing one), then on each run: -n checked, flag values parsed, the
// run function bounded by --timeout, the result printed, transport
// failures explained.
func (c adminCommand[R]) cobra(f *adminFlags) *cobra.Command {
	cmd := &cobra.Command{Use: c.name, Short: c.short, Long: c.long, Args: cobra.NoArgs}
	for _, fl := range c.flags {
		fl.register(cmd)
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		s, err := f.open(cmd)
		if err != nil {
			return err
		}
		defer s.close()
		ctx, cancel := s.ctx(cmd.Context(), c.perRequest)
		defer cancel()
		in, err := c.values(cmd)
		if err != nil {
			return err
		}
		res, err := c.run(ctx, s, in)
		if pf := (partialFailure{}); err == nil || errors.As(err, &pf) {
			if perr := emit(s, res, c.table); perr != nil {
				return perr
			}
		}
		return s.explain(err)
	}
	return cmd
}

// values checks oneOf and reads every flag, parsing the text-valued
// kinds (true/false, mqadmin times) into their Go values.
func (c adminCommand[R]) values(cmd *cobra.Command) (flagValues, error) {
	fs := cmd.Flags()
	if len(c.oneOf) > 0 {
		set, names := 0, make([]string, 0, len(c.oneOf))
		for _, n := range c.oneOf {
			if v, _ := fs.GetString(n); v != "" {
				set++
			}
			names = append(names, "-"+fs.Lookup(n).Shorthand+" "+n)
		}
		if set != 1 {
			return nil, fmt.Errorf("%w: %s needs exactly one of %s", errAdminUsage, c.name, strings.Join(names, " or "))
		}
	}
	in := flagValues{}
	for _, fl := range c.flags {
		v, err := fl.value(cmd)
		if err != nil {
			return nil, err
		}
		in[fl.name] = v
		if cmd.Flags().Changed(fl.name) {
			in[givenKey+fl.name] = true
		}
	}
	return in, nil
}

// emit prints res as JSON with --json, else through table.
func emit[R any](s *adminSession, res R, table func(*tabwriter.Writer, R)) error {
	if s.f.json {
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	w := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	table(w, res)
	return w.Flush()
}

// rowsOf renders a list as a header line and one line of cells per item.
type rowsOf[T any] func(w *tabwriter.Writer, items []T)

// columns is the renderer of a list result: the header line, then the
// cells of each item.
func columns[T any](header []any, cells func(T) []any) rowsOf[T] {
	return func(w *tabwriter.Writer, items []T) {
		row(w, header...)
		for _, it := range items {
			row(w, cells(it)...)
		}
	}
}

// one renders a single result as a one-line table.
func (r rowsOf[T]) one(w *tabwriter.Writer, item T) { r(w, []T{item}) }

// targeted is a result whose table names the broker or cluster it was
// applied to; its JSON is the value alone.
type targeted[T any] struct {
	target string
	v      T
}

// MarshalJSON encodes the value alone.
func (t targeted[T]) MarshalJSON() ([]byte, error) { return json.Marshal(t.v) }

// adminFlags are shared by every `raftmq admin` command.
type adminFlags struct {
	g       *globalFlags
	namesrv string
	json    bool
	timeout time.Duration
	acl     aclFlags // signs every request (admin_acl.go)
	tls     tlsFlags
}

// nameServers splits -n.
func (f *adminFlags) nameServers() ([]string, error) {
	var out []string
	for _, a := range strings.FieldsFunc(f.namesrv, func(r rune) bool { return r == ';' || r == ',' }) {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	if len(out) == 0 && os.Getenv("NAMESRV_ADDR") != "" {
		// As mqadmin: -n wins, else the NAMESRV_ADDR environment variable.
		g := *f
		g.namesrv = os.Getenv("NAMESRV_ADDR")
		return g.nameServers()
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: -n NAMESRV is required (e.g. -n 127.0.0.1:9876) unless NAMESRV_ADDR is set", errAdminUsage)
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

// adminSession is one command's connection: the SDK's admin client, the
// one path every request takes (it follows Raft leaders where a request
// is a leader's).
type adminSession struct {
	f   *adminFlags
	ns  []string
	a   *client.Admin
	out io.Writer
}

// open builds the session; close it with close().
func (f *adminFlags) open(cmd *cobra.Command) (*adminSession, error) {
	ns, err := f.nameServers()
	if err != nil {
		return nil, err
	}
	log := f.logger()
	creds, err := f.credentials()
	if err != nil {
		return nil, err
	}
	a, err := client.NewAdmin(client.NameServers(ns...), client.RequestTimeout(f.timeout), client.WithLogger(log),
		client.WithCredentials(creds.AccessKey, creds.SecretKey), f.tls.clientOpt())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errAdminUsage, err)
	}
	return &adminSession{f: f, ns: ns, a: a, out: cmd.OutOrStdout()}, nil
}

func (s *adminSession) close() {
	_ = s.a.Close(context.Background())
}

// ctx bounds a whole command, a few requests' worth of timeouts, unless
// the command bounds each of its requests (perRequest).
func (s *adminSession) ctx(parent context.Context, perRequest bool) (context.Context, context.CancelFunc) {
	if parent == nil {
		parent = context.Background()
	}
	if perRequest {
		return context.WithCancel(parent)
	}
	return context.WithTimeout(parent, 6*s.f.timeout)
}

// explain turns transport failures into errors that name the address and
// what to check; everything else passes through.
func (s *adminSession) explain(err error) error {
	if err == nil {
		return nil
	}
	tlsHint := s.f.tls.plaintextHint(err)
	switch {
	case errors.Is(err, client.ErrNoNameServer):
		return fmt.Errorf("%w: cannot reach name server %s — check -n (host:port) and that `raftmq namesrv` is running there%s: %v",
			errUnreachable, strings.Join(s.ns, ";"), tlsHint, err)
	case errors.Is(err, remoting.ErrConnClosed), errors.Is(err, remoting.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: a broker did not answer — check that the broker address is right and the broker is running%s "+
			"(`raftmq admin clusterList -n %s` lists registered brokers): %v", errUnreachable, tlsHint, strings.Join(s.ns, ";"), err)
	}
	return err
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

// fmtTime prints a time for tables ("-" for zero).
func fmtTime(t time.Time) string {
	if t.IsZero() || t.UnixMilli() <= 0 {
		return "-"
	}
	return t.Format("2006-01-02 15:04:05.000")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// flagKind is how a flag's text becomes the value run sees.
type flagKind int

const (
	kindString flagKind = iota
	kindInt
	kindInt64
	// kindSwitch is a boolean switch (--dry-run).
	kindSwitch
	// kindYesNo is mqadmin's boolean option given as a value (-o true).
	kindYesNo
	// kindTime is mqadmin's time: now, ms since the epoch, or
	// yyyy-MM-dd#HH:mm:ss:SSS in local time.
	kindTime
)

// flagSpec is one flag of a table row.
type flagSpec struct {
	name, short, usage string
	kind               flagKind
	def                any // int, int64 or bool as kind needs; strings default to ""
	required           bool
}

func str(name, short, usage string) flagSpec {
	return flagSpec{name: name, short: short, usage: usage, kind: kindString}
}

func num(name, short string, def int, usage string) flagSpec {
	return flagSpec{name: name, short: short, usage: usage, kind: kindInt, def: def}
}

func num64(name, short string, def int64, usage string) flagSpec {
	return flagSpec{name: name, short: short, usage: usage, kind: kindInt64, def: def}
}

func yesNo(name, short string, def bool, usage string) flagSpec {
	return flagSpec{name: name, short: short, usage: usage, kind: kindYesNo, def: def}
}

func when(name, short, usage string) flagSpec {
	return flagSpec{name: name, short: short, usage: usage, kind: kindTime}
}

func toggle(name, usage string) flagSpec {
	return flagSpec{name: name, usage: usage, kind: kindSwitch, def: false}
}

// req marks the flag required.
func (f flagSpec) req() flagSpec {
	f.required = true
	return f
}

func (f flagSpec) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	switch f.kind {
	case kindInt:
		fs.IntP(f.name, f.short, f.def.(int), f.usage)
	case kindInt64:
		fs.Int64P(f.name, f.short, f.def.(int64), f.usage)
	case kindSwitch:
		fs.BoolP(f.name, f.short, false, f.usage)
	case kindYesNo:
		// Registered as text so help shows mqadmin's (default "true") and
		// a bad value is reported as a usage error naming the flag.
		fs.StringP(f.name, f.short, strconv.FormatBool(f.def.(bool)), f.usage)
	default:
		fs.StringP(f.name, f.short, "", f.usage)
	}
	if f.required {
		_ = cmd.MarkFlagRequired(f.name)
	}
}

// value reads the flag from cmd's parsed flags.
func (f flagSpec) value(cmd *cobra.Command) (any, error) {
	fs := cmd.Flags()
	switch f.kind {
	case kindInt:
		return fs.GetInt(f.name)
	case kindInt64:
		return fs.GetInt64(f.name)
	case kindSwitch:
		return fs.GetBool(f.name)
	}
	s, err := fs.GetString(f.name)
	if err != nil {
		return nil, err
	}
	switch f.kind {
	case kindYesNo:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("%w: -%s %q: want true or false", errAdminUsage, f.short, s)
		}
		return b, nil
	case kindTime:
		if s == "" {
			return time.Time{}, nil // optional and not given
		}
		return parseMQAdminTime(f.short, s)
	}
	return s, nil
}

// parseMQAdminTime reads a kindTime flag's text.
func parseMQAdminTime(short, s string) (time.Time, error) {
	if s == "now" {
		return time.Now(), nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	if t, ok := parseMQAdminDate(s, time.Local); ok {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%w: -%s %q: want now, ms since the epoch or yyyy-MM-dd#HH:mm:ss:SSS", errAdminUsage, short, s)
}

// parseMQAdminDate reads yyyy-MM-dd#HH:mm:ss:SSS in loc as
// mqadmin's lenient SimpleDateFormat does (UtilAll.parseDate): a field is
// one or more digits, SSS counts milliseconds ("6" is 6 ms), and a field
// past its range carries into the next larger one (month 13 is January of
// the next year), as time.Date normalizes. Java would also take a sign and
// ignore text after the milliseconds; both are refused here rather than
// guessed at.
func parseMQAdminDate(s string, loc *time.Location) (time.Time, bool) {
	const seps = "--#:::" // after year, month, day, hour, minute, second
	var f [len(seps) + 1]int
	for i := range f {
		n := 0
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		if n == 0 || n > 9 { // 9 digits fit Java's int fields and keep time.Date in range
			return time.Time{}, false
		}
		f[i], _ = strconv.Atoi(s[:n])
		s = s[n:]
		if i < len(seps) {
			if s == "" || s[0] != seps[i] {
				return time.Time{}, false
			}
			s = s[1:]
		}
	}
	if s != "" {
		return time.Time{}, false
	}
	t := time.Date(f[0], time.Month(f[1]), f[2], f[3], f[4], f[5], f[6]*int(time.Millisecond), loc)
	// Message times start at the epoch (and year 1 would read as the zero
	// time, a flag not given), but the local 1970-01-01 that says "from
	// the start" is before it east of UTC; far later years overflow epoch
	// milliseconds.
	if (t.UnixMilli() < 0 && t.Year() < 1970) || t.Year() > 9999 {
		return time.Time{}, false
	}
	return t, true
}

// flagValues are a command's parsed flags by long name. The accessors
// panic on a name the row does not declare with that kind: a bug in the
// table, which the live admin tests run through.
type flagValues map[string]any

// givenKey prefixes, in flagValues, the marks of the flags given on the
// command line (a string flag given empty is not the same as one left out).
const givenKey = "\x00given:"

// given reports whether flag name was on the command line.
func (in flagValues) given(name string) bool { return in[givenKey+name] == true }

func (in flagValues) str(name string) string     { return in[name].(string) }
func (in flagValues) int(name string) int        { return in[name].(int) }
func (in flagValues) int64(name string) int64    { return in[name].(int64) }
func (in flagValues) bool(name string) bool      { return in[name].(bool) }
func (in flagValues) time(name string) time.Time { return in[name].(time.Time) }
