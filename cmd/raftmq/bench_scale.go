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

// `raftmq bench scale`: the cost of a broker group as its work grows. On a
// local 3-process group (the failover report's cluster) it creates topics
// (or consumer groups) step by step and, at each step, measures the time
// the creation took, the leader's RSS, the REGISTER_BROKER body (JSON and
// RocketMQ's zlib layout, built from the leader's GET_ALL_TOPIC_CONFIG,
// which is the registration's own topic table), how long the name server
// took to route the newest topic, and the throughput of 64 synchronous
// senders to one topic. Consumer groups are created the way clients
// create them: heartbeats (autoCreateSubscriptionGroup, one retry topic
// each), repeated to every member while the throughput is measured.

type scaleBenchOpts struct {
	dir             string
	topics, groups  []int
	queues          int
	creators        int
	workers, size   int
	duration        time.Duration
	heartbeatPeriod time.Duration
	brokerConf      []string
	jsonOut         bool
	launch          proccluster.Launcher
	progress        func(string)
}

// scaleStep is one row of the table.
type scaleStep struct {
	Dimension string  // "topics" or "groups"
	Count     int     // topics created by the tool, or consumer groups
	CreateSec float64 // creating this step's new topics or groups
	// RouteSec is from the end of the creation to the name server routing
	// the newest topic (a registration round carrying it).
	RouteSec float64
	// Topics is the leader's whole topic table (system and retry topics
	// included), as registered.
	Topics             int
	RegisterJSONBytes  int
	RegisterZlibBytes  int
	LeaderRSSKiB       rss
	TPS                float64
	P50us, P99us       int64
	Failed             int64
	CreateRetries      int64 `json:",omitempty"` // creations retried (see scaleRetry)
	LoadAvg            string
	LeaderRSSAfterLoad rss
}

func newBenchScaleCmd() *cobra.Command {
	o := &scaleBenchOpts{}
	var topics, groups string
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Topic and consumer-group scaling on a local 3-process group: creation time, leader RSS, registration size and 64-sender throughput per step",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.topics, err = parseCounts(topics); err != nil {
				return err
			}
			if o.groups, err = parseCounts(groups); err != nil {
				return err
			}
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			o.launch = proccluster.Binary(bin)
			o.progress = func(s string) { fmt.Fprintln(cmd.ErrOrStderr(), time.Now().UTC().Format("15:04:05 ")+s) }
			steps, err := runScaleBench(cmd.Context(), o, zap.NewNop())
			printScaleBench(cmd.OutOrStdout(), steps, o.jsonOut)
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.dir, "dir", "", "data directory (a new temporary one by default, removed afterwards)")
	fl.StringVar(&topics, "topics", "10,1000,20000", "topic counts to step through (empty skips the topic series)")
	fl.StringVar(&groups, "groups", "1,100,1000", "consumer group counts to step through, on a fresh group with 10 topics (empty skips)")
	fl.IntVar(&o.queues, "queues", 8, "queues of every created topic")
	fl.IntVar(&o.creators, "creators", 16, "concurrent topic creations / heartbeats")
	fl.IntVarP(&o.workers, "workers", "w", 64, "synchronous senders of the throughput measurement")
	fl.IntVarP(&o.size, "size", "s", 1024, "message body size")
	fl.DurationVarP(&o.duration, "duration", "d", 15*time.Second, "throughput measurement per step")
	fl.DurationVar(&o.heartbeatPeriod, "heartbeat-period", 10*time.Second, "heartbeat period of the consumer groups while measuring")
	fl.StringArrayVar(&o.brokerConf, "broker-conf", nil, "extra broker.conf line (key=value) for every member, e.g. pprofEnable=true; repeatable")
	fl.BoolVar(&o.jsonOut, "json", false, "print the steps as JSON")
	return cmd
}

// appendBrokerConf adds lines to every member's conf file.
func appendBrokerConf(c *procCluster, lines []string) error {
	for _, n := range c.Nodes {
		f, err := os.OpenFile(n.ConfPath, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString(strings.Join(lines, "\n") + "\n")
		if err = errors.Join(err, f.Close()); err != nil {
			return err
		}
	}
	return nil
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bench scale: bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func runScaleBench(ctx context.Context, o *scaleBenchOpts, log *zap.Logger) (steps []scaleStep, err error) {
	dir := o.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "raftmq-scalebench-"); err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	}
	if len(o.topics) > 0 {
		s, err := scaleSeries(ctx, o, log, dir+"/topics", "topics", o.topics)
		steps = append(steps, s...)
		if err != nil {
			return steps, err
		}
	}
	if len(o.groups) > 0 {
		s, err := scaleSeries(ctx, o, log, dir+"/groups", "groups", o.groups)
		steps = append(steps, s...)
		if err != nil {
			return steps, err
		}
	}
	return steps, nil
}

// scaleTopic names the i-th topic the tool creates; topic 0 takes the load.
func scaleTopic(i int) string { return fmt.Sprintf("ScaleBench-%05d", i) }

// scaleSeries runs one dimension on a fresh cluster.
func scaleSeries(ctx context.Context, o *scaleBenchOpts, log *zap.Logger, dir, dim string, counts []int) (steps []scaleStep, err error) {
	say := o.progress
	c, err := newProcCluster(dir, 0, o.launch)
	if err != nil {
		return nil, err
	}
	defer c.stopAll()
	if len(o.brokerConf) > 0 {
		if err := appendBrokerConf(c, o.brokerConf); err != nil {
			return nil, err
		}
	}
	rc := remoting.NewClient(remoting.DefaultClientConfig(), log)
	defer func() { _ = rc.Close() }()
	admin, err := client.NewAdmin(client.NameServers(c.NS.Addr()), client.RequestTimeout(10*time.Second), client.WithLogger(log))
	if err != nil {
		return nil, err
	}
	defer func() { _ = admin.Close(context.Background()) }()
	p := &probes{c: c, rc: rc, admin: admin, topic: scaleTopic(0)}
	if err := c.Start(c.NS); err != nil {
		return nil, err
	}
	for _, n := range c.Nodes {
		if err := c.Start(n); err != nil {
			return nil, err
		}
	}
	if err := waitWhole(ctx, p, 60*time.Second); err != nil {
		return nil, err
	}
	leaderAddr := func() (string, error) {
		var addr string
		err := waitUntil(ctx, 30*time.Second, func(ctx context.Context) bool {
			a, err := p.members(ctx)
			addr = routeLeader(a)
			return err == nil && addr != ""
		})
		return addr, err
	}
	created := 0
	if dim == "groups" {
		// The group series runs with 10 topics.
		l, err := leaderAddr()
		if err != nil {
			return nil, err
		}
		if _, err := scaleCreateTopics(ctx, admin, l, 0, 10, o.queues, o.creators); err != nil {
			return nil, err
		}
	}
	// One heartbeat loop for the series renews the groups created so far,
	// as their consumers would.
	var hbGroups atomic.Int64
	hbCtx, hbStop := context.WithCancel(ctx)
	var hbWG sync.WaitGroup
	defer func() { hbStop(); hbWG.Wait() }()
	if dim == "groups" {
		hbWG.Add(1)
		go func() {
			defer hbWG.Done()
			t := time.NewTicker(o.heartbeatPeriod)
			defer t.Stop()
			for {
				select {
				case <-hbCtx.Done():
					return
				case <-t.C:
					if err := scaleHeartbeat(hbCtx, admin, c, int(hbGroups.Load()), o.creators); err != nil && hbCtx.Err() == nil {
						say(fmt.Sprintf("bench scale: heartbeat round: %v", err))
					}
				}
			}
		}()
	}
	for _, want := range counts {
		l, err := leaderAddr()
		if err != nil {
			return steps, err
		}
		st := scaleStep{Dimension: dim, Count: want}
		start := time.Now()
		newest := scaleTopic(want - 1)
		if dim == "topics" {
			if want > created {
				say(fmt.Sprintf("bench scale: creating topics %d..%d at %s", created, want-1, l))
				if _, err := scaleCreateTopics(ctx, admin, l, created, want, o.queues, o.creators); err != nil {
					return steps, err
				}
				created = want
			}
		} else {
			say(fmt.Sprintf("bench scale: creating consumer groups %d..%d and their retry topics at %s, then heartbeating them to every member", created, want-1, l))
			if err := scaleCreateGroups(ctx, admin, l, created, want, o.creators); err != nil {
				return steps, err
			}
			created = want
			if err := scaleHeartbeat(ctx, admin, c, want, o.creators); err != nil {
				return steps, err
			}
			hbGroups.Store(int64(want))
			newest = wire.RetryTopic(scaleGroup(want - 1))
		}
		st.CreateSec = time.Since(start).Seconds()
		st.CreateRetries = scaleRetries.Swap(0)
		routeStart := time.Now()
		if err := waitUntil(ctx, 120*time.Second, func(ctx context.Context) bool {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := admin.TopicRoute(cctx, newest)
			return err == nil
		}); err != nil {
			return steps, fmt.Errorf("bench scale: the name server does not route %s: %w", newest, err)
		}
		st.RouteSec = time.Since(routeStart).Seconds()
		if err := scaleRegistration(ctx, admin, l, &st); err != nil {
			return steps, err
		}
		leader := c.NodeByAddr(l)
		if leader == nil {
			return steps, fmt.Errorf("bench scale: leader %s is no member", l)
		}
		st.LeaderRSSKiB = procRSS(leader.PID())
		say(fmt.Sprintf("bench scale: %d %s created in %.1fs, routed %.2fs later; %d topics registered, body %d B JSON / %d B zlib; leader RSS %d KiB; measuring %v",
			want, dim, st.CreateSec, st.RouteSec, st.Topics, st.RegisterJSONBytes, st.RegisterZlibBytes, st.LeaderRSSKiB.Total, o.duration))
		bst := newBenchStats(produceMaxLatency)
		f := &benchFlags{namesrv: c.NS.Addr(), topic: scaleTopic(0), workers: o.workers, size: o.size, window: 1}
		lctx, stop := context.WithTimeout(ctx, o.duration)
		t0 := time.Now()
		err = benchProduce(lctx, stop, f, bst, log)
		stop()
		if err != nil {
			return steps, err
		}
		sum := bst.summary(true, time.Since(t0))
		st.TPS, st.P50us, st.P99us, st.Failed = sum.TPS, sum.P50us, sum.P99us, sum.Failed
		st.LoadAvg = loadAvg()
		st.LeaderRSSAfterLoad = procRSS(leader.PID())
		say(fmt.Sprintf("bench scale: %d %s: %.0f msg/s p50 %s p99 %s, %d failed, load %s, leader RSS after %d KiB",
			want, dim, st.TPS, us(st.P50us), us(st.P99us), st.Failed, st.LoadAvg, st.LeaderRSSAfterLoad.Total))
		steps = append(steps, st)
	}
	return steps, nil
}

// scaleCreateTopics creates topics [from, to) at the leader addr with n
// concurrent requests and returns how long it took.
func scaleCreateTopics(ctx context.Context, admin *client.Admin, addr string, from, to, queues, n int) (time.Duration, error) {
	start := time.Now()
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range max(n, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < to && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				spec := client.TopicSpec{Topic: scaleTopic(i), ReadQueueNums: queues, WriteQueueNums: queues, Perm: wire.PermRead | wire.PermWrite}
				if err := scaleRetry(ctx, func(c, a string) error { _, err := admin.CreateTopic(ctx, spec, c, a); return err }, addr); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("bench scale: create %s: %w", spec.Topic, err)
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), firstErr
}

// scaleRetries counts creations that failed once and were retried (a
// leadership change under load answers NOT_LEADER / SYSTEM_BUSY).
var scaleRetries atomic.Int64

// scaleRetry runs op(cluster, brokerAddr) at addr, then, while it fails,
// up to 20 more times 100 ms apart at the cluster's routed masters: the
// group may be electing; a creation that still fails ends the run.
func scaleRetry(ctx context.Context, op func(cluster, addr string) error, addr string) error {
	err := op("", addr)
	for range 20 {
		if err == nil || ctx.Err() != nil {
			return err
		}
		scaleRetries.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		err = op(failoverCluster, "")
	}
	return err
}

func scaleGroup(i int) string { return fmt.Sprintf("ScaleGroup-%04d", i) }

// scaleCreateGroups creates consumer groups [from, to) at the leader addr
// (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, as an operator does) and each
// group's retry topic with one queue, which a heartbeat would otherwise
// create at the auto-creation rate limit (autoCreateTopicMaxPerSecond, 10
// by default).
func scaleCreateGroups(ctx context.Context, admin *client.Admin, addr string, from, to, n int) error {
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make([]error, max(n, 1))
	for w := range max(n, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < to && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				g := scaleGroup(i)
				if err := scaleRetry(ctx, func(c, a string) error {
					_, err := admin.UpdateSubscriptionGroup(ctx, wire.DefaultSubscriptionGroupConfig(g), c, a)
					return err
				}, addr); err != nil {
					errs[w] = fmt.Errorf("bench scale: create group %s: %w", g, err)
					return
				}
				spec := client.TopicSpec{Topic: wire.RetryTopic(g), ReadQueueNums: 1, WriteQueueNums: 1, Perm: wire.PermRead | wire.PermWrite}
				if err := scaleRetry(ctx, func(c, a string) error { _, err := admin.CreateTopic(ctx, spec, c, a); return err }, addr); err != nil {
					errs[w] = fmt.Errorf("bench scale: create %s: %w", spec.Topic, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// scaleHeartbeat sends, to every member, one HEARTBEAT per consumer group
// 0..groups-1 (a client per group, subscribed to topic 0 with "*"), as
// push consumers do every heartbeat period.
func scaleHeartbeat(ctx context.Context, admin *client.Admin, c *procCluster, groups, n int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, max(n, 1))
	for w := range max(n, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < groups && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				g := scaleGroup(i)
				hb := wire.HeartbeatData{ClientID: "127.0.0.1@scale-" + g, ProducerDataSet: []wire.HeartbeatProducerData{},
					ConsumerDataSet: []wire.HeartbeatConsumerData{{GroupName: g, ConsumeType: wire.ConsumeTypePush,
						MessageModel: wire.Clustering.String(), ConsumeFromWhere: wire.ConsumeFromLastOffset.String(),
						SubscriptionDataSet: []*wire.SubscriptionData{{Topic: scaleTopic(0), SubString: wire.SubAll, TagsSet: []string{}, SubVersion: 1}}}}}
				body, err := json.Marshal(hb)
				if err != nil {
					errs[w] = err
					return
				}
				for _, node := range c.Nodes {
					resp, err := admin.BrokerRequest(ctx, node.Addr(), remoting.RequestHeartBeat, nil, body)
					if err == nil {
						err = remoting.ResponseError(node.Addr(), resp)
					}
					if err != nil {
						errs[w] = fmt.Errorf("bench scale: heartbeat of %s to %s: %w", g, node.Addr(), err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// scaleRegistration fills st's registration sizes from the leader's topic
// table (GET_ALL_TOPIC_CONFIG answers the registration body's wrapper).
func scaleRegistration(ctx context.Context, admin *client.Admin, addr string, st *scaleStep) error {
	resp, err := admin.BrokerRequest(ctx, addr, remoting.RequestGetAllTopicConfig, nil, nil)
	if err == nil {
		err = remoting.ResponseError(addr, resp)
	}
	if err != nil {
		return fmt.Errorf("bench scale: topic table: %w", err)
	}
	var w wire.TopicConfigSerializeWrapper
	if err := json.Unmarshal(resp.Body, &w); err != nil {
		return fmt.Errorf("bench scale: topic table: %w", err)
	}
	body := &wire.RegisterBrokerBody{TopicConfigSerializeWrapper: w, FilterServerList: []string{}}
	raw, err := wire.EncodeRegisterBrokerBody(body, false)
	if err != nil {
		return err
	}
	z, err := wire.EncodeRegisterBrokerBody(body, true)
	if err != nil {
		return err
	}
	st.Topics, st.RegisterJSONBytes, st.RegisterZlibBytes = len(w.TopicConfigTable), len(raw), len(z)
	return nil
}

// loadAvg is /proc/loadavg's 1, 5 and 15 minute figures.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func printScaleBench(out io.Writer, steps []scaleStep, jsonOut bool) {
	if jsonOut {
		b, _ := json.MarshalIndent(steps, "", "  ")
		fmt.Fprintln(out, string(b))
		return
	}
	fmt.Fprintln(out, "| work | create | route | topics registered | REGISTER_BROKER JSON / zlib | leader RSS (anon) before → after load, MiB | 64 senders msg/s | p50 / p99 | failed | load avg |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range steps {
		fmt.Fprintf(out, "| %d %s | %.1f s | %.2f s | %d | %s / %s | %d (%d) → %d (%d) | %.0f | %s / %s | %d | %s |\n",
			s.Count, s.Dimension, s.CreateSec, s.RouteSec, s.Topics, kb(s.RegisterJSONBytes), kb(s.RegisterZlibBytes),
			s.LeaderRSSKiB.Total>>10, s.LeaderRSSKiB.Anon>>10, s.LeaderRSSAfterLoad.Total>>10, s.LeaderRSSAfterLoad.Anon>>10, s.TPS, us(s.P50us), us(s.P99us), s.Failed, s.LoadAvg)
	}
}

func kb(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}
