package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// LimitsConfig holds the broker.conf keys that bound what a client can
// make a broker hold (limits under abuse; raftmq's own keys,
// RocketMQ 4.9 has none of them). Each limit, when it bites, is counted in
// raftmq_broker_limit_refusals_total{limit="<key>"} or, for the remoting
// ones, raftmq_broker_connection_limit_closes_total{limit="<key>"}, and
// its refusal names the key. The limits of the same family that predate
// this struct (maxIncompleteFrameBytes, maxBatchMessages, the queue-count
// range) stay in BrokerConfig.
type LimitsConfig struct {
	// MaxConnections bounds a listener's open connections (16384);
	// MaxConnectionsPerIP those from one remote IP (4096). A connection
	// beyond either is closed at accept.
	MaxConnections      int `prop:"maxConnections"`
	MaxConnectionsPerIP int `prop:"maxConnectionsPerIP"`
	// MaxWriteQueueBytes bounds the answers queued on one connection (16
	// MiB, one maximal frame). An answer that finds no room waits at most
	// WriteTimeout; then the connection is closed: a client that never
	// reads holds a bounded amount of memory.
	MaxWriteQueueBytes int `prop:"maxWriteQueueBytes"`
	// FrameReadTimeout bounds receiving the rest of a request frame once
	// its first byte arrived (10 s): a client trickling a frame (slowloris)
	// or leaving one half-sent is closed after it. WriteTimeout bounds one
	// flush to a connection and an answer's wait for room in its write
	// queue (10 s): past it the client is taken as not reading and closed
	// (counted under maxWriteQueueBytes). Both are at least
	// minConnTimeout and at most maxConnTimeout.
	FrameReadTimeout time.Duration `prop:"frameReadTimeoutMillis"`
	WriteTimeout     time.Duration `prop:"writeTimeoutMillis"`
	// MaxHeldPulls bounds the pulls held by long polling on this node
	// (65536) and MaxHeldPullsPerConnection those of one connection
	// (4096; a consumer holds one per queue it owns here). A pull beyond
	// either is answered at once with SYSTEM_BUSY naming the key; the
	// RocketMQ clients pull again after their exception delay.
	MaxHeldPulls              int `prop:"maxHeldPulls"`
	MaxHeldPullsPerConnection int `prop:"maxHeldPullsPerConnection"`
	// MaxClientGroupsPerConnection bounds the consumer and producer
	// groups one connection's heartbeats keep it registered in (1024):
	// each entry stays until the connection closes or stops heartbeating
	// it for channelExpiredTimeout, so heartbeats naming new groups would
	// otherwise grow the client tables without end. A group past it is
	// left out of the heartbeat's registration and the heartbeat answered
	// SYSTEM_ERROR naming the key.
	MaxClientGroupsPerConnection int `prop:"maxClientGroupsPerConnection"`
	// AutoCreateTopicMaxPerSecond bounds the topics (and, on heartbeats,
	// subscription groups with their retry topics) a node creates on a
	// client's behalf per second (10, bursts of as many: each creation is a
	// Raft entry and ConsumeQueue files on every replica, and a burst of
	// them queues the sends behind it), and
	// AutoCreateMaxTopics stops such creation once the node holds that many
	// topics (10000; every queue costs a ConsumeQueue file on every
	// replica and a route entry). updateTopic is not limited.
	AutoCreateTopicMaxPerSecond int `prop:"autoCreateTopicMaxPerSecond"`
	AutoCreateMaxTopics         int `prop:"autoCreateMaxTopics"`
	// MaxQueuedRequestBytes bounds the request frames waiting in (or run
	// by) the processors' pools on one listener, and the sends not yet
	// answered (256 MiB): a pool queue has thousands of slots, each able
	// to hold a 16 MiB frame while the workers are busy, and
	// sendThreadPoolQueueCapacity sends may wait for a stalled Raft group.
	// A request that does not fit is answered SYSTEM_BUSY at once, like a
	// full queue.
	MaxQueuedRequestBytes int `prop:"maxQueuedRequestBytes"`
}

// defaultLimits returns LimitsConfig's defaults.
func defaultLimits() LimitsConfig {
	return LimitsConfig{
		MaxConnections:               remoting.DefaultMaxConns,
		MaxConnectionsPerIP:          remoting.DefaultMaxConnsPerIP,
		MaxWriteQueueBytes:           remoting.DefaultWriteQueueBytes,
		FrameReadTimeout:             remoting.DefaultServerConfig().FrameReadTimeout,
		WriteTimeout:                 remoting.DefaultServerConfig().WriteTimeout,
		MaxHeldPulls:                 65536,
		MaxHeldPullsPerConnection:    4096,
		MaxClientGroupsPerConnection: 1024,
		AutoCreateTopicMaxPerSecond:  10,
		AutoCreateMaxTopics:          10000,
		MaxQueuedRequestBytes:        remoting.DefaultQueuedRequestBudget,
	}
}

// The range of frameReadTimeoutMillis and writeTimeoutMillis. Below a
// second, one lost segment (TCP's initial retransmission timeout is 1 s,
// RFC 6298) would close a healthy client's connection; past ten minutes a
// peer that stopped reading or sending holds its connection and buffers
// for longer than any client waits for an answer.
const (
	minConnTimeout = time.Second
	maxConnTimeout = 10 * time.Minute
)

// validate reports the keys out of range.
func (l LimitsConfig) validate() error {
	var errs []error
	for _, kv := range []struct {
		key string
		v   time.Duration
	}{{"frameReadTimeoutMillis", l.FrameReadTimeout}, {"writeTimeoutMillis", l.WriteTimeout}} {
		if kv.v < minConnTimeout || kv.v > maxConnTimeout {
			errs = append(errs, fmt.Errorf("%w: %s: %d ms out of %d..%d", ErrInvalidBrokerConfig, kv.key,
				kv.v.Milliseconds(), minConnTimeout.Milliseconds(), maxConnTimeout.Milliseconds()))
		}
	}
	for _, kv := range []struct {
		key string
		v   int
	}{
		{"maxConnections", l.MaxConnections}, {"maxConnectionsPerIP", l.MaxConnectionsPerIP},
		{"maxWriteQueueBytes", l.MaxWriteQueueBytes}, {"maxHeldPulls", l.MaxHeldPulls},
		{"maxHeldPullsPerConnection", l.MaxHeldPullsPerConnection},
		{"maxClientGroupsPerConnection", l.MaxClientGroupsPerConnection},
		{"autoCreateTopicMaxPerSecond", l.AutoCreateTopicMaxPerSecond}, {"autoCreateMaxTopics", l.AutoCreateMaxTopics},
		{"maxQueuedRequestBytes", l.MaxQueuedRequestBytes},
	} {
		if kv.v < 1 {
			errs = append(errs, fmt.Errorf("%w: %s: %d must be positive", ErrInvalidBrokerConfig, kv.key, kv.v))
		}
	}
	return errors.Join(errs...)
}

// applyServer copies the remoting limits into a listener's config.
func (l LimitsConfig) applyServer(s *remoting.ServerConfig) {
	s.MaxConns, s.MaxConnsPerIP, s.WriteQueueBytes = l.MaxConnections, l.MaxConnectionsPerIP, l.MaxWriteQueueBytes
	s.FrameReadTimeout, s.WriteTimeout = l.FrameReadTimeout, l.WriteTimeout
	s.QueuedRequestBudget = int64(l.MaxQueuedRequestBytes)
}

// registerLimitMetrics exports the remoting limits' closes.
func (c *Controller) registerLimitMetrics(reg prometheus.Registerer) {
	desc := prometheus.NewDesc(metricsNamespace+"_connection_limit_closes_total",
		"Connections closed by a remoting limit: at accept (maxConnections, maxConnectionsPerIP), for not reading "+
			"(maxWriteQueueBytes), for an incomplete frame over maxIncompleteFrameBytes or for a frame not complete "+
			"within frameReadTimeoutMillis.", []string{"limit"}, nil)
	reg.MustRegister(collectorFunc{desc: desc, collect: func(ch chan<- prometheus.Metric) {
		var sum remoting.LimitCounts
		for _, s := range []*remoting.Server{c.srv, c.vip} {
			if s != nil {
				n := s.LimitCounts()
				sum.ConnsRefused += n.ConnsRefused
				sum.ConnsRefusedPerIP += n.ConnsRefusedPerIP
				sum.WriteStalls += n.WriteStalls
				sum.IncompleteFrames += n.IncompleteFrames
				sum.FrameTimeouts += n.FrameTimeouts
			}
		}
		for _, v := range []struct {
			limit string
			n     int64
		}{{"maxConnections", sum.ConnsRefused}, {"maxConnectionsPerIP", sum.ConnsRefusedPerIP},
			{"maxWriteQueueBytes", sum.WriteStalls}, {"maxIncompleteFrameBytes", sum.IncompleteFrames},
			{"frameReadTimeoutMillis", sum.FrameTimeouts}} {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v.n), v.limit)
		}
	}})
}

// collectorFunc is a prometheus.Collector of one description.
type collectorFunc struct {
	desc    *prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (f collectorFunc) Describe(ch chan<- *prometheus.Desc) { ch <- f.desc }
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f.collect(ch) }

// autoCreateLimiter is a token bucket over the node's client-triggered
// topic and group creations.
type autoCreateLimiter struct {
	now func() time.Time // the clock; nil is time.Now (tests set their own)

	mu     sync.Mutex
	tokens float64   // guarded by mu
	last   time.Time // guarded by mu
}

// take spends one token at rate perSecond (bursts of perSecond).
func (l *autoCreateLimiter) take(perSecond int) bool {
	clock := l.now
	if clock == nil {
		clock = time.Now
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := clock() // under mu: concurrent takers see the clock in order
	burst := float64(perSecond)
	if l.last.IsZero() {
		l.tokens = burst
	} else {
		l.tokens = min(burst, l.tokens+now.Sub(l.last).Seconds()*float64(perSecond))
	}
	l.last = now
	if l.tokens < 1 {
		return false
	}
	l.tokens--
	return true
}

// autoCreateRefusal checks a client-triggered creation of what (a topic
// or group name) against autoCreateMaxTopics and
// autoCreateTopicMaxPerSecond: nil to go ahead, else the refusal (counted).
func (c *Controller) autoCreateRefusal(what string) *remoting.RemotingCommand {
	l := c.live().LimitsConfig
	// The rate first: it is cheap, and it bounds the topic-table copies
	// the count costs.
	if !c.autoCreate.take(l.AutoCreateTopicMaxPerSecond) {
		return c.refuse("autoCreateTopicMaxPerSecond", remoting.ResponseSystemBusy,
			"auto-creation of %s refused: broker %s creates at most %d topics per second (autoCreateTopicMaxPerSecond); retry later or create it with updateTopic",
			what, c.cfg.BrokerName, l.AutoCreateTopicMaxPerSecond)
	}
	if n := len(c.rep.State().Topics()); n >= l.AutoCreateMaxTopics {
		return c.refuse("autoCreateMaxTopics", remoting.ResponseSystemError,
			"auto-creation of %s refused: broker %s holds %d topics, autoCreateMaxTopics is %d; create it with updateTopic",
			what, c.cfg.BrokerName, n, l.AutoCreateMaxTopics)
	}
	return nil
}

// autoCreateTopic is ensureTopic for a topic a client's request names:
// an existing topic is returned as is; a missing one is created only
// within the auto-creation limits. Concurrent requests for one missing
// topic share one creation and one autoCreateTopicMaxPerSecond token (the
// first burst of a new service names the same topic from many senders;
// RocketMQ serializes them under a lock, and the later ones find the topic
// created). The creation outlives a requester that leaves: the others
// wait on it.
func (c *Controller) autoCreateTopic(ctx context.Context, topic string, queueNums int) (wire.TopicConfig, *remoting.RemotingCommand) {
	if tc, ok := c.rep.State().Topic(topic); ok {
		return tc, nil
	}
	type created struct {
		tc      wire.TopicConfig
		refused *remoting.RemotingCommand // never written: each requester answers a copy
	}
	ch := c.autoCreating.DoChan(topic, func() (any, error) {
		if tc, ok := c.rep.State().Topic(topic); ok {
			return created{tc: tc}, nil
		}
		if r := c.autoCreateRefusal("topic " + topic); r != nil {
			return created{refused: r}, nil
		}
		tc, err := c.ensureTopic(context.WithoutCancel(ctx), topic, queueNums, 0, true)
		if err != nil {
			return created{tc: tc, refused: c.writeError("auto-create topic "+topic, err)}, nil
		}
		return created{tc: tc}, nil
	})
	select {
	case res := <-ch:
		cr := res.Val.(created)
		if cr.refused == nil {
			return cr.tc, nil
		}
		r := *cr.refused
		r.ExtFields = maps.Clone(r.ExtFields)
		return cr.tc, &r
	case <-ctx.Done():
		return wire.TopicConfig{}, c.writeError("auto-create topic "+topic, ctx.Err())
	}
}

// sealProducerID replaces an idempotent producer's id by its SHA-256
// (128 bits, hex) before the message is stored. The dedup table is keyed
// by what is stored, and stored properties are readable by any consumer:
// with the client's id stored as is, anyone could send seq = 2^62 under
// it and make that producer's later sends "duplicates" (acked, never
// stored). The client's id is a random 128-bit secret it sends only to
// brokers; reading the stored digest does not let another client send
// under it, since the digest of the digest differs. The same id gives the
// same digest on every broker, so dedup still works across the SDK's
// retries and reconnects to a new leader.
func sealProducerID(props map[string]string) {
	if pid, ok := props[wire.PropertyProducerID]; ok && pid != "" {
		props[wire.PropertyProducerID] = producerDigest(pid)
	}
}

// producerDigest is the stored form of a producer id.
func producerDigest(pid string) string {
	sum := sha256.Sum256([]byte(pid))
	return hex.EncodeToString(sum[:16])
}
