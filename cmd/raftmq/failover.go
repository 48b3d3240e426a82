package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/proccluster"
	"github.com/raftmq/raftmq/remoting"
)

// failoverOpts configure one failover report run.
type failoverOpts struct {
	kills    int
	dir      string // "" = a temporary directory
	keep     bool
	json     bool
	basePort int // 0 = pick a free block
	senders  int
	// phaseTimeout bounds one kill's measurement and each wait for the
	// cluster to be whole again.
	phaseTimeout time.Duration
	launch       proccluster.Launcher
	progress     func(string)
	// sigterm stops the leader with SIGTERM (a planned stop: the node
	// hands leadership off before it exits) instead of SIGKILL.
	sigterm bool
	// freeze SIGSTOPs the leader instead (its connections stay open: a
	// silent failure) and SIGCONTs it after the measurement.
	freeze bool
	// brokerConf lists extra broker.conf lines (key=value) for every
	// member; none keeps the defaults.
	brokerConf []string
}

// newFailoverCmd is `raftmq failover`: start a name server and a 3-node
// group as separate processes of this binary, SIGKILL the leader again and
// again, and report how long each party took to notice.
func newFailoverCmd(g *globalFlags) *cobra.Command {
	o := &failoverOpts{}
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "Failover report: kill the Raft leader of a local 3-node group repeatedly and time detection, election, route update and first write",
		Long: "Runs this binary as separate processes — a name server with gossip and a 3-node broker group (SYNC_FLUSH, small " +
			"segments, loopback ports from a free base) — and an SDK producer sending continuously. Per kill it SIGKILLs the " +
			"leader's process and measures from the kill instant: detection (the name server's gossip gauge drops), route drop " +
			"(the killed address leaves the route), election (a survivor's RAFT_STATUS names a new leader with a higher term), " +
			"route update (the route's brokerId 0 is another address), first write (the producer's first ack from the new " +
			"leader) and consume resume (a push consumer delivered, from every queue, a message sent after the kill). Then it restarts the node and waits until the group is whole and ready and every follower's log has caught up with the leader's and been applied (a restarted member replays its log), so that the next kill meets a steady group. Prints a table per kill and " +
			"min/median/max per phase (--json for scripts). Only processes it started are signalled; its directory is removed " +
			"unless --keep. With --sigterm the leader gets SIGTERM instead: a planned stop, where it hands leadership to a " +
			"follower and waits until the route names it before it exits; the phases are then measured from the signal. " +
			"With --freeze the leader gets SIGSTOP (its connections stay open, as in a freeze or partition: heartbeat " +
			"timeouts and gossip decide) and SIGCONT after the measurement, when it rejoins as a follower.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.kills < 1 {
				return fmt.Errorf("failover: --kills must be at least 1 (got %d)", o.kills)
			}
			if o.sigterm && o.freeze {
				return errors.New("failover: --sigterm and --freeze exclude each other")
			}
			bin, err := os.Executable()
			if err != nil {
				return fmt.Errorf("failover: cannot find this binary to run it: %w", err)
			}
			o.launch = proccluster.Binary(bin)
			o.progress = func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), s) }
			// The SDK and probes log every failed connection a kill causes;
			// the report is the output, so they stay quiet unless asked.
			log := zap.NewNop()
			if g.logLevel == "debug" {
				if log, err = g.logger(); err != nil {
					return err
				}
				defer func() { _ = log.Sync() }()
			}
			rep, err := runFailover(cmd.Context(), o, log)
			if rep != nil && len(rep.Kills) > 0 {
				if perr := printFailover(cmd.OutOrStdout(), rep, o.json); perr != nil {
					return errors.Join(err, perr)
				}
			}
			return err
		},
	}
	cmd.Flags().IntVar(&o.kills, "kills", 10, "number of leader kills")
	cmd.Flags().StringVar(&o.dir, "dir", "", "working directory for confs, data and process logs (default: a new temporary directory)")
	cmd.Flags().BoolVar(&o.keep, "keep", false, "keep the working directory (data and process logs) afterwards")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON instead of tables")
	cmd.Flags().IntVar(&o.basePort, "base-port", 0, "name server port; brokers use base+10, +20, +30 (0: find a free block)")
	cmd.Flags().IntVar(&o.senders, "senders", 2, "concurrent synchronous producer senders")
	cmd.Flags().BoolVar(&o.sigterm, "sigterm", false, "stop the leader with SIGTERM (planned stop with leadership hand-off) instead of SIGKILL")
	cmd.Flags().BoolVar(&o.freeze, "freeze", false, "SIGSTOP the leader (connections stay open: heartbeat timeouts and gossip decide) instead of SIGKILL, SIGCONT it afterwards")
	cmd.Flags().DurationVar(&o.phaseTimeout, "phase-timeout", 30*time.Second, "bound on one kill's measurement and on each wait for the group to be whole")
	return cmd
}

// runFailover runs the whole report. It returns the kills measured so far
// even when it stops early with an error.
func runFailover(ctx context.Context, o *failoverOpts, log *zap.Logger) (rep *failoverReport, err error) {
	if o.senders < 1 {
		o.senders = 1
	}
	if o.phaseTimeout <= 0 {
		o.phaseTimeout = 30 * time.Second
	}
	say := o.progress
	if say == nil {
		say = func(string) {}
	}
	dir := o.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "raftmq-failover-"); err != nil {
			return nil, fmt.Errorf("failover: %w", err)
		}
	} else if ents, rerr := os.ReadDir(dir); rerr == nil && len(ents) > 0 {
		// Old Raft state would join the new run, and the directory is
		// removed afterwards: only an empty or new directory is taken.
		return nil, fmt.Errorf("failover: --dir %s is not empty; give a new or empty directory", dir)
	}
	defer func() {
		if !o.keep {
			err = errors.Join(err, os.RemoveAll(dir))
		}
	}()
	c, err := newProcCluster(dir, o.basePort, o.launch, o.brokerConf...)
	if err != nil {
		return nil, err
	}
	defer c.stopAll()

	rcfg := remoting.DefaultClientConfig()
	rcfg.ConnectTimeout, rcfg.DefaultTimeout = 300*time.Millisecond, time.Second
	rc := remoting.NewClient(rcfg, log.Named("probe"))
	defer func() { _ = rc.Close() }()
	admin, err := client.NewAdmin(client.NameServers(c.NS.Addr()), client.RequestTimeout(time.Second), client.WithLogger(log.Named("admin")))
	if err != nil {
		return nil, err
	}
	defer func() { _ = admin.Close(context.Background()) }()
	p := &probes{c: c, rc: rc, admin: admin, topic: "FailoverTopic"}

	say(fmt.Sprintf("failover: starting name server %s and 3 brokers (%s) under %s", c.NS.Addr(), nodeAddrs(c), dir))
	if err := c.Start(c.NS); err != nil {
		return nil, err
	}
	if err := waitUntil(ctx, o.phaseTimeout, func(ctx context.Context) bool {
		_, err := p.gossipLive(ctx)
		return err == nil
	}); err != nil {
		return nil, fmt.Errorf("failover: name server %s did not come up: %w\n%s", c.NS.Addr(), err, c.NS.Tail(20))
	}
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			return nil, err
		}
	}
	if err := waitWhole(ctx, p, o.phaseTimeout); err != nil {
		return nil, err
	}
	if err := waitUntil(ctx, o.phaseTimeout, func(ctx context.Context) bool {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := admin.CreateTopic(cctx, client.TopicSpec{Topic: p.topic, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}, failoverCluster, "")
		return err == nil
	}); err != nil {
		return nil, fmt.Errorf("failover: create topic %s: %w", p.topic, err)
	}

	prod, err := client.NewProducer(client.NameServers(c.NS.Addr()), client.WithLogger(log.Named("producer")),
		client.ProducerGroup("raftmq_failover_producer"), client.SendTimeout(10*time.Second))
	if err != nil {
		return nil, err
	}
	if err := prod.Start(ctx); err != nil {
		return nil, err
	}
	defer func() { _ = prod.Close(context.Background()) }()
	w := &ackWatch{}
	cons, err := startFailoverConsumer(ctx, c.NS.Addr(), p.topic, w, log.Named("consumer"))
	if err != nil {
		return nil, err
	}
	defer func() { _ = cons.Close(context.Background()) }()
	pctx, stopProduce := context.WithCancel(ctx)
	var wg sync.WaitGroup
	produce(pctx, prod, p.topic, o.senders, w, &wg)
	defer func() {
		stopProduce()
		wg.Wait()
	}()
	if err := waitUntil(ctx, o.phaseTimeout, func(context.Context) bool {
		acks, _, _ := w.counts()
		return acks > 0
	}); err != nil {
		_, _, last := w.counts()
		return nil, fmt.Errorf("failover: the producer got no ack before the first kill (last error: %v): %w", last, err)
	}

	rep = &failoverReport{Dir: dir, Senders: o.senders}
	defer func() {
		acks, errs, _ := w.counts()
		rep.Acks, rep.SendErrors = acks, errs
		rep.Summary = summarize(rep.Kills)
	}()
	for k := 1; k <= o.kills; k++ {
		kr, err := killOnce(ctx, c, p, w, o.phaseTimeout, o.sigterm, o.freeze)
		if kr != nil {
			kr.N = k
			rep.Kills = append(rep.Kills, *kr)
			say(fmt.Sprintf("failover: kill %d/%d: %s (term %d) → %s (term %d): detect %s, elect %s, route %s, first write %s",
				k, o.kills, kr.Killed, kr.OldTerm, kr.NewLeader, kr.NewTerm,
				fmtMs(kr.DetectMs), fmtMs(kr.ElectMs), fmtMs(kr.RouteUpdateMs), fmtMs(kr.FirstWriteMs)))
		}
		if err != nil {
			return rep, err
		}
		if err := waitWhole(ctx, p, o.phaseTimeout); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// killOnce SIGKILLs (or, with sigterm, SIGTERMs) the current leader,
// measures every phase, and restarts the node. The group is whole when it
// is called.
func killOnce(ctx context.Context, c *procCluster, p *probes, w *ackWatch, timeout time.Duration, sigterm, freeze bool) (*killResult, error) {
	addrs, err := p.route(ctx)
	if err != nil {
		return nil, fmt.Errorf("failover: route before kill: %w", err)
	}
	leaderAddr := routeLeader(addrs)
	victim := c.NodeByAddr(leaderAddr)
	if victim == nil {
		return nil, fmt.Errorf("failover: the route's leader %q is none of this cluster's brokers", leaderAddr)
	}
	st, err := p.raftStatus(ctx, leaderAddr)
	if err != nil {
		return nil, fmt.Errorf("failover: RAFT_STATUS of leader %s: %w", leaderAddr, err)
	}
	kr := &killResult{Killed: victim.ID, KilledAddr: leaderAddr, PID: victim.PID(), OldTerm: st.Term,
		DetectMs: -1, RouteDropMs: -1, ElectMs: -1, RouteUpdateMs: -1, FirstWriteMs: -1, ConsumeMs: -1}
	var survivors []*proccluster.Node
	for _, n := range c.Nodes {
		if n != victim {
			survivors = append(survivors, n)
		}
	}

	w.arm(time.Now(), leaderAddr)
	var t0 time.Time
	// stopped is closed once a SIGTERMed victim exited: the hand-off runs
	// while the phases are measured.
	stopped := make(chan struct{})
	if sigterm {
		t0 = time.Now()
		go func() {
			defer close(stopped)
			c.Stop(victim, timeout)
		}()
	} else if freeze {
		close(stopped)
		t0 = time.Now()
		if err := c.Pause(victim); err != nil {
			return nil, err
		}
	} else {
		close(stopped)
		if t0, err = c.Kill(victim); err != nil {
			return nil, err
		}
	}
	kr.KilledAt = t0
	mctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ms := func(at time.Time) float64 { return float64(at.Sub(t0).Microseconds()) / 1000 }
	var wg sync.WaitGroup
	var mu sync.Mutex // guards kr's phase fields below
	phase := func(dst *float64, cond func(ctx context.Context) bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at, ok := pollAt(mctx, cond)
			if ok {
				mu.Lock()
				*dst = ms(at)
				mu.Unlock()
			}
		}()
	}
	phase(&kr.DetectMs, func(ctx context.Context) bool {
		n, err := p.gossipLive(ctx)
		return err == nil && n < failoverNodes
	})
	phase(&kr.RouteDropMs, func(ctx context.Context) bool {
		a, err := p.route(ctx)
		return err == nil && a != nil && !routeHas(a, leaderAddr)
	})
	phase(&kr.RouteUpdateMs, func(ctx context.Context) bool {
		a, err := p.route(ctx)
		l := routeLeader(a)
		return err == nil && l != "" && l != leaderAddr
	})
	phase(&kr.FirstWriteMs, func(context.Context) bool { return !w.firstAck().IsZero() })
	phase(&kr.ConsumeMs, func(context.Context) bool { return !w.firstConsumed().IsZero() })
	// Election: either survivor may see it first; each is asked on its own
	// so a slow answer from one does not delay the other.
	var electOnce sync.Once
	ectx, ecancel := context.WithCancel(mctx)
	defer ecancel()
	for _, s := range survivors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at, ok := pollAt(ectx, func(ctx context.Context) bool {
				st, err := p.raftStatus(ctx, s.Addr())
				if err != nil || st.Term <= kr.OldTerm || st.LeaderID == "" || st.LeaderID == victim.ID {
					return false
				}
				mu.Lock()
				if kr.NewLeader == "" {
					kr.NewLeader, kr.NewTerm = st.LeaderID, st.Term
				}
				mu.Unlock()
				return true
			})
			if ok {
				electOnce.Do(func() {
					mu.Lock()
					kr.ElectMs = ms(at)
					mu.Unlock()
					ecancel()
				})
			}
		}()
	}
	wg.Wait()
	// The first ack's own timestamp is exact; the poll only noticed it.
	if fa := w.firstAck(); !fa.IsZero() {
		kr.FirstWriteMs = ms(fa)
	}
	if fc := w.firstConsumed(); !fc.IsZero() {
		kr.ConsumeMs = ms(fc)
	}
	var missing []string
	for name, v := range map[string]float64{"detection": kr.DetectMs, "route drop": kr.RouteDropMs, "election": kr.ElectMs,
		"route update": kr.RouteUpdateMs, "first write": kr.FirstWriteMs, "consume resume": kr.ConsumeMs} {
		if v < 0 {
			missing = append(missing, name)
		}
	}
	<-stopped
	if freeze {
		if err := c.Resume(victim); err != nil {
			return kr, err
		}
	} else if err := c.Start(victim); err != nil {
		return kr, err
	}
	if len(missing) > 0 {
		_, _, last := w.counts()
		return kr, fmt.Errorf("failover: after killing %s, not seen within %v: %v (last send error: %v)", victim.ID, timeout, missing, last)
	}
	return kr, ctx.Err()
}

// pollAt checks cond every pollInterval until it holds and returns the
// instant the successful check completed (an upper bound of when the
// condition became observable).
func pollAt(ctx context.Context, cond func(ctx context.Context) bool) (time.Time, bool) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		if cond(ctx) {
			return time.Now(), true
		}
		select {
		case <-ctx.Done():
			return time.Time{}, false
		case <-t.C:
		}
	}
}

// pollInterval is how often the probes look: 10 ms keeps the measurement
// error well below the phases measured (hundreds of ms).
const pollInterval = 10 * time.Millisecond

// waitUntil polls cond until it holds or timeout passes.
func waitUntil(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) bool) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, ok := pollAt(wctx, cond); !ok {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("not within %v", timeout)
	}
	return nil
}

// waitWhole waits until the group is whole: every node alive in the name
// server's gossip pool, all three registered with a brokerId 0 (cluster
// info: the report's topic may not exist yet), every node's /readyz
// answering 200 (leader known, log applied), every follower's log caught
// up and every member's FSM done with what Raft queued for it (caughtUp).
// Killing the leader while a restarted member still catches up is a second
// fault: the survivors cannot commit until the laggard has the new
// leader's log, and a new leader serves only once its FSM applied the log,
// so the next kill would measure that catch-up, not the failover.
func waitWhole(ctx context.Context, p *probes, timeout time.Duration) error {
	var why string
	err := waitUntil(ctx, timeout, func(ctx context.Context) bool {
		if ctx.Err() != nil {
			return false // keep the reason the last full check gave
		}
		for _, n := range p.c.Nodes {
			if n.Exited() {
				why = fmt.Sprintf("%s exited:\n%s", n.ID, n.Tail(20))
				return false
			}
		}
		live, err := p.gossipLive(ctx)
		if err != nil || live < failoverNodes {
			why = fmt.Sprintf("gossip live brokers %d (err %v)", live, err)
			return false
		}
		addrs, err := p.members(ctx)
		if err != nil || len(addrs) < failoverNodes || routeLeader(addrs) == "" {
			why = fmt.Sprintf("registered members %v (err %v)", addrs, err)
			return false
		}
		for _, n := range p.c.Nodes {
			if code := p.c.httpStatus(ctx, n.MetricsAddr(), "/readyz"); code != 200 {
				why = fmt.Sprintf("%s /readyz %d", n.ID, code)
				return false
			}
		}
		if lag := p.caughtUp(ctx); lag != "" {
			why = lag
			return false
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("failover: group not whole, ready and caught up: %w (last: %s)", err, why)
	}
	return nil
}

func nodeAddrs(c *procCluster) string {
	s := ""
	for i, n := range c.Nodes {
		if i > 0 {
			s += ", "
		}
		s += n.Addr()
	}
	return s
}
