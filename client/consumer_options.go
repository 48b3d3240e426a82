package client

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/raftmq/raftmq/wire"
)

// The consumer enums are wire's (they travel in heartbeats); the SDK
// names them too because its options (Model, ConsumeFrom) take them and
// user code reads better as client.Broadcasting than wire.Broadcasting.

// MessageModel says how a group shares a topic (RocketMQ's MessageModel).
type MessageModel = wire.MessageModel

// Message models.
const (
	// Clustering: each message goes to one consumer of the group; queues
	// are divided by rebalancing and offsets live on the brokers.
	Clustering = wire.Clustering
	// Broadcasting: every consumer of the group gets every message; each
	// keeps its own offsets in a local file.
	Broadcasting = wire.Broadcasting
)

// ConsumeFromWhere says where a group with no recorded offset for a queue
// starts (RocketMQ's ConsumeFromWhere).
type ConsumeFromWhere = wire.ConsumeFromWhere

// Where a group without a recorded offset starts.
const (
	// ConsumeFromLastOffset starts at the queue's end: only new messages.
	// A queue still starting at 0 with recent messages (a young topic, or
	// a queue added to one) starts at 0: the broker answers the group's
	// offset query with 0 there, as RocketMQ's does.
	ConsumeFromLastOffset = wire.ConsumeFromLastOffset
	// ConsumeFromFirstOffset starts at the oldest message still stored.
	ConsumeFromFirstOffset = wire.ConsumeFromFirstOffset
	// ConsumeFromTimestamp starts at the first message stored at or after
	// the ConsumeTimestamp option (SEARCH_OFFSET_BY_TIMESTAMP, 29).
	ConsumeFromTimestamp = wire.ConsumeFromTimestamp
)

// ConsumerOpt is an option for NewPushConsumer and NewLitePullConsumer.
// Every Opt is one too.
type ConsumerOpt interface {
	applyConsumer(*consumerConfig)
}

type consumerOpt func(*consumerConfig)

func (o consumerOpt) applyConsumer(c *consumerConfig) { o(c) }

// consumerConfig is a consumer's validated configuration. The timing
// fields are config rather than constants so tests can shorten them.
type consumerConfig struct {
	common           commonConfig
	group            string
	model            MessageModel
	fromWhere        ConsumeFromWhere
	consumeTimestamp time.Time
	strategy         AllocateStrategy

	consumeGoroutines  int
	batchMaxSize       int
	pullBatchSize      int
	thresholdCount     int
	thresholdSize      int64
	maxSpan            int64
	maxReconsumeTimes  int
	suspendCurrentTime time.Duration

	pollSuspend       time.Duration // broker-side long-poll hold
	pollTimeout       time.Duration // client-side wait for a long poll
	pullBackoff       time.Duration // after an unexpected pull error
	flowControlDelay  time.Duration // re-check interval while over a threshold
	rebalanceInterval time.Duration
	heartbeatInterval time.Duration
	persistInterval   time.Duration
	lockInterval      time.Duration
	lockRetryDelay    time.Duration
	handoverTimeout   time.Duration
	sendBackRetry     time.Duration
	consumeTimeout    time.Duration

	offsetDir string

	autoCommit bool
}

// DefaultConsumerGroup is DefaultMQPushConsumer's default group name. A
// consumer of it is refused, as RocketMQ's checkConfig refuses it: every
// application that left the group unset would share it and consume a
// share of the others' queues.
const DefaultConsumerGroup = "DEFAULT_CONSUMER"

// newConsumerConfig applies opts (nil ones skipped) over the defaults and
// validates the result; both consumer kinds build their config with it.
func newConsumerConfig(opts []ConsumerOpt) (consumerConfig, error) {
	cfg := defaultConsumerConfig()
	for _, o := range opts {
		if o != nil {
			o.applyConsumer(&cfg)
		}
	}
	return cfg, cfg.validate()
}

func defaultConsumerConfig() consumerConfig {
	home, _ := os.UserHomeDir()
	return consumerConfig{
		common:             defaultCommonConfig(),
		group:              "",
		strategy:           AllocateAveragely(),
		consumeGoroutines:  20,
		batchMaxSize:       1,
		pullBatchSize:      32,
		thresholdCount:     1000,
		thresholdSize:      100 << 20,
		maxSpan:            2000,
		maxReconsumeTimes:  -1,
		suspendCurrentTime: time.Second,
		pollSuspend:        20 * time.Second,
		pollTimeout:        30 * time.Second,
		pullBackoff:        3 * time.Second,
		flowControlDelay:   50 * time.Millisecond,
		rebalanceInterval:  20 * time.Second,
		heartbeatInterval:  30 * time.Second,
		persistInterval:    5 * time.Second,
		lockInterval:       20 * time.Second,
		lockRetryDelay:     time.Second,
		handoverTimeout:    10 * time.Second,
		sendBackRetry:      5 * time.Second,
		consumeTimeout:     15 * time.Minute,
		offsetDir:          filepath.Join(home, ".rocketmq_offsets"),
		autoCommit:         true,
	}
}

func (c *consumerConfig) validate() error {
	if err := c.common.validate(); err != nil {
		return err
	}
	if !validGroup(c.group, maxConsumerGroupLength) {
		return fmt.Errorf("%w: ConsumerGroup %q: required, 1..%d characters of %%|a-zA-Z0-9_- (its retry topic %%RETRY%%group must fit %d)",
			ErrInvalidOption, c.group, maxConsumerGroupLength, wire.MaxTopicLength)
	}
	if c.group == DefaultConsumerGroup {
		return fmt.Errorf("%w: ConsumerGroup %s is the default group applications share; name a group of your own", ErrInvalidOption, c.group)
	}
	if c.model != Clustering && c.model != Broadcasting {
		return fmt.Errorf("%w: ConsumerModel %d: want Clustering or Broadcasting", ErrInvalidOption, c.model)
	}
	if c.fromWhere < ConsumeFromLastOffset || c.fromWhere > ConsumeFromTimestamp {
		return fmt.Errorf("%w: ConsumeFrom %d: unknown", ErrInvalidOption, c.fromWhere)
	}
	if c.strategy == nil {
		return fmt.Errorf("%w: Strategy: nil", ErrInvalidOption)
	}
	checks := []struct {
		name     string
		v, lo, h int64
	}{
		{"ConsumeGoroutines", int64(c.consumeGoroutines), 1, 1000},
		{"ConsumeMessageBatchMaxSize", int64(c.batchMaxSize), 1, 1024},
		{"PullBatchSize", int64(c.pullBatchSize), 1, 1024},
		{"PullThresholdForQueue", int64(c.thresholdCount), 1, 65535},
		{"PullThresholdSizeForQueue (MiB)", c.thresholdSize >> 20, 1, 1024},
		{"ConsumeConcurrentlyMaxSpan", c.maxSpan, 1, 65535},
		{"MaxReconsumeTimes", int64(c.maxReconsumeTimes), -1, 10000},
	}
	for _, k := range checks {
		if k.v < k.lo || k.v > k.h {
			return fmt.Errorf("%w: %s %d: want %d..%d", ErrInvalidOption, k.name, k.v, k.lo, k.h)
		}
	}
	durs := []struct {
		name string
		d    time.Duration
	}{
		{"SuspendCurrentQueueTime", c.suspendCurrentTime}, {"long-poll suspend", c.pollSuspend},
		{"PullBackoff", c.pullBackoff}, {"RebalanceInterval", c.rebalanceInterval},
		{"HeartbeatInterval", c.heartbeatInterval}, {"PersistInterval", c.persistInterval},
		{"LockInterval", c.lockInterval}, {"HandoverTimeout", c.handoverTimeout},
		{"ConsumeTimeout", c.consumeTimeout},
	}
	for _, d := range durs {
		if d.d < time.Millisecond {
			return fmt.Errorf("%w: %s %v: want at least 1ms", ErrInvalidOption, d.name, d.d)
		}
	}
	if c.pollTimeout <= c.pollSuspend {
		return fmt.Errorf("%w: LongPolling: client timeout %v must exceed the broker suspend %v", ErrInvalidOption, c.pollTimeout, c.pollSuspend)
	}
	if c.model == Broadcasting && c.offsetDir == "" {
		return fmt.Errorf("%w: OffsetDir: broadcasting needs a directory for its offsets file", ErrInvalidOption)
	}
	return nil
}

// ConsumerGroup sets the consumer group. Required; DefaultConsumerGroup
// is refused.
func ConsumerGroup(name string) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.group = name })
}

// ConsumerModel chooses Clustering (the default) or Broadcasting.
func ConsumerModel(m MessageModel) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.model = m })
}

// ConsumeFrom sets where a queue without a recorded offset starts
// (default ConsumeFromLastOffset): neither a committed one nor one this
// consumer kept for a queue it handed over and got back. For ConsumeFromTimestamp give the time
// with ConsumeTimestamp (default: half an hour ago, as RocketMQ). The
// group's retry queues always start at their beginning: what they hold
// was sent back by the group and not consumed yet.
func ConsumeFrom(w ConsumeFromWhere) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.fromWhere = w })
}

// ConsumeTimestamp sets the time ConsumeFromTimestamp starts at.
func ConsumeTimestamp(t time.Time) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.consumeTimestamp = t })
}

// Strategy sets the queue allocation strategy of clustering consumers
// (default AllocateAveragely).
func Strategy(s AllocateStrategy) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.strategy = s })
}

// ConsumeGoroutines sets the concurrent listener's pool size (default 20,
// consumeThreadMin).
func ConsumeGoroutines(n int) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.consumeGoroutines = n })
}

// ConsumeMessageBatchMaxSize sets how many messages one concurrent
// listener call gets at most (default 1).
func ConsumeMessageBatchMaxSize(n int) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.batchMaxSize = n })
}

// PullBatchSize sets maxMsgNums of each pull (default 32).
func PullBatchSize(n int) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.pullBatchSize = n })
}

// PullThresholdForQueue stops pulling a queue while this many of its
// messages are cached unconsumed (default 1000).
func PullThresholdForQueue(n int) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.thresholdCount = n })
}

// PullThresholdSizeForQueue stops pulling a queue while this many MiB of
// its message bodies are cached unconsumed (default 100).
func PullThresholdSizeForQueue(mib int) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.thresholdSize = int64(mib) << 20 })
}

// ConsumeConcurrentlyMaxSpan stops pulling a queue while the offsets of
// its cached messages span more than n (default 2000): one stuck message
// must not let the cache, and the redelivery after a crash, grow without
// bound.
func ConsumeConcurrentlyMaxSpan(n int) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.maxSpan = int64(n) })
}

// MaxReconsumeTimes sets how often a failed message is redelivered before
// it moves to the dead-letter queue %DLQ%group. The default, -1, means 16
// for concurrent listeners and no limit for orderly ones, as in RocketMQ.
func MaxReconsumeTimes(n int) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.maxReconsumeTimes = n })
}

// SuspendCurrentQueueTime sets how long an orderly listener's queue pauses
// after SuspendCurrentQueueAMoment (default 1 s).
func SuspendCurrentQueueTime(d time.Duration) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.suspendCurrentTime = d })
}

// LongPolling sets how long a broker may hold a pull with nothing to
// return (default 20 s) and how long the client waits for it (default
// 30 s; must be longer).
func LongPolling(suspend, timeout time.Duration) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.pollSuspend, c.pollTimeout = suspend, timeout })
}

// PullBackoff sets the pause after a pull failed unexpectedly (default 3 s,
// pullTimeDelayMillsWhenException).
func PullBackoff(d time.Duration) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.pullBackoff = d })
}

// RebalanceInterval sets the periodic rebalance (default 20 s); a
// NOTIFY_CONSUMER_IDS_CHANGED from a broker triggers one at once.
func RebalanceInterval(d time.Duration) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.rebalanceInterval = d })
}

// HeartbeatInterval sets how often heartbeats go to the brokers (default 30 s).
func HeartbeatInterval(d time.Duration) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.heartbeatInterval = d })
}

// PersistInterval sets how often consumed offsets are committed (default
// 5 s). A push consumer commits only then, on hand-over and on Close: its
// pulls carry no offset (doc.go). So the group's progress as tools show it
// trails by up to this interval, and a consumer that crashes redelivers up
// to this interval's messages (a Java consumer's pulls commit as well).
func PersistInterval(d time.Duration) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.persistInterval = d })
}

// LockInterval sets how often an orderly consumer renews its queue locks
// (default 20 s; brokers expire them after 60 s).
func LockInterval(d time.Duration) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.lockInterval = d })
}

// HandoverTimeout bounds how long a rebalance waits for a listener call
// on a queue that is being handed to another consumer (default 10 s). A
// concurrent call that returned in time and is still sending failed
// messages back is waited for beyond it, up to the request timeout; one
// that returns later has its result discarded. An orderly queue keeps its
// broker lock until its call returns, and that result counts.
func HandoverTimeout(d time.Duration) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.handoverTimeout = d })
}

// ConsumeTimeout bounds how long a concurrent listener call may hold its
// messages (default 15 min, DefaultMQPushConsumer.consumeTimeout). Every
// ConsumeTimeout the push consumer looks at the lowest offsets it holds
// of each queue (up to 16, as RocketMQ's cleanExpiredMsg): a message whose
// listener call began more than ConsumeTimeout ago is sent back for
// redelivery through the group's retry topic (delay level 3; it counts
// toward MaxReconsumeTimes) and let go, so the queue's committed offset
// moves past it; a broadcasting consumer, which never redelivers, lets it
// go with a warning. The call itself runs on (Go cannot stop it; its ctx
// is not cancelled) and its result, when it returns, is ignored for the
// messages let go. A message whose send-back fails stays held: its call's
// result settles it if the call returns first, else it is tried again a
// ConsumeTimeout later. A message is thus let go between one and two
// ConsumeTimeouts after its call began, its send-back permitting.
// Orderly listeners are not timed out, as in RocketMQ: their queue waits
// for the call.
func ConsumeTimeout(d time.Duration) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.consumeTimeout = d })
}

// OffsetDir sets the directory of broadcasting consumers' offset files
// (default ~/.rocketmq_offsets); the file is <dir>/<InstanceName>/<group>/offsets.json,
// so a restarted consumer with the same InstanceName resumes where it stopped.
// Each file must have one writer: broadcasting consumers of a group that
// share a directory (processes on one host, a shared file system) need an
// InstanceName each, or each rewrites the file with its own offsets and a
// restart resumes at another's.
func OffsetDir(dir string) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.offsetDir = dir })
}

// AutoCommit makes the lite pull consumer commit what Poll returned every
// PersistInterval, on hand-over and on Close (default on), once the
// application polls again: until then it may still be processing the
// batch. With it off, call Commit:
// nothing else commits, not even the jump a pull answered OFFSET_ILLEGAL
// makes to the queue's bounds (it moves only where the consumer reads).
func AutoCommit(on bool) ConsumerOpt {
	return consumerOpt(func(c *consumerConfig) { c.autoCommit = on })
}
