package broker

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Per-topic and per-group traffic series (the rocketmq-exporter mapping is
// in docs/metrics.md):
//
//	raftmq_broker_topic_put_messages_total{topic}      acknowledged sends
//	raftmq_broker_topic_put_bytes_total{topic}         their body bytes
//	raftmq_broker_group_get_messages_total{group,topic} messages pulled
//	raftmq_broker_group_get_bytes_total{group,topic}    stored bytes pulled
//
// Cardinality is bounded: the first trafficMaxTopics topics and the first
// trafficMaxGroupTopics group/topic pairs a node sees get their own
// series; traffic of any later one is added to the series labelled
// trafficOtherLabel, so totals stay right, and
// raftmq_broker_traffic_series_overflow_total{table} counts the requests
// that went there. Series live until the process restarts (a deleted
// topic's counters stay, as counters should).
//
// The send and pull paths pay one atomic pointer load, one map lookup and
// two atomic adds per request (not per message), and allocate nothing once
// a key has its counter: the key→counter map is copy-on-write, replaced
// under a mutex only when a new key arrives.
const (
	trafficMaxTopics      = 1000
	trafficMaxGroupTopics = 2000
	trafficOtherLabel     = "__other__"
)

// trafficCounter is one series pair: messages and bytes.
type trafficCounter struct{ msgs, bytes atomic.Uint64 }

func (c *trafficCounter) add(msgs, bytes int) {
	c.msgs.Add(uint64(msgs))
	c.bytes.Add(uint64(bytes))
}

// trafficTable maps keys to counters, up to max keys.
type trafficTable[K comparable] struct {
	max      int
	clone    func(K) K // copies a key's strings before they are kept
	m        atomic.Pointer[map[K]*trafficCounter]
	mu       sync.Mutex // serializes copy-on-write inserts
	other    trafficCounter
	overflow atomic.Uint64
}

func newTrafficTable[K comparable](max int, clone func(K) K) *trafficTable[K] {
	t := &trafficTable[K]{max: max, clone: clone}
	m := map[K]*trafficCounter{}
	t.m.Store(&m)
	return t
}

// counter returns k's counter, or the overflow counter once the table is
// full.
func (t *trafficTable[K]) counter(k K) *trafficCounter {
	if c, ok := (*t.m.Load())[k]; ok {
		return c
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := *t.m.Load()
	if c, ok := cur[k]; ok {
		return c
	}
	if len(cur) >= t.max {
		t.overflow.Add(1)
		return &t.other
	}
	next := make(map[K]*trafficCounter, len(cur)+1)
	for key, c := range cur {
		next[key] = c
	}
	c := &trafficCounter{}
	// The request's strings may alias a frame buffer that is reused.
	next[t.clone(k)] = c
	t.m.Store(&next)
	return c
}

// groupTopic keys the pull table.
type groupTopic struct{ group, topic string }

// trafficStats is the per-topic and per-group collector.
type trafficStats struct {
	put *trafficTable[string]
	get *trafficTable[groupTopic]
}

func newTrafficStats() *trafficStats {
	return &trafficStats{
		put: newTrafficTable(trafficMaxTopics, strings.Clone),
		get: newTrafficTable(trafficMaxGroupTopics, func(k groupTopic) groupTopic {
			return groupTopic{strings.Clone(k.group), strings.Clone(k.topic)}
		}),
	}
}

// countPut records an acknowledged send of msgs messages, bytes body bytes.
func (s *trafficStats) countPut(topic string, msgs, bytes int) {
	if topic == trafficOtherLabel { // its own series would duplicate the overflow series
		s.put.other.add(msgs, bytes)
		return
	}
	s.put.counter(topic).add(msgs, bytes)
}

// countGet records a pull that returned msgs messages, bytes stored bytes.
func (s *trafficStats) countGet(group, topic string, msgs, bytes int) {
	if group == trafficOtherLabel {
		s.get.other.add(msgs, bytes)
		return
	}
	s.get.counter(groupTopic{group, topic}).add(msgs, bytes)
}

var (
	topicPutMsgsDesc = prometheus.NewDesc(metricsNamespace+"_topic_put_messages_total",
		"Messages acknowledged to producers, by topic ("+trafficOtherLabel+": topics past the series cap).", []string{"topic"}, nil)
	topicPutBytesDesc = prometheus.NewDesc(metricsNamespace+"_topic_put_bytes_total",
		"Body bytes of acknowledged messages, by topic ("+trafficOtherLabel+": topics past the series cap).", []string{"topic"}, nil)
	groupGetMsgsDesc = prometheus.NewDesc(metricsNamespace+"_group_get_messages_total",
		"Messages returned to pulls, by consumer group and topic ("+trafficOtherLabel+": pairs past the series cap).", []string{"group", "topic"}, nil)
	groupGetBytesDesc = prometheus.NewDesc(metricsNamespace+"_group_get_bytes_total",
		"Stored-message bytes returned to pulls, by consumer group and topic ("+trafficOtherLabel+": pairs past the series cap).", []string{"group", "topic"}, nil)
	trafficOverflowDesc = prometheus.NewDesc(metricsNamespace+"_traffic_series_overflow_total",
		"Requests counted under "+trafficOtherLabel+" because their topic (table=topic) or group/topic pair (table=group) came after the series cap.",
		[]string{"table"}, nil)
)

// Describe implements prometheus.Collector.
func (s *trafficStats) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{topicPutMsgsDesc, topicPutBytesDesc, groupGetMsgsDesc, groupGetBytesDesc, trafficOverflowDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (s *trafficStats) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for topic, c := range *s.put.m.Load() {
		counter(topicPutMsgsDesc, c.msgs.Load(), topic)
		counter(topicPutBytesDesc, c.bytes.Load(), topic)
	}
	if s.put.overflow.Load() > 0 || s.put.other.msgs.Load() > 0 {
		counter(topicPutMsgsDesc, s.put.other.msgs.Load(), trafficOtherLabel)
		counter(topicPutBytesDesc, s.put.other.bytes.Load(), trafficOtherLabel)
	}
	for k, c := range *s.get.m.Load() {
		counter(groupGetMsgsDesc, c.msgs.Load(), k.group, k.topic)
		counter(groupGetBytesDesc, c.bytes.Load(), k.group, k.topic)
	}
	if s.get.overflow.Load() > 0 || s.get.other.msgs.Load() > 0 {
		counter(groupGetMsgsDesc, s.get.other.msgs.Load(), trafficOtherLabel, trafficOtherLabel)
		counter(groupGetBytesDesc, s.get.other.bytes.Load(), trafficOtherLabel, trafficOtherLabel)
	}
	counter(trafficOverflowDesc, s.put.overflow.Load(), "topic")
	counter(trafficOverflowDesc, s.get.overflow.Load(), "group")
}

// MetricNames lists the metric families a broker node's /metrics serves
// once it has traffic, consumer offsets and (on the leader) followers:
// the names a dashboard or alert may rely on (histograms by their base
// name: _bucket, _sum and _count follow). TestTopicGroupMetricsLive
// checks each against a live scrape; deploy's dashboard test checks every
// dashboard query against this list.
var MetricNames = []string{
	"raftmq_broker_acks_before_fsync",
	"raftmq_broker_apply_dispatch_failures_total",
	"raftmq_broker_apply_dispatch_retried_total",
	"raftmq_broker_apply_stopped",
	"raftmq_broker_catchup_bytes_left",
	"raftmq_broker_catchup_pace_bytes_per_second",
	"raftmq_broker_catchup_pending",
	"raftmq_broker_commitlog_max_offset_bytes",
	"raftmq_broker_commitlog_min_offset_bytes",
	"raftmq_broker_consumer_groups",
	"raftmq_broker_consumer_lag_messages",
	"raftmq_broker_consumer_lag_series_dropped_total",
	"raftmq_broker_disk_full",
	"raftmq_broker_disk_used_ratio",
	"raftmq_broker_elections_won_total",
	"raftmq_broker_group_get_bytes_total",
	"raftmq_broker_group_get_messages_total",
	"raftmq_broker_incomplete_frame_bytes",
	"raftmq_broker_incomplete_frame_refusals_total",
	"raftmq_broker_leader",
	"raftmq_broker_long_polls_held",
	"raftmq_broker_pull_bytes_total",
	"raftmq_broker_pull_messages_total",
	"raftmq_broker_put_bytes_total",
	"raftmq_broker_put_messages_total",
	"raftmq_broker_raft_applied_index",
	"raftmq_broker_raft_batch_requests",
	"raftmq_broker_raft_commit_index",
	"raftmq_broker_raft_follower_lag_entries",
	"raftmq_broker_raft_follower_last_status_seconds",
	"raftmq_broker_raft_fsm_pending",
	"raftmq_broker_raft_last_contact_seconds",
	"raftmq_broker_raft_last_log_index",
	"raftmq_broker_raft_last_snapshot_index",
	"raftmq_broker_raft_log_flush_bytes",
	"raftmq_broker_raft_log_flush_seconds",
	"raftmq_broker_raft_state",
	"raftmq_broker_raft_term",
	"raftmq_broker_request_duration_seconds",
	"raftmq_broker_requests_total",
	"raftmq_broker_role_changes_total",
	"raftmq_broker_timer_delivered_total",
	"raftmq_broker_timer_fire_delay_seconds",
	"raftmq_broker_timer_index_buckets",
	"raftmq_broker_timer_skipped_total",
	"raftmq_broker_topic_put_bytes_total",
	"raftmq_broker_topic_put_messages_total",
	"raftmq_broker_traffic_series_overflow_total",
	"raftmq_broker_transaction_checking_halves",
	"raftmq_broker_transaction_checks_total",
	"raftmq_broker_transaction_commits_total",
	"raftmq_broker_transaction_decided_halves",
	"raftmq_broker_transaction_discarded_total",
	"raftmq_broker_transaction_repeated_ends_total",
	"raftmq_broker_transaction_rollbacks_total",
}
