package broker

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/raftmq/raftmq/internal/httpmon"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/storage"
)

// Metrics and health over HTTP on metricsPort (listenPort+3 by default):
// /metrics (Prometheus text, a registry per broker node), /health and
// /debug/pprof/. See internal/httpmon. Series (prefix raftmq_broker_):
// requests and their latency by code; put/pull messages and bytes; held
// long polls; disk_full; leader; consumer_groups; Raft state, term and
// indexes (raftCollector); role_changes_total and elections_won_total;
// raft_log_flush_seconds/bytes (group_metrics.go); disk_used_ratio and
// commitlog_min/max_offset_bytes, consumer_lag_messages{group,topic} with
// its cap (storeCollector); raft_follower_lag_entries and
// raft_follower_last_status_seconds on the leader (followerLag);
// topic_put_* and group_get_* by topic and group, capped (metrics_topic.go);
// transaction_commits/rollbacks/repeated_ends/checks/discarded_total and
// transaction_decided/checking_halves (txn.go).

// controller lifecycle states reported by /health.
const (
	stateStarting int32 = iota
	stateServing
	stateStopping
)

// brokerMetrics holds the node's registry and the collectors the request
// path updates (plain counters: one atomic add each).
type brokerMetrics struct {
	reg       *prometheus.Registry
	requests  *httpmon.RequestMetrics
	putMsgs   prometheus.Counter
	putBytes  prometheus.Counter
	pullMsgs  prometheus.Counter
	pullBytes prometheus.Counter
	// diskFull is set when a write fails for lack of disk space and
	// cleared by the next successful write.
	diskFull atomic.Bool
	// roleChanges counts OnRoleChange calls; electionsWon those to leader.
	roleChanges  prometheus.Counter
	electionsWon prometheus.Counter
	// lagDropped counts consumer-lag series left out by the series cap.
	lagDropped prometheus.Counter
	// followers is the leader's view of its followers (lag poller).
	followers *followerLag
	// limitRefusals counts requests refused by a limit against abuse, by
	// limit (a fixed set: see Controller.refuse).
	limitRefusals *prometheus.CounterVec
	// traffic is the per-topic and per-group series (metrics_topic.go).
	traffic *trafficStats
}

const metricsNamespace = "raftmq_broker"

func newBrokerMetrics(c *Controller) *brokerMetrics {
	reg := prometheus.NewRegistry()
	m := &brokerMetrics{reg: reg, requests: httpmon.NewRequestMetrics(reg, metricsNamespace)}
	counter := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help})
		reg.MustRegister(x)
		return x
	}
	m.traffic = newTrafficStats()
	reg.MustRegister(m.traffic)
	m.putMsgs = counter("put_messages_total", "Messages acknowledged to producers (after Raft commit).")
	m.putBytes = counter("put_bytes_total", "Body bytes of acknowledged messages.")
	m.pullMsgs = counter("pull_messages_total", "Messages returned to pulls.")
	m.pullBytes = counter("pull_bytes_total", "Stored-message bytes returned to pulls.")
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: name, Help: help}, f))
	}
	gauge("long_polls_held", "Pull requests parked by long polling.", func() float64 { return float64(c.hold.heldCount()) })
	gauge("disk_full", "1 while writes are refused for lack of disk space.", func() float64 { return b2f(m.diskFull.Load()) })
	gauge("leader", "1 while this node is the Raft leader past its barrier (serves writes).", func() float64 { return b2f(c.rep.IsLeader()) })
	gauge("acks_before_fsync", "1 when the Raft log acknowledges appends before they are fsynced (flushDiskType=ASYNC_FLUSH with raftAcksBeforeFsync=true): a crash of a majority at once can lose acknowledged messages.",
		func() float64 { return b2f(c.cfg.AcksBeforeFsync()) })
	gauge("consumer_groups", "Consumer groups with clients known from heartbeats.", func() float64 { return float64(len(c.clients.groups())) })
	if ra, ok := c.rep.(RaftAdmin); ok {
		reg.MustRegister(&raftCollector{ra: ra})
		m.followers = newFollowerLag(c, ra)
		reg.MustRegister(m.followers)
	}
	if gc, ok := c.rep.(groupCollectors); ok {
		reg.MustRegister(gc.metricsCollectors()...)
	}
	m.roleChanges = counter("role_changes_total", "Role changes seen by this node's controller (became leader or stopped leading).")
	m.electionsWon = counter("elections_won_total", "Times this node became the serving leader (past its barrier) while its controller ran.")
	c.rep.OnRoleChange(func(leader bool, _ uint64) {
		m.roleChanges.Inc()
		if leader {
			m.electionsWon.Inc()
		}
	})
	m.limitRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "limit_refusals_total",
		Help: "Requests refused by a limit against abuse, by limit (maxQueueNums, maxBatchMessages, offsetCommit, maxHeldPulls, maxHeldPullsPerConnection, maxClientGroupsPerConnection, autoCreateTopicMaxPerSecond, autoCreateMaxTopics)."}, []string{"limit"})
	reg.MustRegister(m.limitRefusals)
	c.registerLimitMetrics(reg)
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "incomplete_frame_refusals_total",
		Help: "Connections closed because their incomplete frame did not fit in maxIncompleteFrameBytes."}, func() float64 {
		return float64(c.sumServers((*remoting.Server).IncompleteFrameRefusals))
	}))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "queued_request_refusals_total",
		Help: "Requests answered SYSTEM_BUSY because the frames queued for processors were at maxQueuedRequestBytes."}, func() float64 {
		return float64(c.sumServers((*remoting.Server).QueuedRequestRefusals))
	}))
	gauge("incomplete_frame_bytes", "Memory held by request frames still arriving (bounded per listener by maxIncompleteFrameBytes).",
		func() float64 { return float64(c.sumServers((*remoting.Server).IncompleteFrameBytes)) })
	m.lagDropped = counter("consumer_lag_series_dropped_total",
		"Consumer-lag group/topic series left out of a scrape by the cap of "+strconv.Itoa(consumerLagMaxSeries)+" (summed over scrapes).")
	if c.st != nil {
		reg.MustRegister(&storeCollector{c: c, m: m})
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// raftCollector reads raft.Stats() once per scrape. hashicorp/raft does
// not expose the leader's per-follower match index or last contact, so
// per-follower lag comes from followerLag, which asks every follower.
type raftCollector struct{ ra RaftAdmin }

var raftDescs = map[string]*prometheus.Desc{
	"term":                desc("raft_term", "Current Raft term."),
	"last_log_index":      desc("raft_last_log_index", "Index of the last entry in the local log."),
	"commit_index":        desc("raft_commit_index", "Highest index known committed."),
	"applied_index":       desc("raft_applied_index", "Highest index applied to the FSM."),
	"last_snapshot_index": desc("raft_last_snapshot_index", "Index of the last snapshot."),
	"fsm_pending":         desc("raft_fsm_pending", "Committed entries waiting to be applied."),
}

var (
	raftStateDesc       = prometheus.NewDesc(metricsNamespace+"_raft_state", "1 for the node's current Raft state.", []string{"state"}, nil)
	raftLastContactDesc = desc("raft_last_contact_seconds", "Time since this node last heard from the leader (0 on the leader, -1 never).")
)

func desc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(metricsNamespace+"_"+name, help, nil, nil)
}

// Describe implements prometheus.Collector.
func (r *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range raftDescs {
		ch <- d
	}
	ch <- raftStateDesc
	ch <- raftLastContactDesc
}

// Collect implements prometheus.Collector.
func (r *raftCollector) Collect(ch chan<- prometheus.Metric) {
	rf := r.ra.Raft()
	if rf == nil {
		return
	}
	stats := rf.Stats()
	for key, d := range raftDescs {
		if v, err := strconv.ParseUint(stats[key], 10, 64); err == nil {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
		}
	}
	state := rf.State().String()
	for _, s := range []string{"Follower", "Candidate", "Leader", "Shutdown"} {
		ch <- prometheus.MustNewConstMetric(raftStateDesc, prometheus.GaugeValue, b2f(s == state), s)
	}
	contact := -1.0
	switch lc := rf.LastContact(); {
	case state == "Leader":
		contact = 0
	case !lc.IsZero():
		contact = time.Since(lc).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(raftLastContactDesc, prometheus.GaugeValue, contact)
}

// healthBody is /health's JSON.
type healthBody struct {
	State  string `json:"state"` // starting, serving, stopping
	Role   string `json:"role"`  // leader or follower
	Leader string `json:"leader"`
	Term   uint64 `json:"term"`
}

// health reports 200 while the controller serves (leaders and followers
// alike: followers serve pulls) and 503 while starting or stopping.
func (c *Controller) health() (bool, any) {
	b := healthBody{Role: "follower", Leader: c.rep.LeaderAddr(), Term: c.term.Load()}
	if c.rep.IsLeader() {
		b.Role = "leader"
	}
	if ra, ok := c.rep.(RaftAdmin); ok && ra.Raft() != nil {
		if t, err := strconv.ParseUint(ra.Raft().Stats()["term"], 10, 64); err == nil {
			b.Term = t
		}
	}
	st := c.state.Load()
	b.State = [...]string{"starting", "serving", "stopping"}[st]
	return st == stateServing, b
}

// readyBody is /readyz's JSON: health plus the Raft indexes it judged.
type readyBody struct {
	healthBody
	CommitIndex  uint64 `json:"commitIndex"`
	AppliedIndex uint64 `json:"appliedIndex"`
	// FSMAppliedIndex is the last entry the FSM applied (appliedIndex,
	// Raft's, counts entries queued for it).
	FSMAppliedIndex uint64 `json:"fsmAppliedIndex"`
	// ApplyStopped is set when this member's FSM stopped (never ready).
	ApplyStopped string `json:"applyStopped,omitempty"`
	// LogStopped is the write failure that stopped this member's Raft
	// log: it stores and acknowledges nothing until it recovers (not
	// ready meanwhile).
	LogStopped string `json:"logStopped,omitempty"`
	// LogDamaged is the damage found in this member's log (never ready).
	LogDamaged string `json:"logDamaged,omitempty"`
	// CatchingUp says why a follower is not ready yet: its log is behind
	// the leader's commit index, or the leader did not answer.
	CatchingUp string `json:"catchingUp,omitempty"`
}

// ready reports readiness for /readyz: serving, a leader known, this
// member's log caught up with its leader's (checkLogCaughtUp), and its FSM
// caught up with the commit index it knows (a restarted node replaying its
// log is live but not ready: Raft's applied index reaches the commit index
// long before its FSM, see fsmLag).
func (c *Controller) ready() (bool, any) {
	serving, hb := c.health()
	b := readyBody{healthBody: hb.(healthBody)}
	ok := serving && b.Leader != ""
	if ra, ok2 := c.rep.(RaftAdmin); ok2 && ra.Raft() != nil {
		st := ra.Raft().Stats()
		b.CommitIndex, _ = strconv.ParseUint(st["commit_index"], 10, 64)
		b.AppliedIndex, _ = strconv.ParseUint(st["applied_index"], 10, 64)
		ok = ok && b.AppliedIndex >= b.CommitIndex
	}
	if fl, ok2 := c.rep.(fsmLag); ok2 {
		b.FSMAppliedIndex = fl.FSMAppliedIndex()
		ok = ok && fl.FSMCaughtUp()
	}
	// Raft's applied index moves past entries a stopped FSM refused.
	if as, ok2 := c.rep.(applyStopper); ok2 {
		if err := as.ApplyStopped(); err != nil {
			b.ApplyStopped, ok = err.Error(), false
		}
	}
	if dm, ok2 := c.rep.(interface{ LogDamaged() error }); ok2 {
		if err := dm.LogDamaged(); err != nil {
			b.LogDamaged, ok = err.Error(), false
		}
	}
	// A follower whose log stopped keeps its applied and commit indexes
	// equal while the group moves on without it: stopping the next member
	// in a rolling restart would leave the group without a quorum.
	if ls, ok2 := c.rep.(interface{ LogStopped() error }); ok2 {
		if err := ls.LogStopped(); err != nil {
			b.LogStopped, ok = err.Error(), false
		}
	}
	if ok && !c.logCaughtUp.Load() {
		ok = c.checkLogCaughtUp(&b)
	}
	return ok, b
}

// readyAskTimeout bounds /readyz's ask of the leader, below a probe's
// usual timeout (Kubernetes: 1 s).
const readyAskTimeout = 500 * time.Millisecond

// checkLogCaughtUp reports whether this member holds the log up to about
// its leader's commit index, and remembers a yes. A restarted follower
// learns its leader from the first heartbeat, while the entries committed
// during its absence are still on their way; its own commit index only
// counts entries it holds, so applied >= commit says nothing about them.
// A rolling restart that went on at that point would stop the next member
// while this one still lags: writes would wait for its catch-up. So until
// it once held the leader's commit index (give or take one batch), the
// leader is asked for it (RAFT_STATUS, as the join check asks).
func (c *Controller) checkLogCaughtUp(b *readyBody) bool {
	ra, ok := c.rep.(RaftAdmin)
	if !ok || ra.Raft() == nil || c.rep.IsLeader() {
		c.logCaughtUp.Store(true)
		return true
	}
	ctx, cancel := context.WithTimeout(c.ctx, readyAskTimeout)
	defer cancel()
	st, err := c.peers.status(ctx, b.Leader)
	if err != nil {
		b.CatchingUp = "cannot ask the leader for its commit index: " + err.Error()
		return false
	}
	if st.State != raft.Leader.String() {
		// A deposed leader's commit index may be behind the group's.
		b.CatchingUp = fmt.Sprintf("%s answers as %s, not as the leader", b.Leader, st.State)
		return false
	}
	last := ra.Raft().LastIndex()
	if last+uint64(max(c.cfg.Raft.MaxAppendEntries, 1)) < st.CommitIndex {
		b.CatchingUp = fmt.Sprintf("log at index %d, the leader's commit index is %d", last, st.CommitIndex)
		return false
	}
	c.logCaughtUp.Store(true)
	return true
}

// MetricsAddr is the monitoring HTTP address ("" when metricsPort is -1).
func (c *Controller) MetricsAddr() string {
	if c.mon == nil {
		return ""
	}
	return c.mon.Addr()
}

// newMonitor builds the HTTP server unless metricsPort is -1.
func (c *Controller) newMonitor() {
	port := c.cfg.MetricsPort
	if port < 0 {
		return
	}
	if port == 0 {
		port = c.cfg.ListenPort + 3
	}
	c.mon = httpmon.New(net.JoinHostPort(c.cfg.MetricsBindAddr, strconv.Itoa(port)), c.metrics.reg, c.health, c.log.Named("http"))
	if c.cfg.PprofEnable {
		c.mon.EnablePprof()
	}
	c.mon.SetReady(c.ready)
}

// sumServers adds f over the remoting listeners (main and VIP).
func (c *Controller) sumServers(f func(*remoting.Server) int64) int64 {
	var n int64
	for _, s := range []*remoting.Server{c.srv, c.vip} {
		if s != nil {
			n += f(s)
		}
	}
	return n
}

// instrument wraps a processor with the request metrics.
func (c *Controller) instrument(h remoting.HandlerFunc) remoting.HandlerFunc {
	return c.metrics.requests.Wrap(h)
}

// consumerLagMaxSeries caps the consumer-lag series per scrape: group/topic
// pairs in sorted order, the rest counted in consumer_lag_series_dropped_total.
// A broker with many short-lived groups would otherwise grow the scrape
// without bound.
const consumerLagMaxSeries = 1000

var (
	diskUsedRatioDesc = desc("disk_used_ratio", "Used fraction (0..1) of the file system holding storePathRootDir.")
	clMinOffsetDesc   = desc("commitlog_min_offset_bytes", "CommitLog's first retained physical offset.")
	clMaxOffsetDesc   = desc("commitlog_max_offset_bytes", "CommitLog's end physical offset.")
	consumerLagDesc   = prometheus.NewDesc(metricsNamespace+"_consumer_lag_messages",
		"Per consumer group and topic with committed offsets, sum over the topic's queues of ConsumeQueue max offset minus committed offset (0 for a queue without a commit, as RocketMQ's consumeStats).",
		[]string{"group", "topic"}, nil)
)

// storeCollector reads disk use, CommitLog bounds and consumer lag at scrape
// time (nothing to maintain on the write path).
type storeCollector struct {
	c *Controller
	m *brokerMetrics
}

// Describe implements prometheus.Collector.
func (s *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- diskUsedRatioDesc
	ch <- clMinOffsetDesc
	ch <- clMaxOffsetDesc
	ch <- consumerLagDesc
}

// Collect implements prometheus.Collector.
func (s *storeCollector) Collect(ch chan<- prometheus.Metric) {
	fsys := s.c.cfg.Store.FS
	if r, ok := s.c.rep.(interface{ storeFS() storage.FS }); ok {
		fsys = r.storeFS() // a Group's own parts, which may not be the config's
	}
	if fsys == nil {
		fsys = storage.OSFS()
	}
	if used, total, err := fsys.DiskUsage(s.c.cfg.Store.StorePathRootDir); err == nil && total > 0 {
		ch <- prometheus.MustNewConstMetric(diskUsedRatioDesc, prometheus.GaugeValue, float64(used)/float64(total))
	}
	if cl := s.c.st.CommitLog(); cl != nil {
		ch <- prometheus.MustNewConstMetric(clMinOffsetDesc, prometheus.GaugeValue, float64(cl.MinOffset()))
		ch <- prometheus.MustNewConstMetric(clMaxOffsetDesc, prometheus.GaugeValue, float64(cl.MaxOffset()))
	}
	// A closed store holds no queues: every lag would read 0. A scrape
	// while the broker stops leaves the series out instead (no data, not
	// a backlog gone).
	closed := false
	maxOffset := func(topic string, queueID int32) int64 {
		_, hi, err := s.c.st.QueueRange(topic, queueID)
		closed = closed || err != nil
		return hi
	}
	lags, dropped := consumerLag(s.c.rep.State(), maxOffset, consumerLagMaxSeries)
	if closed {
		return
	}
	for _, l := range lags {
		ch <- prometheus.MustNewConstMetric(consumerLagDesc, prometheus.GaugeValue, float64(l.lag), l.group, l.topic)
	}
	if dropped > 0 {
		s.m.lagDropped.Add(float64(dropped))
	}
}

// groupTopicLag is one consumer-lag series.
type groupTopicLag struct {
	group, topic string
	lag          int64
}

// consumerLag sums, per group and topic with committed offsets, the
// messages between each queue's committed offset and its max offset (a
// commit past the max, e.g. after a reset, counts 0). A queue of the topic
// the group has not committed on counts from 0, as in RocketMQ's
// consumeStats (which rocketmq_group_diff sums): a consumer that never
// got past a queue's first message is lag, not nothing. The first max
// pairs in topic@group order are returned; dropped says how many were
// left out.
func consumerLag(st StateReader, maxOffset func(topic string, queueID int32) int64, max int) (out []groupTopicLag, dropped int) {
	table := st.ConsumerOffsets()
	keys := slices.Sorted(maps.Keys(table))
	for _, k := range keys {
		// RocketMQ's offsetTable key is topic@group; neither name may
		// contain '@'.
		topic, group, ok := strings.Cut(k, "@")
		if !ok {
			continue
		}
		if len(out) == max {
			dropped++
			continue
		}
		committed := table[k]
		var lag int64
		for q, off := range committed {
			if d := maxOffset(topic, q) - off; d > 0 {
				lag += d
			}
		}
		if tc, ok := st.Topic(topic); ok {
			for q := range int32(tc.ReadQueueNums) {
				if _, ok := committed[q]; !ok && maxOffset(topic, q) > 0 {
					lag += maxOffset(topic, q)
				}
			}
		}
		out = append(out, groupTopicLag{group: group, topic: topic, lag: lag})
	}
	return out, dropped
}

// followerLagInterval is how often the leader asks each follower for its
// RAFT_STATUS; followerLagTimeout bounds one such call.
const (
	followerLagInterval = 2 * time.Second
	followerLagTimeout  = time.Second
)

var (
	followerLagDesc = prometheus.NewDesc(metricsNamespace+"_raft_follower_lag_entries",
		"Leader only: leader last log index minus the follower's, both as of the follower's last RAFT_STATUS answer.",
		[]string{"follower"}, nil)
	followerStatusAgeDesc = prometheus.NewDesc(metricsNamespace+"_raft_follower_last_status_seconds",
		"Leader only: time since the follower last answered RAFT_STATUS (-1 never during this leadership).",
		[]string{"follower"}, nil)
)

// followerLag is the leader's per-follower replication lag. hashicorp/raft
// keeps the leader's match index private, so while this node leads, a
// goroutine (started by Controller.start, stopped by its quit channel)
// asks every follower for RAFT_STATUS (30001) every followerLagInterval
// through the controller's remoting client, and a role change to leader
// polls at once. Followers' remoting addresses come from the replicated
// member table (members that once led) or else the name servers' cluster
// info (brokerId = position in the live configuration + 1), checked against the
// answering member's Raft id.
type followerLag struct {
	c    *Controller
	ra   RaftAdmin
	kick chan struct{}

	// mu guards seen: Raft id → last answer, rewritten by the poller and
	// read by scrapes; emptied whenever this node is not leader.
	mu   sync.Mutex
	seen map[string]followerStatus
}

// followerStatus is one follower's last answer.
type followerStatus struct {
	lag int64
	at  time.Time // zero: never answered in this leadership
}

func newFollowerLag(c *Controller, ra RaftAdmin) *followerLag {
	f := &followerLag{c: c, ra: ra, kick: make(chan struct{}, 1), seen: map[string]followerStatus{}}
	c.rep.OnRoleChange(func(leader bool, _ uint64) {
		if leader {
			select {
			case f.kick <- struct{}{}:
			default:
			}
		}
	})
	// Controller.start runs f.run as a tracked goroutine (stopped by
	// Shutdown); it idles until the controller serves and this node leads.
	return f
}

func (f *followerLag) run() {
	t := time.NewTicker(followerLagInterval)
	defer t.Stop()
	for {
		select {
		case <-f.c.quit:
			return
		case <-t.C:
		case <-f.kick:
		}
		f.poll()
	}
}

// poll runs one round: every other voter's status while this node leads.
func (f *followerLag) poll() {
	rf := f.ra.Raft()
	if f.c.state.Load() != stateServing || rf == nil || !f.c.rep.IsLeader() {
		f.mu.Lock()
		clear(f.seen)
		f.mu.Unlock()
		return
	}
	cf := rf.GetConfiguration()
	if cf.Error() != nil {
		return
	}
	self := f.ra.SelfID()
	var route map[int64]string // fetched at most once per round
	fetched := false
	var ids []string
	for _, s := range cf.Configuration().Servers {
		id := string(s.ID)
		if id == self {
			continue
		}
		ids = append(ids, id)
		addr := f.memberAddr(id)
		if addr == "" {
			if !fetched {
				route, fetched = f.route(), true
			}
			addr = f.registeredAddr(route, id)
		}
		if addr == "" {
			continue
		}
		st, err := f.status(addr)
		if err != nil || st.SelfID != id {
			continue
		}
		leaderLast, _ := strconv.ParseUint(rf.Stats()["last_log_index"], 10, 64)
		f.mu.Lock()
		f.seen[id] = followerStatus{lag: max(int64(leaderLast)-int64(st.LastLogIndex), 0), at: time.Now()}
		f.mu.Unlock()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.seen {
		if !slices.Contains(ids, id) {
			delete(f.seen, id) // removed from the configuration
		}
	}
	for _, id := range ids {
		if _, ok := f.seen[id]; !ok {
			f.seen[id] = followerStatus{}
		}
	}
}

// memberAddr is the replicated member table's address for a Raft id.
func (f *followerLag) memberAddr(id string) string {
	if mt, ok := f.c.rep.State().(interface{ memberAddr(string) string }); ok {
		return mt.memberAddr(id)
	}
	return ""
}

// route is the name servers' address table of this broker group
// (brokerId → address).
func (f *followerLag) route() map[int64]string {
	return f.c.peers.route(f.c.ctx, followerLagTimeout)
}

// registeredAddr maps a Raft id to the address registered under its
// follower brokerId (memberBrokerIDOf).
func (f *followerLag) registeredAddr(route map[int64]string, id string) string {
	slot, ok := memberBrokerIDOf(f.c.rep, &f.c.cfg, id)
	if !ok {
		return ""
	}
	return route[slot]
}

// status asks one member for RAFT_STATUS.
func (f *followerLag) status(addr string) (*RaftStatus, error) {
	return f.statusWithin(f.c.ctx, addr)
}

// statusWithin is status, ending with ctx too.
func (f *followerLag) statusWithin(ctx context.Context, addr string) (*RaftStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, followerLagTimeout)
	defer cancel()
	return f.c.peers.status(ctx, addr)
}

// Describe implements prometheus.Collector.
func (f *followerLag) Describe(ch chan<- *prometheus.Desc) {
	ch <- followerLagDesc
	ch <- followerStatusAgeDesc
}

// Collect implements prometheus.Collector: nothing unless this node leads.
func (f *followerLag) Collect(ch chan<- prometheus.Metric) {
	if !f.c.rep.IsLeader() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, s := range f.seen {
		if s.at.IsZero() {
			ch <- prometheus.MustNewConstMetric(followerStatusAgeDesc, prometheus.GaugeValue, -1, id)
			continue
		}
		ch <- prometheus.MustNewConstMetric(followerLagDesc, prometheus.GaugeValue, float64(s.lag), id)
		ch <- prometheus.MustNewConstMetric(followerStatusAgeDesc, prometheus.GaugeValue, time.Since(s.at).Seconds(), id)
	}
}
