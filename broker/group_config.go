package broker

import (
	"errors"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/raftlog"
)

// GroupConfig configures one member of a Raft broker group: the message
// store (store.Config keys), the Raft part (raftlog.Config: the DLedger keys
// and Raft timing) and the group's own keys below. BrokerConfig embeds it, so
// every key loads from broker.conf under its prop name (the config loader
// walks untagged struct fields; the two parts are named fields because both
// types are called Config).
type GroupConfig struct {
	// Store is the message store's configuration (storePathRootDir,
	// mappedFileSizeCommitLog, flushDiskType, ...).
	Store store.Config
	// Raft is the Raft part: enableDLegerCommitLog, dLegerGroup,
	// dLegerPeers, dLegerSelfId, preferredLeaderId and the raft* timing keys.
	Raft raftlog.Config

	// RaftBatchMaxBytes bounds the stored-message bytes the leader's batcher
	// puts into one Raft entry (1 MiB). Larger entries amortize the fsync
	// and the per-entry Raft overhead; smaller ones bound the replication
	// pipeline's granularity.
	RaftBatchMaxBytes int `prop:"raftBatchMaxBytes"`
	// RaftBatchMaxCount bounds the send requests in one entry (512).
	RaftBatchMaxCount int `prop:"raftBatchMaxCount"`
	// RaftBatchLinger, when positive, replaces the adaptive wait with a
	// fixed one: once no entry is in flight the batcher waits this long for
	// more requests (or until the batch is full) before proposing, a lone
	// sender too (0, the default: RaftBatchAdaptiveWait decides). Given in
	// ms in broker.conf.
	RaftBatchLinger time.Duration `prop:"raftBatchLinger"`
	// RaftBatchAdaptiveWait bounds how long the batcher, when
	// RaftBatchLinger is 0, waits for the entry to hold the senders it
	// expects (1 ms): the most requests it saw in flight and gathered at
	// once during the previous gather, minus those in the entry still in
	// flight. Steady concurrent senders then share one entry per
	// replication round instead of splitting into a small and a large one;
	// a lone sender is never held. 0 disables it. Given in ms in
	// broker.conf.
	RaftBatchAdaptiveWait time.Duration `prop:"raftBatchAdaptiveWait"`
	// ApplyTimeout bounds one replicated write, including waits for a new
	// leader during a leadership transfer (5 s).
	ApplyTimeout time.Duration `prop:"applyTimeout"`
	// DedupWindow is how many recent sequence numbers the idempotent
	// producer table remembers per (producer, topic, queue) (1024). It
	// takes effect on every member when this member leads: the leader
	// replicates it (CmdDedupParams), so all replicas decide alike.
	DedupWindow int `prop:"raftDedupWindow"`
	// DedupProducerTTL drops a producer's dedup windows when it sent nothing
	// for this long, in log time (AppendedAt) so every replica drops them at
	// the same entry (1 h); replicated by the leader as DedupWindow is.
	DedupProducerTTL time.Duration `prop:"raftDedupProducerTTL"`
	// PreferredLeaderCheckInterval is how often the leader checks whether
	// leadership should move to preferredLeaderId (1 s). Not within
	// ha.PreferredLeaderSettle (or three intervals) of the preferred member
	// giving leadership up, so one that handed it off while stopping does
	// not get it back, and not while it is dead by gossip, silent or
	// behind (a transfer holds writes while it catches the target up).
	PreferredLeaderCheckInterval time.Duration `prop:"preferredLeaderCheckInterval"`
	// SnapshotBytes makes every member take a snapshot once its log has
	// grown by this many bytes since its last one (512 MiB; 0 turns it
	// off). Raft's own trigger (raftSnapshotThreshold) counts entries, and
	// one entry carries a whole batch of messages, so it can let gigabytes
	// pile up; a restart after a crash reads back and re-applies everything
	// after the last snapshot, so this bounds that work in bytes.
	SnapshotBytes int64 `prop:"raftSnapshotBytes"`
	// WarmAheadBytes keeps this much of the CommitLog ahead of the Raft
	// log's writer overwritten with durable zeros under SYNC_FLUSH (8 MiB;
	// 0 = off): segments are fallocated, and a sync after appending into
	// unwritten extents also converts them and commits the journal
	// (raftlog Options.WarmAhead; the store's own warmer is off in Raft
	// mode).
	WarmAheadBytes int `prop:"raftWarmAheadBytes"`
	// ApplyRetryTimeout is how long a member retries a committed Messages
	// entry whose ConsumeQueue or index write failed (a full disk that
	// retention frees, a transient I/O error) before its FSM stops (10 s;
	// 0 = stop at the first failure). A stopped member applies nothing
	// more, so its queue offsets never differ from the other replicas';
	// it is not ready and needs a restart (see ApplyStoppedError). While
	// a leader retries, its Raft loop stalls once the FSM queue is full,
	// so this stays short. Given in ms in broker.conf.
	ApplyRetryTimeout time.Duration `prop:"raftApplyRetryTimeout"`
	// RaftAcksBeforeFsync confirms flushDiskType=ASYNC_FLUSH (false): with
	// it the Raft log acknowledges appends, and members vote, on entries
	// that may still be only in the page cache, so a crash of a majority
	// at once (a power cut) can lose acknowledged messages. ASYNC_FLUSH
	// without this key is refused, so a stock RocketMQ broker.conf cannot
	// weaken durability by accident; the key with SYNC_FLUSH is refused as
	// a contradiction. See docs/adr/0012-flush-mode-under-raft.md.
	RaftAcksBeforeFsync bool `prop:"raftAcksBeforeFsync"`
	// ShutdownTransferTimeout bounds how long a clean shutdown (SIGTERM,
	// Node.Close) of the leader spends handing leadership to the most
	// caught-up follower and waiting until the name servers route the new
	// leader, before the node stops anyway (5 s; 0 = stop at once, like a
	// kill). Followers stop at once.
	ShutdownTransferTimeout time.Duration `prop:"shutdownTransferTimeout"`
	// RaftJoin makes a member with no Raft state wait to be added by the
	// group's leader (`raftmq admin addMember`) instead of bootstrapping
	// the group from dLegerPeers (false). Set it on a new host joining a
	// running group; a member without it joins too when a member the name
	// servers route holds the group's log (member_join.go), and bootstraps
	// when none answers. See docs/operations.md.
	RaftJoin bool `prop:"raftJoin"`
	// RaftFastElectionStagger is the gap between the survivors' turns to
	// campaign at once when the leader's process is gone (its Raft
	// connections ended and its Raft port refuses connections; see
	// fastelect.go): the first voter by id campaigns at once, the next one
	// this much later if nobody leads and no campaign reached it by then
	// (250 ms). -1 turns the fast election off: only the heartbeat timeout
	// starts elections. Given in ms in broker.conf.
	RaftFastElectionStagger time.Duration `prop:"raftFastElectionStagger"`
	// CatchupBytesPerSecond paces a member's fetch of the retained
	// CommitLog it lacks after a snapshot install (64 MiB/s; 0 = unpaced),
	// so the catch-up leaves disk and network to the producers (ADR 0019).
	CatchupBytesPerSecond int64 `prop:"raftCatchupBytesPerSecond"`
	// CatchupAdaptive lets the leader serving a catch-up slow it down
	// while its producers' p99 rises above the p99 it saw without one,
	// between CatchupMinBytesPerSecond and CatchupBytesPerSecond
	// (catchup_pace.go; true). false, or CatchupBytesPerSecond 0: fetch
	// at CatchupBytesPerSecond.
	CatchupAdaptive bool `prop:"raftCatchupAdaptive"`
	// CatchupMinBytesPerSecond is the adaptive pace's floor, so a
	// catch-up always ends (2 MiB/s; capped at CatchupBytesPerSecond).
	CatchupMinBytesPerSecond int64 `prop:"raftCatchupMinBytesPerSecond"`
	// ScrubBytesPerSecond paces the background check of the closed
	// CommitLog segments' CRCs (scrub.go; 8 MiB/s, a pass over 8 GiB in
	// ~17 min; 0 = off).
	ScrubBytesPerSecond int64 `prop:"raftScrubBytesPerSecond"`
	// RaftTLS is mutual TLS between the members (raftTls* keys).
	RaftTLS RaftTLSConfig
}

// AcksBeforeFsync reports the explicit "acks before fsync" mode
// (flushDiskType=ASYNC_FLUSH confirmed by raftAcksBeforeFsync=true): the
// Raft log does not fdatasync an append before it is acknowledged.
func (c *GroupConfig) AcksBeforeFsync() bool { return c.Store.FlushDiskType == store.AsyncFlush }

// The idempotent-producer dedup defaults. Every replica applies them until
// a leader configured otherwise replicates its own (CmdDedupParams).
const (
	defaultDedupWindow      = 1024
	defaultDedupProducerTTL = time.Hour
)

// DefaultGroupConfig returns the store's and raftlog's defaults with Raft
// mode and SYNC_FLUSH on (Raft's safety rests on durable appends).
func DefaultGroupConfig() GroupConfig {
	c := GroupConfig{Store: store.DefaultConfig(), Raft: raftlog.DefaultConfig()}
	c.Store.FlushDiskType = store.SyncFlush
	c.Raft.EnableDLegerCommitLog = true
	c.RaftBatchMaxBytes = 1 << 20
	c.RaftBatchMaxCount = 512
	c.RaftBatchAdaptiveWait = time.Millisecond
	c.ApplyTimeout = 5 * time.Second
	c.DedupWindow = defaultDedupWindow
	c.DedupProducerTTL = defaultDedupProducerTTL
	c.PreferredLeaderCheckInterval = time.Second
	c.SnapshotBytes = 512 << 20
	c.WarmAheadBytes = 8 << 20
	c.ApplyRetryTimeout = 10 * time.Second
	c.ShutdownTransferTimeout = 5 * time.Second
	c.RaftFastElectionStagger = 250 * time.Millisecond
	c.CatchupBytesPerSecond = 64 << 20
	c.CatchupAdaptive = true
	c.CatchupMinBytesPerSecond = 2 << 20
	c.ScrubBytesPerSecond = 8 << 20
	return c
}

// Validate checks every part and reports every setting at fault
// (errors.Join), each naming its key.
func (c *GroupConfig) Validate() error {
	errs := []error{c.Store.Validate(), c.Raft.Validate(), c.RaftTLS.Validate()}
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidGroupConfig, key, fmt.Sprintf(format, args...))
	}
	if c.Store.FlushDiskType == store.AsyncFlush && !c.RaftAcksBeforeFsync {
		errs = append(errs, bad("flushDiskType", "ASYNC_FLUSH under Raft acknowledges messages and votes before they are on disk, "+
			"so a crash of a majority at once can lose acknowledged messages; use SYNC_FLUSH (the default), "+
			"or set raftAcksBeforeFsync=true to accept that"))
	}
	if c.Store.FlushDiskType != store.AsyncFlush && c.RaftAcksBeforeFsync {
		errs = append(errs, bad("raftAcksBeforeFsync", "true needs flushDiskType=ASYNC_FLUSH, got %s", c.Store.FlushDiskType))
	}
	if !c.Raft.EnableDLegerCommitLog {
		errs = append(errs, bad("enableDLegerCommitLog", "must be true for a Raft broker group"))
	}
	if c.RaftBatchMaxBytes < c.Store.MaxMessageSize {
		errs = append(errs, bad("raftBatchMaxBytes", "%d is below maxMessageSize %d: a large message could never be proposed",
			c.RaftBatchMaxBytes, c.Store.MaxMessageSize))
	}
	if c.RaftBatchMaxCount < 1 {
		errs = append(errs, bad("raftBatchMaxCount", "must be positive, got %d", c.RaftBatchMaxCount))
	}
	if c.RaftBatchLinger < 0 {
		errs = append(errs, bad("raftBatchLinger", "must not be negative"))
	}
	if c.RaftBatchAdaptiveWait < 0 {
		errs = append(errs, bad("raftBatchAdaptiveWait", "must not be negative"))
	}
	if c.CatchupBytesPerSecond < 0 {
		errs = append(errs, bad("raftCatchupBytesPerSecond", "must not be negative (0: unpaced), got %d", c.CatchupBytesPerSecond))
	}
	if c.CatchupMinBytesPerSecond < 0 {
		errs = append(errs, bad("raftCatchupMinBytesPerSecond", "must not be negative, got %d", c.CatchupMinBytesPerSecond))
	}
	if c.ApplyTimeout <= 0 {
		errs = append(errs, bad("applyTimeout", "must be positive"))
	}
	if c.DedupWindow < 1 || c.DedupWindow > maxDedupWindow {
		errs = append(errs, bad("raftDedupWindow", "must be in [1, %d], got %d", maxDedupWindow, c.DedupWindow))
	}
	if c.DedupProducerTTL < time.Millisecond {
		errs = append(errs, bad("raftDedupProducerTTL", "must be at least 1 ms"))
	}
	if c.PreferredLeaderCheckInterval <= 0 {
		errs = append(errs, bad("preferredLeaderCheckInterval", "must be positive"))
	}
	if c.SnapshotBytes < 0 {
		errs = append(errs, bad("raftSnapshotBytes", "must not be negative"))
	}
	if c.ScrubBytesPerSecond < 0 {
		errs = append(errs, bad("raftScrubBytesPerSecond", "must not be negative (0 turns the scrub off)"))
	}
	if c.WarmAheadBytes < 0 {
		errs = append(errs, bad("raftWarmAheadBytes", "must not be negative"))
	}
	if c.ApplyRetryTimeout < 0 {
		errs = append(errs, bad("raftApplyRetryTimeout", "must not be negative"))
	}
	if c.ShutdownTransferTimeout < 0 {
		errs = append(errs, bad("shutdownTransferTimeout", "must not be negative"))
	}
	return errors.Join(errs...)
}
