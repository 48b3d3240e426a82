package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/proccluster"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// `raftmq bench timer`: timer messages on a local 3-node group of
// separate processes (the failover report's cluster). It measures the
// fire-time error (arrival at the consumer, and store time in the real
// topic, minus the due time TIMER_OUT_MS), optionally with the leader
// SIGKILLed while timers fire, and the leader's RSS before and after
// --pending far-future timers are stored.

type timerBenchOpts struct {
	dir          string
	count        int
	lead, spread time.Duration
	killLeader   bool
	pending      int
	pendingDelay time.Duration
	pendingPlain bool
	senders      int
	jsonOut      bool
	launch       proccluster.Launcher
	progress     func(string)
}

// timerBenchReport is what the run measured (JSON with --json).
type timerBenchReport struct {
	Count, Received, Duplicates int
	// AckedLate counts timers whose send was acknowledged after their due
	// time (stored as plain messages); they are left out of the errors.
	AckedLate                  int     `json:",omitempty"`
	KilledLeader               string  `json:",omitempty"`
	ArrivalP50Ms, ArrivalP99Ms float64 // consumer arrival − TIMER_OUT_MS
	ArrivalMaxMs               float64
	StoreP50Ms, StoreP99Ms     float64 // store time in the real topic − TIMER_OUT_MS
	StoreMaxMs                 float64
	Pending                    int     `json:",omitempty"`
	PendingSendSec             float64 `json:",omitempty"`
	PendingPlain               bool    `json:",omitempty"` // the pending messages were plain (baseline)
	LeaderRSSBefore            rss
	LeaderRSSAfter             rss
	TimerIndexBytes            int64 `json:",omitempty"` // the leader's timer index files on disk
}

func newBenchTimerCmd() *cobra.Command {
	o := &timerBenchOpts{}
	cmd := &cobra.Command{
		Use:   "timer",
		Short: "Timer messages on a local 3-process group: fire-time error p50/p99 (optionally across a leader kill) and leader RSS with many pending timers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			o.launch = proccluster.Binary(bin)
			o.progress = func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), s) }
			rep, err := runTimerBench(cmd.Context(), o, zap.NewNop())
			if rep != nil {
				printTimerBench(cmd.OutOrStdout(), rep, o.jsonOut)
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.dir, "dir", "", "data directory (a new temporary one by default, removed afterwards)")
	fl.IntVar(&o.count, "count", 300, "timer messages whose fire time is measured")
	fl.DurationVar(&o.lead, "lead", 3*time.Second, "the first measured timer is due this long after it is sent")
	fl.DurationVar(&o.spread, "spread", 10*time.Second, "the measured timers are due evenly over this long")
	fl.BoolVar(&o.killLeader, "kill-leader", false, "SIGKILL the leader halfway through the spread (restarted 5 s later)")
	fl.IntVar(&o.pending, "pending", 0, "first store this many timers due after --pending-delay and report the leader's RSS before and after")
	fl.DurationVar(&o.pendingDelay, "pending-delay", 24*time.Hour, "delay of the pending timers")
	fl.BoolVar(&o.pendingPlain, "pending-plain", false, "send the --pending messages as plain messages (the RSS baseline)")
	fl.IntVar(&o.senders, "senders", 64, "concurrent senders of the pending timers")
	fl.BoolVar(&o.jsonOut, "json", false, "print the report as JSON")
	return cmd
}

func runTimerBench(ctx context.Context, o *timerBenchOpts, log *zap.Logger) (rep *timerBenchReport, err error) {
	say := o.progress
	dir := o.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "raftmq-timerbench-"); err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	}
	c, err := newProcCluster(dir, 0, o.launch)
	if err != nil {
		return nil, err
	}
	defer c.stopAll()
	rcfg := remoting.DefaultClientConfig()
	rc := remoting.NewClient(rcfg, log)
	defer func() { _ = rc.Close() }()
	admin, err := client.NewAdmin(client.NameServers(c.NS.Addr()), client.RequestTimeout(time.Second), client.WithLogger(log))
	if err != nil {
		return nil, err
	}
	defer func() { _ = admin.Close(context.Background()) }()
	const topic = "TimerBench"
	p := &probes{c: c, rc: rc, admin: admin, topic: topic}
	if err := c.Start(c.NS); err != nil {
		return nil, err
	}
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			return nil, err
		}
	}
	if err := waitWhole(ctx, p, 30*time.Second); err != nil {
		return nil, err
	}
	if err := waitUntil(ctx, 30*time.Second, func(ctx context.Context) bool {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := admin.CreateTopic(cctx, client.TopicSpec{Topic: topic, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}, failoverCluster, "")
		return err == nil
	}); err != nil {
		return nil, err
	}
	prod, err := client.NewProducer(client.NameServers(c.NS.Addr()), client.WithLogger(log), client.SendTimeout(10*time.Second))
	if err != nil {
		return nil, err
	}
	if err := prod.Start(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = prod.Close(context.Background()) }()
	leader := func() (*proccluster.Node, error) {
		var addr string
		err := waitUntil(ctx, 30*time.Second, func(ctx context.Context) bool {
			a, err := p.route(ctx)
			addr = routeLeader(a)
			return err == nil && addr != ""
		})
		if err != nil {
			return nil, err
		}
		if n := c.NodeByAddr(addr); n != nil {
			return n, nil
		}
		return nil, fmt.Errorf("bench timer: route leader %s is no member", addr)
	}
	rep = &timerBenchReport{Count: o.count}

	if o.pending > 0 {
		l, err := leader()
		if err != nil {
			return rep, err
		}
		runtimeSettle := func() { <-time.After(3 * time.Second) }
		runtimeSettle()
		rep.Pending, rep.PendingPlain, rep.LeaderRSSBefore = o.pending, o.pendingPlain, procRSS(l.PID())
		say(fmt.Sprintf("bench timer: leader %s RSS %+v KiB; storing %d messages (plain: %v) due in %v", l.ID, rep.LeaderRSSBefore, o.pending, o.pendingPlain, o.pendingDelay))
		start := time.Now()
		var next, failed atomic.Int64
		var wg sync.WaitGroup
		for range o.senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := next.Add(1); i <= int64(o.pending); i = next.Add(1) {
					m := client.NewMessage(topic, []byte("p"+strconv.FormatInt(i, 10)))
					if !o.pendingPlain {
						m.WithDeliverAfter(o.pendingDelay)
					}
					if _, err := prod.SendSync(ctx, m); err != nil {
						failed.Add(1)
					}
					if i%100000 == 0 {
						say(fmt.Sprintf("bench timer: %d pending timers stored", i))
					}
				}
			}()
		}
		wg.Wait()
		rep.PendingSendSec = time.Since(start).Seconds()
		if failed.Load() > 0 {
			return rep, fmt.Errorf("bench timer: %d of %d pending sends failed", failed.Load(), o.pending)
		}
		runtimeSettle()
		rep.LeaderRSSAfter = procRSS(l.PID())
		rep.TimerIndexBytes = dirBytes(filepath.Join(dir, l.ID))
	}

	// The measured timers.
	type rec struct{ arrival, store float64 }
	var mu sync.Mutex
	got := map[string][]rec{}
	cons, err := client.NewPushConsumer(client.NameServers(c.NS.Addr()), client.WithLogger(log),
		client.ConsumerGroup("timer_bench"), client.ConsumeFrom(client.ConsumeFromLastOffset))
	if err != nil {
		return rep, err
	}
	if err := cons.Subscribe(topic, "*"); err != nil {
		return rep, err
	}
	if err := cons.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			due, err := strconv.ParseInt(m.Property(wire.PropertyTimerOutMs), 10, 64)
			if err != nil || !strings.HasPrefix(string(m.Body), "t") {
				continue
			}
			got[string(m.Body)] = append(got[string(m.Body)], rec{
				arrival: float64(now.Sub(time.UnixMilli(due)).Microseconds()) / 1000,
				store:   float64(m.StoreTimestamp - due),
			})
		}
		return client.ConsumeSuccess
	}); err != nil {
		return rep, err
	}
	if err := cons.Start(ctx); err != nil {
		return rep, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = cons.Close(cctx)
	}()
	// Let the consumer settle on the queues before anything is due.
	<-time.After(2 * time.Second)
	t0 := time.Now().Add(o.lead)
	say(fmt.Sprintf("bench timer: sending %d timers due over %v from %v on", o.count, o.spread, t0.Format(time.TimeOnly)))
	ackedLate := map[string]bool{}
	for i := range o.count {
		at := t0.Add(time.Duration(i) * o.spread / time.Duration(max(o.count, 1)))
		body := "t" + strconv.Itoa(i)
		if _, err := prod.SendSync(ctx, client.NewMessage(topic, []byte(body)).WithDeliverAt(at)); err != nil {
			return rep, fmt.Errorf("bench timer: send %d: %w", i, err)
		}
		if time.Now().After(at) {
			ackedLate[body] = true
		}
	}
	if o.killLeader {
		<-time.After(time.Until(t0.Add(o.spread / 2)))
		l, err := leader()
		if err != nil {
			return rep, err
		}
		if _, err := c.Kill(l); err != nil {
			return rep, err
		}
		rep.KilledLeader = l.ID
		say(fmt.Sprintf("bench timer: SIGKILLed leader %s", l.ID))
		<-time.After(5 * time.Second)
		if err := c.Start(l); err != nil {
			return rep, err
		}
	}
	_ = waitUntil(ctx, time.Until(t0.Add(o.spread))+60*time.Second, func(context.Context) bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == o.count
	})
	<-time.After(time.Second) // late duplicates
	mu.Lock()
	defer mu.Unlock()
	var arr, sto []float64
	for body, rs := range got {
		rep.Received++
		rep.Duplicates += len(rs) - 1
		if ackedLate[body] {
			rep.AckedLate++
			continue
		}
		arr = append(arr, rs[0].arrival)
		sto = append(sto, rs[0].store)
	}
	rep.ArrivalP50Ms, rep.ArrivalP99Ms, rep.ArrivalMaxMs = pct(arr, 50), pct(arr, 99), pct(arr, 100)
	rep.StoreP50Ms, rep.StoreP99Ms, rep.StoreMaxMs = pct(sto, 50), pct(sto, 99), pct(sto, 100)
	if rep.Received != o.count {
		return rep, fmt.Errorf("bench timer: %d of %d timers received", rep.Received, o.count)
	}
	return rep, nil
}

// pct is the p-th percentile (nearest rank) of xs.
func pct(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// rss is a process's resident memory in KiB: total, anonymous (heap,
// stacks) and file-backed (the mapped CommitLog, ConsumeQueues, index).
type rss struct{ Total, Anon, File int64 }

// procRSS reads /proc/<pid>/status (zeros when unknown).
func procRSS(pid int) rss {
	var r rss
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return r
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			r.Total = n
		case "RssAnon":
			r.Anon = n
		case "RssFile":
			r.File = n
		}
	}
	return r
}

// dirBytes sums the sizes of the timer index files under a member's data
// directory.
func dirBytes(root string) int64 {
	var n int64
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(path, string(filepath.Separator)+"timer"+string(filepath.Separator)) {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func printTimerBench(w io.Writer, r *timerBenchReport, asJSON bool) {
	if asJSON {
		e := json.NewEncoder(w)
		e.SetIndent("", "  ")
		_ = e.Encode(r)
		return
	}
	fmt.Fprintf(w, "timers: %d sent, %d received, %d duplicates, %d acknowledged after their due time (not in the errors)",
		r.Count, r.Received, r.Duplicates, r.AckedLate)
	if r.KilledLeader != "" {
		fmt.Fprintf(w, " (leader %s SIGKILLed halfway)", r.KilledLeader)
	}
	fmt.Fprintf(w, "\nfire error, consumer arrival − due: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", r.ArrivalP50Ms, r.ArrivalP99Ms, r.ArrivalMaxMs)
	fmt.Fprintf(w, "fire error, store time − due:       p50 %.0f ms, p99 %.0f ms, max %.0f ms\n", r.StoreP50Ms, r.StoreP99Ms, r.StoreMaxMs)
	if r.Pending > 0 {
		what := "timers"
		if r.PendingPlain {
			what = "plain messages (baseline)"
		}
		fmt.Fprintf(w, "pending: %d %s stored in %.1f s; leader timer index %d bytes on disk\n", r.Pending, what, r.PendingSendSec, r.TimerIndexBytes)
		fmt.Fprintf(w, "leader RSS KiB before: total %d (anon %d, file %d); after: total %d (anon %d, file %d)\n",
			r.LeaderRSSBefore.Total, r.LeaderRSSBefore.Anon, r.LeaderRSSBefore.File, r.LeaderRSSAfter.Total, r.LeaderRSSAfter.Anon, r.LeaderRSSAfter.File)
	}
}
