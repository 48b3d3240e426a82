package broker

import (
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/raftmq/raftmq/internal/httpmon"
	"github.com/raftmq/raftmq/remoting"
)

// Metrics and health over HTTP on metricsPort (listenPort+3 by default):
// /metrics (Prometheus text, a registry per broker node), /health and
// /debug/pprof/. See internal/httpmon.

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
	gauge("consumer_groups", "Consumer groups with clients known from heartbeats.", func() float64 { return float64(len(c.clients.groups())) })
	if ra, ok := c.rep.(RaftAdmin); ok {
		reg.MustRegister(&raftCollector{ra: ra})
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
// per-follower lag is left to `raftmq admin raftStatus`, which asks every
// member.
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
}

// ready reports readiness for /readyz: serving, a leader known, and this
// member's FSM caught up with the commit index it knows (a restarted node
// replaying its log is live but not ready).
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
	return ok, b
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
	c.mon = httpmon.New(net.JoinHostPort(c.cfg.ListenAddr, strconv.Itoa(port)), c.metrics.reg, c.health, c.log.Named("http"))
	c.mon.SetReady(c.ready)
}

// instrument wraps a processor with the request metrics.
func (c *Controller) instrument(h remoting.HandlerFunc) remoting.HandlerFunc {
	return c.metrics.requests.Wrap(h)
}
