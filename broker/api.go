package broker

import (
	"context"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/wire"
)

// Replica is everything the request processors need from the Raft group.
// Every write goes through Raft and returns once the entry is committed
// (quorum-durable) and applied on this node; a follower returns an error
// wrapping ErrNotLeader (use LeaderAddr to name the leader in the response).
// Reads are served from the local replica's applied state.
type Replica interface {
	// IsLeader reports whether this node is the Raft leader and has finished
	// its leadership barrier (it may serve writes).
	IsLeader() bool
	// LeaderAddr is the remoting address ("ip:port") of the current leader,
	// or "" while there is none.
	LeaderAddr() string
	// PutMessages replicates a batch of messages of one request (one message
	// for SEND_MESSAGE, many for SEND_BATCH_MESSAGE). Concurrent calls are
	// batched into one Raft entry. Results are in request order.
	PutMessages(ctx context.Context, msgs []*store.Message) ([]PutResult, error)
	// CommitOffsets replicates consumer offset commits. A large set may
	// take several entries, in order; an error may leave the first ones
	// applied. An *ApplyStoppedError (this member's FSM stopped) means
	// every entry was committed, for the other members to apply.
	CommitOffsets(ctx context.Context, commits []OffsetCommit) error
	// UpdateTopic creates or replaces a topic's config.
	UpdateTopic(ctx context.Context, tc wire.TopicConfig) error
	// DeleteTopic removes a topic's config, consumer offsets and consume
	// queues on every member (the bytes age out of the CommitLog by
	// retention).
	DeleteTopic(ctx context.Context, topic string) error
	// UpdateSubscriptionGroup creates or replaces a consumer group's config.
	UpdateSubscriptionGroup(ctx context.Context, sg wire.SubscriptionGroupConfig) error
	// DeleteSubscriptionGroup removes a consumer group's config, and its
	// consumer offsets too if cleanOffset is set.
	DeleteSubscriptionGroup(ctx context.Context, group string, cleanOffset bool) error
	// UpdateScheduleOffsets replicates the delay-level delivery progress
	// (level → offset in SCHEDULE_TOPIC_XXXX queue level-1).
	UpdateScheduleOffsets(ctx context.Context, progress map[int32]int64) error
	// State is the applied replicated state (read-only views).
	State() StateReader
	// Store is the local message store (reads: GetMessage, max/min offsets,
	// search by time, query by key, look up by physical offset).
	Store() *store.MessageStore
	// OnRoleChange registers f to be called (on one goroutine, in order)
	// whenever this node becomes leader (after its barrier) or stops being
	// leader. Used for name-server registration and long-polling wake-ups.
	OnRoleChange(f func(leader bool, term uint64))
}

// AsyncPutter is an optional Replica extension for the asynchronous send
// path: PutMessagesAsync is PutMessages without waiting. done is called
// exactly once — with the results in request order, or an error — either
// before PutMessagesAsync returns (rejected at once: not leader, disk full,
// ctx ended before the hand-off) or later on the goroutine that completes
// the Raft entry, which answers every request of the entry one after
// another, so done must be quick and must not block. ctx bounds only the
// hand-off, not the replication (the group's apply timeout does). A Replica
// without it is served by PutMessages on the processor's worker.
type AsyncPutter interface {
	PutMessagesAsync(ctx context.Context, msgs []*store.Message, done func([]PutResult, error))
}

var _ AsyncPutter = (*Group)(nil)

// CommittedApplier is an optional Replica extension: CommittedApplied
// reports whether the member's queues hold every message Raft knows is
// committed (its FSM has applied every committed command entry). A leader
// that says false is treated as behind by the pull path, as a follower is.
type CommittedApplier interface {
	CommittedApplied() bool
}

var _ CommittedApplier = (*Group)(nil)

// StateReader is a read-only view of the replicated tables. Implementations
// return copies or immutable values so callers never hold the FSM's lock.
type StateReader interface {
	Topic(name string) (wire.TopicConfig, bool)
	Topics() map[string]wire.TopicConfig
	// TopicsDataVersion changes whenever the topic table changes; name-server
	// registration sends it.
	TopicsDataVersion() wire.DataVersion
	SubscriptionGroup(name string) (wire.SubscriptionGroupConfig, bool)
	SubscriptionGroups() map[string]wire.SubscriptionGroupConfig
	// ConsumerOffset returns the committed offset of group on topic/queue,
	// ok=false if none was ever committed.
	ConsumerOffset(group, topic string, queueID int32) (offset int64, ok bool)
	// ConsumerOffsets returns topic@group → queueId → offset (RocketMQ's
	// ConsumerOffsetManager.offsetTable shape).
	ConsumerOffsets() map[string]map[int32]int64
	ScheduleOffsets() map[int32]int64
}

// PutResult is the outcome of one replicated message.
type PutResult struct {
	MsgID          string // offset message id (store host + physical offset)
	QueueID        int32
	QueueOffset    int64
	PhysicalOffset int64
	StoreTimestamp int64
	// Duplicate is true when the idempotent-producer dedup table recognised
	// the message (producer id + sequence) as already stored; the other
	// fields then describe the original copy. When the original has left
	// the dedup window (its sequence is far below the stream's newest),
	// where it was stored is unknown: QueueOffset is −1 and MsgID empty.
	Duplicate bool
}

// OffsetCommit is one consumer offset commit.
type OffsetCommit struct {
	Group   string
	Topic   string
	QueueID int32
	Offset  int64
}
