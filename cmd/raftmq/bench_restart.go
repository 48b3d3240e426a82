package main

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/freeport"
	"github.com/raftmq/raftmq/internal/proccluster"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// `raftmq bench restart`: how long a group holding a large CommitLog
// takes to serve again after its processes restart. It fills a local
// 3-process group to --fill bytes of CommitLog per member (once: a rerun
// on the same --dir reuses the data and its ports), stops every member
// (SIGTERM, or SIGKILL with --kill), starts them again and times, from
// the start of the processes, every member's /readyz, the first
// acknowledged send and the first pull of offset 0 of a queue (the
// oldest message, written first).

type restartBenchOpts struct {
	dir      string
	fill     int64
	size     int
	senders  int
	kill     bool
	rounds   int
	members  int
	jsonOut  bool
	launch   proccluster.Launcher
	progress func(string)
}

// restartRound is one restart's timings, from the processes' start.
type restartRound struct {
	Kill                 bool
	CommitLogBytes       int64 // on the first member, before the restart
	ReadyMs              []float64
	FirstSendMs          float64
	FirstOldPullMs       float64
	StopMs               float64 // SIGTERM to exit (0 with --kill)
	LoadAvg              string
	LeaderAfter          string
	ReadyzLastMs         float64
	FirstSendLeaderError string `json:",omitempty"`
}

const restartTopic = "RestartBench"

func newBenchRestartCmd() *cobra.Command {
	o := &restartBenchOpts{}
	var fill string
	cmd := &cobra.Command{
		Use:   "restart",
		Short: "Restart a local 3-process group holding --fill bytes of CommitLog and time readiness, the first send and the first pull of an old offset",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := parseBytes(fill)
			if err != nil {
				return err
			}
			o.fill = n
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			o.launch = proccluster.Binary(bin)
			o.progress = func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), time.Now().UTC().Format("15:04:05 ")+s) }
			rounds, err := runRestartBench(cmd.Context(), o, zap.NewNop())
			for _, r := range rounds {
				if o.jsonOut {
					b, _ := json.Marshal(r)
					fmt.Fprintln(cmd.OutOrStdout(), string(b))
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "restart (kill %v) with %.2f GiB of CommitLog per member: readyz %v ms, first send %.0f ms, first pull of offset 0 %.0f ms, stop %.0f ms, load %s\n",
					r.Kill, float64(r.CommitLogBytes)/(1<<30), r.ReadyMs, r.FirstSendMs, r.FirstOldPullMs, r.StopMs, r.LoadAvg)
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.dir, "dir", "", "data directory (required: kept for reruns)")
	fl.StringVar(&fill, "fill", "8GiB", "CommitLog bytes per member to reach before restarting (suffix KiB, MiB, GiB)")
	fl.IntVarP(&o.size, "size", "s", 64<<10, "message body size of the fill")
	fl.IntVar(&o.senders, "senders", 32, "concurrent synchronous senders of the fill")
	fl.BoolVar(&o.kill, "kill", false, "SIGKILL the members instead of SIGTERM")
	fl.IntVar(&o.rounds, "rounds", 1, "restarts")
	fl.IntVar(&o.members, "members", 3, "members of the group: 3, or 1 (a one-member Raft group: the member's own start-up without an election among peers)")
	fl.BoolVar(&o.jsonOut, "json", false, "print each round as JSON")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if strings.HasSuffix(s, u.suf) {
			s, mult = strings.TrimSuffix(s, u.suf), u.m
			break
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	// !(b < MaxInt64) also refuses NaN and Inf, which ParseFloat accepts
	// and int64() would turn into a negative size.
	if b := n * float64(mult); err != nil || n < 0 || !(b < math.MaxInt64) {
		return 0, fmt.Errorf("bench restart: bad size %q", s)
	}
	return int64(n * float64(mult)), nil
}

// treeBytes sums the sizes of the regular files under dir.
func treeBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func runRestartBench(ctx context.Context, o *restartBenchOpts, log *zap.Logger) ([]restartRound, error) {
	say := o.progress
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return nil, err
	}
	// The group's Raft configuration names its ports: a rerun on the same
	// data must listen where the first run did.
	portFile := filepath.Join(o.dir, "base-port")
	base := 0
	if b, err := os.ReadFile(portFile); err == nil {
		base, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if base == 0 {
		p, err := freeport.Block(40)
		if err != nil {
			return nil, err
		}
		base = p
		if err := os.WriteFile(portFile, []byte(strconv.Itoa(base)), 0o644); err != nil {
			return nil, err
		}
	}
	c, err := newProcCluster(o.dir, base, o.launch)
	if err != nil {
		return nil, err
	}
	defer c.stopAll()
	if o.members == 1 {
		if err := restartOneMember(c); err != nil {
			return nil, err
		}
	} else if o.members != 3 && o.members != 0 { // 0: the default, 3
		return nil, fmt.Errorf("bench restart: --members %d: 1 or 3", o.members)
	}
	rc := remoting.NewClient(remoting.DefaultClientConfig(), log)
	defer func() { _ = rc.Close() }()
	admin, err := client.NewAdmin(client.NameServers(c.NS.Addr()), client.RequestTimeout(2*time.Second), client.WithLogger(log))
	if err != nil {
		return nil, err
	}
	defer func() { _ = admin.Close(context.Background()) }()
	p := &probes{c: c, rc: rc, admin: admin, topic: restartTopic}
	if err := c.Start(c.NS); err != nil {
		return nil, err
	}
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			return nil, err
		}
	}
	if err := restartWaitReady(ctx, c, p, 120*time.Second); err != nil {
		return nil, err
	}
	if err := waitUntil(ctx, 30*time.Second, func(ctx context.Context) bool {
		m, err := p.members(ctx)
		if err != nil || routeLeader(m) == "" {
			return false
		}
		_, err = admin.CreateTopic(ctx, client.TopicSpec{Topic: restartTopic, ReadQueueNums: 8, WriteQueueNums: 8}, "", routeLeader(m))
		return err == nil
	}); err != nil {
		return nil, err
	}
	clDir := filepath.Join(c.Nodes[0].DataDir, "commitlog")
	pullOld := p.oldPull()
	// The CommitLog's preallocated segment alone may reach a small
	// --fill; the probe's message at offset 0 of queue 0 is needed too.
	if have, seeded := treeBytes(clDir), pullOld(ctx); have < o.fill || !seeded {
		say(fmt.Sprintf("bench restart: %.2f GiB of CommitLog on %s; filling to %.2f GiB with %d-byte messages", float64(have)/(1<<30), c.Nodes[0].ID, float64(o.fill)/(1<<30), o.size))
		if err := restartFill(ctx, c.NS.Addr(), o, log, func() int64 { return treeBytes(clDir) }, !seeded, say); err != nil {
			return nil, err
		}
	}
	var rounds []restartRound
	for range max(o.rounds, 1) {
		r, err := restartOnce(ctx, c, p, o, clDir, pullOld, log, say)
		rounds = append(rounds, r)
		if err != nil {
			return rounds, err
		}
	}
	return rounds, nil
}

// restartFill sends o.size-byte messages with o.senders synchronous
// senders until have (the first member's CommitLog bytes) reaches o.fill;
// with seed, the first of them goes to queue 0, the old-offset probe's.
func restartFill(ctx context.Context, ns string, o *restartBenchOpts, log *zap.Logger, have func() int64, seed bool, say func(string)) error {
	prod, err := client.NewProducer(client.NameServers(ns), client.WithLogger(log), client.SendTimeout(30*time.Second))
	if err != nil {
		return err
	}
	if err := prod.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = prod.Close(context.Background()) }()
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	// Random bodies: the SDK compresses bodies above 4 KiB, and a
	// repetitive one would store a fraction of its size.
	body := make([]byte, o.size)
	_, _ = crand.Read(body)
	if seed {
		if _, err := prod.SendWithSelector(ctx, client.NewMessage(restartTopic, body), client.ManualSelector(probeQueue)); err != nil {
			return fmt.Errorf("bench restart: first message to queue 0 of %s: %w", restartTopic, err)
		}
	}
	var sent, failed atomic.Int64
	var wg sync.WaitGroup
	for range max(o.senders, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for fctx.Err() == nil {
				if _, err := prod.SendSync(fctx, client.NewMessage(restartTopic, body)); err != nil {
					if fctx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				sent.Add(1)
			}
		}()
	}
	start := time.Now()
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for have() < o.fill {
		select {
		case <-ctx.Done():
			stop()
			wg.Wait()
			return ctx.Err()
		case <-t.C:
			n := sent.Load()
			say(fmt.Sprintf("bench restart: %d messages (%.2f GiB) sent, %d failed, %.0f MB/s; %.2f GiB of CommitLog", n, float64(n)*float64(o.size)/(1<<30), failed.Load(),
				float64(n)*float64(o.size)/time.Since(start).Seconds()/1e6, float64(have())/(1<<30)))
		}
	}
	stop()
	wg.Wait()
	return nil
}

// probeQueue is the queue whose offset 0 the old-offset probe pulls.
var probeQueue = client.MessageQueue{Topic: restartTopic, BrokerName: failoverGroup, QueueID: 0}

// oldPull is the old-offset probe: the leader serves the message at
// offset 0 of probeQueue.
func (p *probes) oldPull() func(context.Context) bool {
	sub := &client.SubscriptionData{Topic: restartTopic, SubString: wire.SubAll, TagsSet: []string{}}
	return func(ctx context.Context) bool {
		m, err := p.members(ctx)
		if err != nil || routeLeader(m) == "" {
			return false
		}
		res, err := p.admin.PullQueueAt(ctx, routeLeader(m), "restart_bench", probeQueue, 0, 1, sub)
		return err == nil && res.Status == client.PullFound && len(res.Messages) > 0 && res.Messages[0].QueueOffset == 0
	}
}

func restartOnce(ctx context.Context, c *procCluster, p *probes, o *restartBenchOpts, clDir string, pullOld func(context.Context) bool,
	log *zap.Logger, say func(string)) (restartRound, error) {
	r := restartRound{Kill: o.kill, CommitLogBytes: treeBytes(clDir)}
	if !pullOld(ctx) {
		return r, fmt.Errorf("bench restart: queue 0 of %s has no message at offset 0 to pull after the restart (fill first)", restartTopic)
	}
	stopStart := time.Now()
	if o.kill {
		for _, n := range c.Nodes {
			if _, err := c.Kill(n); err != nil {
				return r, err
			}
		}
	} else {
		var wg sync.WaitGroup
		for _, n := range c.Nodes {
			wg.Add(1)
			go func() { defer wg.Done(); c.Stop(n, 60*time.Second) }()
		}
		wg.Wait()
		r.StopMs = ms(time.Since(stopStart))
	}
	say(fmt.Sprintf("bench restart: members stopped (kill %v) with %.2f GiB of CommitLog each; starting them", o.kill, float64(r.CommitLogBytes)/(1<<30)))
	// The name server still routes the stopped members until it drops
	// them; the probes below retry through that.
	start := time.Now()
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			return r, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	r.ReadyMs = make([]float64, len(c.Nodes))
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if at, ok := pollAt(rctx, func(ctx context.Context) bool { return c.httpStatus(ctx, n.MetricsAddr(), "/readyz") == 200 }); ok {
				r.ReadyMs[i] = ms(at.Sub(start))
			}
		}()
	}
	wg.Add(1)
	var sendErr error
	go func() {
		defer wg.Done()
		prod, err := client.NewProducer(client.NameServers(c.NS.Addr()), client.WithLogger(log), client.SendTimeout(time.Second))
		if err == nil {
			err = prod.Start(rctx)
		}
		if err != nil {
			sendErr = err
			return
		}
		defer func() { _ = prod.Close(context.Background()) }()
		if at, ok := pollAt(rctx, func(ctx context.Context) bool {
			_, err := prod.SendSync(ctx, client.NewMessage(restartTopic, []byte("after restart")))
			return err == nil
		}); ok {
			r.FirstSendMs = ms(at.Sub(start))
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if at, ok := pollAt(rctx, pullOld); ok {
			r.FirstOldPullMs = ms(at.Sub(start))
		}
	}()
	wg.Wait()
	r.LoadAvg = loadAvg()
	for _, v := range r.ReadyMs {
		r.ReadyzLastMs = max(r.ReadyzLastMs, v)
	}
	if m, err := p.members(ctx); err == nil {
		r.LeaderAfter = routeLeader(m)
	}
	if sendErr != nil {
		r.FirstSendLeaderError = sendErr.Error()
	}
	say(fmt.Sprintf("bench restart: readyz %v ms, first send %.0f ms, first pull of offset 0 %.0f ms (load %s)", r.ReadyMs, r.FirstSendMs, r.FirstOldPullMs, r.LoadAvg))
	if r.FirstSendMs == 0 || r.FirstOldPullMs == 0 {
		return r, errors.Join(sendErr, fmt.Errorf("bench restart: the group did not serve within 5 minutes"))
	}
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// restartOneMember shrinks c to its first member, a group of one: its
// conf names only itself as a Raft peer.
func restartOneMember(c *procCluster) error {
	n := c.Nodes[0]
	c.Nodes = c.Nodes[:1]
	b, err := os.ReadFile(n.ConfPath)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "dLegerPeers=") {
			lines[i] = fmt.Sprintf("dLegerPeers=%s-%s:%d", n.ID, n.Host, n.RaftPort)
		}
	}
	return os.WriteFile(n.ConfPath, []byte(strings.Join(lines, "\n")), 0o644)
}

// restartWaitReady waits until the name server knows the group's leader
// and every member's /readyz answers 200.
func restartWaitReady(ctx context.Context, c *procCluster, p *probes, timeout time.Duration) error {
	return waitUntil(ctx, timeout, func(ctx context.Context) bool {
		m, err := p.members(ctx)
		if err != nil || routeLeader(m) == "" {
			return false
		}
		for _, n := range c.Nodes {
			if n.Exited() || c.httpStatus(ctx, n.MetricsAddr(), "/readyz") != 200 {
				return false
			}
		}
		return true
	})
}
