package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/broker/timerindex"
	"github.com/raftmq/raftmq/ha"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// Group is this node's membership in its Raft broker group: the message
// store in Raft mode, the Raft log over the store's CommitLog segments, the
// stable store, the snapshot store, the transport (Parts), the FSM and the
// leader-side batcher. It implements Replica.
//
// Leader addresses: Raft's own addresses are the dLegerPeers transport
// addresses, but not-leader answers must name the leader's remoting address.
// A new leader proposes its remoting address (CmdMemberAddr) right after its
// barrier and before it serves, so every replica that applied it can map
// the Raft leader id to a remoting address — no extra config key, and the
// mapping follows address changes on restart.
type Group struct {
	cfg          GroupConfig
	remotingAddr string
	log          *zap.Logger

	ms     *store.MessageStore
	logs   *raftlog.LogStore
	stable raft.StableStore
	snaps  raftlog.IndexedSnapshotStore
	trans  raft.Transport
	raft   *raft.Raft
	fsm    *fsm
	timers *timerindex.Index // this replica's timer index (timer_fsm.go)
	st     *state
	// scheduleLevels is how many delay levels the schedule service
	// delivers (schedulePin; 0 until told).
	scheduleLevels atomic.Int32

	roles     *ha.Roles
	preferred *ha.PreferredLeader
	// gossip looks group members up in the node's gossip pool (nil: no
	// pool); set by the Controller (group_preferred.go).
	gossip    atomic.Pointer[gossipLookup]
	fastElect *fastElection // nil when off or on the in-memory transport
	batch     *batcher
	metrics   *groupMetrics // group_metrics.go

	// progress is what the leader heard from each peer (member_progress.go).
	progress *progressTracker
	// removed is set when this member learns it was removed (member_watch.go).
	removed removedState
	// promote is the leader's learner promotion waits (member_promote.go).
	promote promoteState

	// segQ is the CommitLog's segment queue (set in the store's OpenLog
	// hook, before the store starts its retention goroutine).
	segQ *storage.MappedFileQueue
	// ready is set once Raft runs; the retention hook does nothing before.
	ready atomic.Bool
	// diskFS is the store's FS, reporting ENOSPC to the disk guard
	// (group_diskfull.go).
	diskFS *noSpaceFS
	// stepDownDone closes when the disk-full step-down loop has returned.
	stepDownDone chan struct{}
	// snapLoopDone closes when the size-triggered snapshot loop has
	// returned (nil when SnapshotBytes is 0).
	snapLoopDone chan struct{}
	// raftDown closes once stopRaft has shut the Raft member down while the
	// node runs on. raft.State() cannot tell: an RPC handled while Shutdown
	// runs sets the state back to Follower, for good.
	raftDown     chan struct{}
	raftDownOnce sync.Once
	// beforeTransfer is SetBeforeTransfer's function (nil: none).
	beforeTransfer atomic.Pointer[func()]
	// catchup is the full-data catch-up loop's state (catchup.go).
	catchup catchupState
	// backfillMu: one index backfill at a time (catch-up's index phase,
	// the rebuild after a crash).
	backfillMu sync.Mutex
	// indexRebuildDone is closed when the rebuild after a crash returns
	// (nil: none started).
	indexRebuildDone chan struct{}
	// damage is the scrub's state and the log damage that stopped this
	// member (scrub.go).
	damage damageState

	quit      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var _ Replica = (*Group)(nil)

// groupOptions are test seams.
type groupOptions struct {
	// diskStepDown, if non-nil, replaces defaultDiskStepDown().
	diskStepDown *diskStepDownConfig
	// scrub, if non-nil, replaces the scrub's start delay and pass gap.
	scrub *scrubTiming
	// joinCheck, if non-nil, looks for a running group before an empty
	// member without raftJoin bootstraps (member_join.go).
	joinCheck joinCheck
}

// OpenGroup is NewGroup on the production parts (OpenDiskParts): files
// under cfg.Store.StorePathRootDir and a TCP transport on the member's
// dLegerPeers address.
func OpenGroup(cfg GroupConfig, remotingAddr string, log *zap.Logger) (*Group, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	parts, err := OpenDiskParts(cfg, log)
	if err != nil {
		return nil, err
	}
	return NewGroup(cfg, parts, remotingAddr, log)
}

// NewGroup opens the store and the Raft log on parts.FS under
// cfg.Store.StorePathRootDir, bootstraps the group from dLegerPeers when
// the parts hold no Raft state yet, and starts the Raft member. remotingAddr
// ("ip:port") is this node's client address, announced to followers when it
// becomes leader. The group owns parts from here on (see Parts), also when
// NewGroup fails.
func NewGroup(cfg GroupConfig, parts Parts, remotingAddr string, log *zap.Logger) (*Group, error) {
	return newGroup(cfg, parts, remotingAddr, log, groupOptions{})
}

func newGroup(cfg GroupConfig, parts Parts, remotingAddr string, log *zap.Logger, opts groupOptions) (g *Group, err error) {
	if log == nil {
		log = zap.NewNop()
	}
	log = log.With(zap.String("raftId", cfg.Raft.DLegerSelfID))
	g = &Group{cfg: cfg, remotingAddr: remotingAddr, log: log, quit: make(chan struct{}), raftDown: make(chan struct{}), stable: parts.Stable, trans: parts.Transport}
	// Not this member's raftDedupWindow/raftDedupProducerTTL: the FSM
	// applies the replicated ones (announce proposes the leader's).
	g.st = newState(defaultDedupWindow, defaultDedupProducerTTL.Milliseconds())
	// The error returns below set the named result g to nil before this
	// runs, so the cleanup holds its own reference.
	built := g
	defer func() {
		if err != nil {
			built.closeParts()
		}
	}()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.AcksBeforeFsync() {
		log.Warn("acks before fsync: flushDiskType=ASYNC_FLUSH with raftAcksBeforeFsync=true; the Raft log acknowledges " +
			"and votes on entries that may not be on disk yet, so a crash of a majority at once can lose acknowledged messages")
	}
	if parts.Stable == nil || parts.Snapshots == nil || parts.Transport == nil {
		return nil, fmt.Errorf("%w: parts need a stable store, a snapshot store and a transport", ErrInvalidGroupConfig)
	}
	raftDir := filepath.Join(cfg.Store.StorePathRootDir, "raft")
	scfg := cfg.Store
	if scfg.Log == nil {
		scfg.Log = log
	}
	if parts.FS != nil {
		scfg.FS = parts.FS
	}
	if scfg.FS == nil {
		scfg.FS = storage.OSFS()
	}
	// Store, Raft log and checkpoint writes all go through this FS, so an
	// ENOSPC anywhere sets the disk guard at once.
	g.diskFS = &noSpaceFS{FS: scfg.FS}
	scfg.FS = g.diskFS
	warmAhead := 0
	if !cfg.AcksBeforeFsync() {
		warmAhead = cfg.WarmAheadBytes
	}
	scfg.Raft = &store.RaftHooks{
		OpenLog: func(q *storage.MappedFileQueue) error {
			var err error
			g.segQ = q
			g.logs, err = raftlog.OpenOnQueue(q, filepath.Join(raftDir, "log"), raftlog.Options{
				FS: scfg.FS, SegmentSize: cfg.Store.MappedFileSizeCommitLog, Sync: !cfg.AcksBeforeFsync(),
				PatchCommand: patchCommand, Logger: log, WarmAhead: warmAhead, MaxBatchEntries: cfg.Raft.MaxAppendEntries,
			})
			return err
		},
		Segments: retentionSegments{g: g},
	}
	if g.ms, err = store.Open(scfg); err != nil {
		return nil, err
	}
	g.diskFS.ms.Store(g.ms)
	if g.timers, err = timerindex.Open(scfg.FS, filepath.Join(cfg.Store.StorePathRootDir, "timer"), log); err != nil {
		return nil, err
	}
	snaps := parts.Snapshots
	if is, ok := snaps.(raftlog.IndexedSnapshotStore); ok {
		snaps = is.SnapshotStore
	}
	// Inside the index wrapper, so raftlog.SinkIndex still sees its sink.
	g.snaps = raftlog.IndexedSnapshotStore{SnapshotStore: noSpaceSnapshots{SnapshotStore: snaps, note: g.diskFS.note}}
	hlog := raftlog.HCLogger(log, "raft")
	rc, err := cfg.Raft.RaftConfig(hlog)
	if err != nil {
		return nil, err
	}
	has, err := raft.HasExistingState(g.logs, g.stable, g.snaps)
	if err != nil {
		return nil, err
	}
	join := cfg.RaftJoin
	if !has && !join && opts.joinCheck != nil {
		why, err := opts.joinCheck()
		if err != nil {
			return nil, err
		}
		if why != "" {
			log.Warn("no Raft state: " + why)
			join = true
		}
	}
	if !has && cfg.RaftJoin {
		log.Info("raftJoin: no Raft state; not bootstrapping from dLegerPeers, waiting for the group's leader to add this member (addMember)")
	} else if !has && !join {
		conf, err := cfg.Raft.Configuration()
		if err != nil {
			return nil, err
		}
		if err := raft.BootstrapCluster(rc, g.logs, g.stable, g.snaps, g.trans, conf); err != nil {
			return nil, fmt.Errorf("broker: bootstrap raft group %s: %w", cfg.Raft.DLegerGroup, err)
		}
	}
	g.fsm = &fsm{logs: g.logs, ms: g.ms, st: g.st, log: log, retry: defaultApplyRetry(cfg.ApplyRetryTimeout), quit: g.quit,
		timers: g.timers}
	if err := g.removeMarkerTemps(); err != nil {
		return nil, err
	}
	rebuild, needRebuild, err := g.planIndexRebuild()
	if err != nil {
		return nil, err
	}
	g.progress = newProgressTracker()
	rtrans := wrapCatchupTransport(trackProgress(g.trans, g.progress), g.catchupBlocksVoting)
	if err := g.checkDamagedMarker(); err != nil {
		return nil, err
	}
	if g.raft, err = newRaftChecked(rc, g.fsm, g.timedLogs(), g.stable, g.snaps, rtrans); err != nil {
		return nil, fmt.Errorf("broker: start raft: %w", err)
	}
	if has {
		if err := g.checkLiveConfiguration(); err != nil {
			return nil, err
		}
	}
	bindMembership(g.trans, g.raft, log)
	g.fastElect = startFastElection(g.trans, g.raft, cfg.Raft.DLegerSelfID, cfg.RaftFastElectionStagger, log)
	if g.fastElect != nil {
		aside := g.catchupBlocksVoting
		g.fastElect.standAside.Store(&aside)
	}
	g.markReady()
	g.batch = newBatcher(g)
	g.roles = ha.NewRoles(ha.RolesConfig{Raft: g.raft, BarrierTimeout: cfg.ApplyTimeout, BeforeLeader: g.announce, Log: log})
	g.preferred = ha.NewPreferredLeader(ha.PreferredLeaderConfig{Raft: g.raft, Roles: g.roles,
		Self: cfg.Raft.DLegerSelfID, Preferred: cfg.Raft.PreferredLeaderID, Interval: cfg.PreferredLeaderCheckInterval,
		Ready: g.preferredReady, BeforeTransfer: g.runBeforeTransfer, Log: log})
	sd := defaultDiskStepDown()
	if opts.diskStepDown != nil {
		sd = *opts.diskStepDown
	}
	g.stepDownDone = make(chan struct{})
	go g.runDiskStepDown(sd)
	g.startScrub(opts.scrub)
	if needRebuild {
		g.startIndexRebuild(rebuild)
	}
	if cfg.SnapshotBytes > 0 {
		g.snapLoopDone = make(chan struct{})
		go g.runSnapshotBySize()
	}
	log.Info("raft group member started", zap.String("group", cfg.Raft.DLegerGroup), zap.String("raftAddr", string(g.trans.LocalAddr())),
		zap.String("remotingAddr", remotingAddr), zap.Bool("bootstrapped", !has && !join))
	return g, nil
}

// patchCommand is raftlog's PatchCommand: PHYSICALOFFSET and STORETIMESTAMP
// (the entry's AppendedAt, identical on every replica) of a Messages entry.
func patchCommand(l *raft.Log, data []byte, dataPos int64) error {
	if len(l.Extensions) == 0 {
		return nil
	}
	if t := CommandType(l.Extensions[0]); t != CmdMessages && t != CmdTxnEnd {
		return nil
	}
	return store.PatchStoredBatch(data, dataPos, l.AppendedAt.UnixMilli())
}

// announce runs on a new leader after its barrier: it makes sure the
// replicated member table maps this node to its remoting address, and
// that the dedup window and TTL every replica applies are this leader's
// configured ones.
func (g *Group) announce(uint64) error {
	if g.st.memberAddr(g.cfg.Raft.DLegerSelfID) != g.remotingAddr {
		if err := g.proposeAnnounce(&Command{Type: CmdMemberAddr, MemberID: g.cfg.Raft.DLegerSelfID, MemberAddr: g.remotingAddr}); err != nil {
			return err
		}
	}
	if p := (dedupParams{Window: int64(g.cfg.DedupWindow), TTLms: g.cfg.DedupProducerTTL.Milliseconds()}); p != g.st.dedupParams() {
		g.log.Info("replicating this leader's raftDedupWindow/raftDedupProducerTTL", zap.Int64("window", p.Window),
			zap.Int64("ttlMs", p.TTLms))
		return g.proposeAnnounce(&Command{Type: CmdDedupParams, Dedup: p})
	}
	return nil
}

// proposeAnnounce replicates one of announce's commands.
func (g *Group) proposeAnnounce(c *Command) error {
	ext, data, err := EncodeCommand(c, nil)
	if err != nil {
		return err
	}
	_, err = g.applyLog(raft.Log{Type: raft.LogCommand, Data: data, Extensions: ext}, g.cfg.ApplyTimeout)
	return err
}

// IsLeader implements Replica.
func (g *Group) IsLeader() bool { return g.roles.IsLeader() }

// LeaderAddr implements Replica.
func (g *Group) LeaderAddr() string {
	if g.roles.IsLeader() {
		return g.remotingAddr
	}
	_, id := g.raft.LeaderWithID()
	if id == "" {
		return ""
	}
	return g.st.memberAddr(string(id))
}

// LeaderID returns the Raft id of the current leader ("" if none known).
func (g *Group) LeaderID() string {
	_, id := g.raft.LeaderWithID()
	return string(id)
}

// SelfID returns this node's Raft id (dLegerSelfId).
func (g *Group) SelfID() string { return g.cfg.Raft.DLegerSelfID }

// Term returns the current Raft term.
func (g *Group) Term() uint64 { return g.raft.CurrentTerm() }

// leaderTerm is the term in which this node last became leader; it is set
// before IsLeader turns true, so a leader reads its own term.
func (g *Group) leaderTerm() uint64 { return g.roles.Term() }

// OnRoleChange implements Replica.
func (g *Group) OnRoleChange(f func(leader bool, term uint64)) { g.roles.OnChange(f) }

// State implements Replica.
func (g *Group) State() StateReader { return g.st }

// Store implements Replica.
func (g *Group) Store() *store.MessageStore { return g.ms }

// Raft exposes the Raft member (admin status, tests).
func (g *Group) Raft() *raft.Raft { return g.raft }

// FSMAppliedIndex is the index of the last command entry this member's FSM
// finished applying: every message at or below it is in its ConsumeQueues.
// (raft.Raft.AppliedIndex can run ahead of the FSM.)
func (g *Group) FSMAppliedIndex() uint64 { return g.fsm.applied.Load() }

// FSMCaughtUp reports whether the FSM has applied what Raft handed it,
// give or take one batch (raftMaxAppendEntries entries). Raft's applied
// index moves when entries are queued for the FSM, and a restarted member
// replaying its log has thousands queued while that index already equals
// the commit index. The slack covers the batch being applied on a busy
// follower. Entries the FSM never sees (each election's no-op and barrier,
// configuration changes) keep its index below Raft's for good until the
// next command, and pile up past any slack in a group that elects leaders
// but is written nothing: with no batch queued (fsm_pending 0) the FSM
// has what it was given but the batch in hand, which is caught up too.
func (g *Group) FSMCaughtUp() bool {
	if g.fsm.applied.Load()+uint64(g.cfg.Raft.MaxAppendEntries) >= g.raft.AppliedIndex() {
		return true
	}
	return g.raft.Stats()["fsm_pending"] == "0"
}

// CommittedApplied reports whether this member's FSM has applied every
// command entry Raft knows is committed, so that its queues hold every
// committed message. A follower can apply an entry before the leader's FSM
// does, and an FSM retrying a failed dispatch is behind for seconds. Raft's
// commit index also counts entries the FSM never sees (each election's
// no-op and barrier, configuration changes), which pile up in a group that
// elects leaders but is written nothing, so the entries between the two
// indexes are looked at; more than committedScanMax of them count as
// behind.
func (g *Group) CommittedApplied() bool {
	commit, applied := g.raft.CommitIndex(), g.fsm.applied.Load()
	if applied >= commit {
		return true
	}
	if commit-applied > committedScanMax {
		return false
	}
	for i := applied + 1; i <= commit; i++ {
		var l raft.Log
		if err := g.logs.GetLog(i, &l); err != nil || l.Type == raft.LogCommand {
			return false
		}
	}
	return true
}

// committedScanMax bounds the entries CommittedApplied reads.
const committedScanMax = 4096

// storeFS is the file system the store and the Raft log are on (the disk
// usage metric).
func (g *Group) storeFS() storage.FS { return g.diskFS }

// LogStore exposes the Raft log store (admin status, tests).
func (g *Group) LogStore() *raftlog.LogStore { return g.logs }

// AcksBeforeFsync implements RaftAdmin: true in the explicit "acks before
// fsync" mode (GroupConfig.AcksBeforeFsync).
func (g *Group) AcksBeforeFsync() bool { return g.cfg.AcksBeforeFsync() }

// TransferLeadership moves leadership to the member with Raft id to, or,
// when to is "", to the one transferTarget picks (group_transfer.go). Only
// the leader can do it. The target is picked before the BeforeTransfer
// flush, so that nothing the flush misses is acknowledged meanwhile.
func (g *Group) TransferLeadership(to string) error {
	if g.raft.State() == raft.Leader {
		if to == "" {
			t, err := g.transferTarget()
			if err != nil {
				return err
			}
			to = t
		} else if g.isVoter(to) {
			// Asked only of a voter: ha.TransferLeadership refuses
			// the others at once, the probe could take seconds.
			if err := g.peerCatchingUp(to); errors.Is(err, ErrTargetCatchingUp) {
				return err
			}
		}
	}
	g.runBeforeTransfer()
	if err := ha.TransferLeadership(g.raft, to); err != nil {
		if errors.Is(err, ha.ErrNotLeader) {
			return g.notLeaderErr(err)
		}
		return err
	}
	return nil
}

// SetBeforeTransfer sets what runs before this member hands leadership
// away on purpose (TransferLeadership, so also a planned stop, removing
// itself, the disk-full, apply-stopped and damaged-log step-downs; the
// preferred-leader check): the controller commits the consumer offsets it
// coalesced, which only a leader can, so a move loses none of the commits
// it answered.
func (g *Group) SetBeforeTransfer(f func()) { g.beforeTransfer.Store(&f) }

func (g *Group) runBeforeTransfer() {
	if f := g.beforeTransfer.Load(); f != nil {
		(*f)()
	}
}

// proposeCommand replicates a table command (leader only).
func (g *Group) proposeCommand(ctx context.Context, c *Command) error {
	if !g.IsLeader() {
		return g.notLeaderErr(nil)
	}
	ext, data, err := EncodeCommand(c, nil)
	if err != nil {
		return err
	}
	timeout := g.cfg.ApplyTimeout
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	resp, err := g.applyLog(raft.Log{Type: raft.LogCommand, Data: data, Extensions: ext}, timeout)
	if err != nil {
		return err
	}
	if r, ok := resp.(*applyResult); ok && r.err != nil {
		return r.err
	}
	return nil
}

// UpdateTopic implements Replica.
func (g *Group) UpdateTopic(ctx context.Context, tc wire.TopicConfig) error {
	if tc.TopicName == "" {
		return fmt.Errorf("%w: topic without a name", store.ErrMessageIllegal)
	}
	return g.proposeCommand(ctx, &Command{Type: CmdUpdateTopic, Topic: tc})
}

// DeleteTopic implements Replica.
func (g *Group) DeleteTopic(ctx context.Context, topic string) error {
	return g.proposeCommand(ctx, &Command{Type: CmdDeleteTopic, Name: topic, DropQueues: true})
}

// UpdateSubscriptionGroup implements Replica.
func (g *Group) UpdateSubscriptionGroup(ctx context.Context, sg wire.SubscriptionGroupConfig) error {
	if sg.GroupName == "" {
		return fmt.Errorf("%w: subscription group without a name", store.ErrMessageIllegal)
	}
	return g.proposeCommand(ctx, &Command{Type: CmdUpdateGroup, Group: sg})
}

// DeleteSubscriptionGroup implements Replica.
func (g *Group) DeleteSubscriptionGroup(ctx context.Context, group string, cleanOffset bool) error {
	return g.proposeCommand(ctx, &Command{Type: CmdDeleteGroup, Name: group, KeepOffsets: !cleanOffset})
}

// UpdateScheduleOffsets implements Replica.
func (g *Group) UpdateScheduleOffsets(ctx context.Context, progress map[int32]int64) error {
	return g.proposeCommand(ctx, &Command{Type: CmdScheduleOffsets, Schedule: progress})
}

// CommitOffsets implements Replica: the commits become one entry, or
// several in order when they encode to more than maxOffsetEntryBytes. The
// processors coalesce commits per group/topic/queue and call it every
// consumerOffsetCommitInterval (offset.go), so there is no second
// coalescing here. An error may leave the entries before the failed one
// applied. A leader whose FSM stopped still commits every entry (the other
// members apply them): it proposes them all and returns the
// *ApplyStoppedError.
func (g *Group) CommitOffsets(ctx context.Context, commits []OffsetCommit) error {
	var stopped error
	for len(commits) > 0 {
		n := offsetEntryLen(commits)
		err := g.proposeCommand(ctx, &Command{Type: CmdOffsets, Offsets: commits[:n]})
		var as *ApplyStoppedError
		switch {
		case errors.As(err, &as):
			stopped = err
		case err != nil:
			return err
		}
		commits = commits[n:]
	}
	return stopped
}

// maxOffsetEntryBytes bounds the encoded commits of one CmdOffsets entry.
// A leader whose flushes stall can queue a commit for every
// group/topic/queue: as one entry they could outgrow a CommitLog segment
// (never written, so every flush fails) or maxCommandItems (committed,
// then refused by every member's decoder, which stops every FSM). A
// commit encodes to at least 4 bytes, so this bound keeps the count far
// below maxCommandItems.
const maxOffsetEntryBytes = 256 << 10

// offsetEntryLen is how many of commits (at least one) the next entry
// takes: as many as encode within maxOffsetEntryBytes.
func offsetEntryLen(commits []OffsetCommit) int {
	size := binary.MaxVarintLen64 // the count
	for i, o := range commits {
		size += 2*binary.MaxVarintLen64 + len(o.Group) + len(o.Topic) + binary.MaxVarintLen32 + binary.MaxVarintLen64
		if size > maxOffsetEntryBytes && i > 0 {
			return i
		}
	}
	return len(commits)
}

// SnapshotAndTruncate takes a Raft snapshot now and deletes the CommitLog
// segments wholly before it (what retention does once segments expire).
// It returns the new first log index. Admin tooling and tests use it.
func (g *Group) SnapshotAndTruncate() (uint64, error) {
	f := g.raft.Snapshot()
	if err := f.Error(); err != nil {
		return 0, err
	}
	meta, rc, err := f.Open()
	if err != nil {
		return 0, err
	}
	rc.Close()
	return g.logs.DeleteSegmentsBefore(meta.Index + 1)
}

// lastSnapshotIndex is the index of the newest snapshot (0 if none).
func (g *Group) lastSnapshotIndex() uint64 {
	n, _ := strconv.ParseUint(g.raft.Stats()["last_snapshot_index"], 10, 64)
	return n
}

// Close stops the member: no new writes, Raft shut down, stores closed
// cleanly. Idempotent.
func (g *Group) Close() error {
	g.closeOnce.Do(func() {
		close(g.quit)
		g.closeErr = g.closeParts()
	})
	return g.closeErr
}

// quitContext returns a context that ends when the group closes (g.quit)
// or when cancel is called, for loops that pass a context down.
func (g *Group) quitContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-g.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// snapshotOnClose takes a snapshot before Raft shuts down when entries
// were applied since the last one. Without it the next start pays for
// everything after the last periodic snapshot (SnapshotThreshold counts
// entries, and one entry holds a whole batch of messages, so that can be
// gigabytes): NewRaft reads every such entry back, each member re-applies
// them, and after a cold restart of the whole group the new leader serves
// only once its FSM has caught up. A snapshot is a small marker (queues
// flushed, log position, tables), cheap next to that. Failures are only
// logged: the log is durable, only the restart shortcut is lost. After a
// process-style kill the queue flush fails and so does the snapshot.
func (g *Group) snapshotOnClose() {
	if g.raft.AppliedIndex() <= g.lastSnapshotIndex() {
		return
	}
	// ErrRaftShutdown: a removed member's Raft stopped when it learned of
	// its removal, and such a member never starts again on this data.
	if err := g.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) && !errors.Is(err, raft.ErrRaftShutdown) {
		g.log.Warn("snapshot on close failed; the next start re-applies the log after the last snapshot", zap.Error(err))
	}
}

// How often the size-triggered snapshot loop looks at the log, and how long
// it waits after a failed snapshot.
const (
	snapshotBySizeCheck = 250 * time.Millisecond
	snapshotBySizeRetry = 10 * time.Second
)

// runSnapshotBySize takes a snapshot whenever the log has grown by
// SnapshotBytes since the last snapshot (whoever took it: Raft's own
// trigger, Close, an admin). It runs on every member: snapshots are local,
// and so is the restart work they bound. It returns once the Raft member
// has shut down while the node runs on (removed from the group, or
// stopped for log damage): a shut-down Raft never snapshots again, and
// such a member never restarts on this data.
func (g *Group) runSnapshotBySize() {
	defer close(g.snapLoopDone)
	t := time.NewTicker(snapshotBySizeCheck)
	defer t.Stop()
	seen := ^uint64(0) // snapshot index base was computed for
	var base int64     // log position the last snapshot covers
	var next time.Time // no attempt before this (after a failure)
	for {
		select {
		case <-g.quit:
			return
		case <-g.raftDown:
			return
		case <-t.C:
		}
		if snap := g.lastSnapshotIndex(); snap != seen {
			seen = snap
			switch end, err := g.logs.EndOf(snap); {
			case snap == 0:
				base = g.logs.MinPosition() // never snapshotted: all of it counts
			case err == nil:
				base = end
			default:
				// Retention already removed the snapshot's entry; it was
				// taken moments ago, so the log end is close enough.
				base = g.logs.NextPosition()
			}
		}
		if g.logs.NextPosition()-base < g.cfg.SnapshotBytes || time.Now().Before(next) {
			continue
		}
		switch err := g.raft.Snapshot().Error(); {
		case err == nil, errors.Is(err, raft.ErrNothingNewToSnapshot):
		case errors.Is(err, raft.ErrRaftShutdown):
			return // shut down since the check above
		default:
			next = time.Now().Add(snapshotBySizeRetry)
			g.log.Warn("size-triggered snapshot failed; will retry", zap.Error(err), zap.Duration("in", snapshotBySizeRetry))
		}
	}
}

func (g *Group) closeParts() error {
	var errs []error
	if g.stepDownDone != nil {
		<-g.stepDownDone // quit is closed: at most one transfer to wait for
	}
	if g.snapLoopDone != nil {
		<-g.snapLoopDone // at most one snapshot to wait for
	}
	g.waitScrub()
	if g.preferred != nil {
		g.preferred.Close()
	}
	g.fastElect.close()
	if g.roles != nil {
		g.roles.Close()
	}
	if g.batch != nil {
		g.batch.close()
	}
	g.stopCatchup()
	g.waitIndexRebuild()
	if g.raft != nil {
		g.snapshotOnClose()
		errs = append(errs, g.raft.Shutdown().Error())
	}
	errs = append(errs, closeTransport(g.trans))
	if g.logs != nil {
		errs = append(errs, g.logs.Close())
	}
	if g.ms != nil {
		errs = append(errs, g.ms.Close())
	}
	if g.timers != nil {
		errs = append(errs, g.timers.Close())
	}
	if c, ok := g.stable.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// retentionSegments is the Raft-mode store's retention hook: segments chosen
// by age go through the Raft log store, which moves its first index durably
// before removing files, and never past the newest snapshot (a follower that
// needs older entries then gets that snapshot) nor past the oldest pending
// timer or delayed message, nor past the oldest transaction half the check
// walk has not passed (timerPin, schedulePin, txnPin).
type retentionSegments struct{ g *Group }

// queuePin is the CommitLog position of cq's unit at queue offset q (or
// at its first unit, when retention already passed q): the pins above
// keep every message from a pending queue position on. math.MaxInt64
// when nothing is pending (no queue, or q at its end); 0, keeping
// everything, when the unit cannot be read, rather than lose a message.
func queuePin(cq *store.ConsumeQueue, q int64) int64 {
	if cq == nil {
		return math.MaxInt64
	}
	q = max(q, cq.MinOffset())
	if q >= cq.MaxOffset() {
		return math.MaxInt64
	}
	u, err := cq.Get(q)
	if err == nil {
		return u.PhyOffset
	}
	// No file holds q (a queue file missing between others): no message
	// of the missing units can be read through the queue, so none is
	// kept for it; the units after them pin. Pinned at 0, retention would
	// stop until the pending position passed the gap (a timer's, days).
	if start, units, err := cq.UnitsFrom(q, 1); err == nil && start > q {
		if len(units) == 0 {
			return math.MaxInt64
		}
		return units[0].PhyOffset
	}
	return 0
}

// DeleteExpired implements store.ExpiringFiles.
func (r retentionSegments) DeleteExpired(olderThan time.Time, keepLast int, maxDelete int) (int, error) {
	g := r.g
	if !g.ready.Load() {
		return 0, nil
	}
	q := g.segQ
	files := q.Files()
	end := int64(-1)
	pin := min(g.timerPin(), g.schedulePin(), g.txnPin())
	for i := 0; i < len(files)-keepLast && i < maxDelete; i++ {
		if !files[i].ModTime().Before(olderThan) || files[i].FileFromOffset()+int64(files[i].Size()) > pin {
			break
		}
		end = files[i].FileFromOffset() + int64(files[i].Size())
	}
	if end < 0 {
		return 0, nil
	}
	idx, err := g.logs.FirstIndexFrom(end)
	if err != nil {
		return 0, err
	}
	snap := g.lastSnapshotIndex()
	if idx == 0 || idx > snap+1 {
		idx = snap + 1
	}
	before := len(files)
	if _, err := g.logs.DeleteSegmentsBefore(idx); err != nil {
		return 0, err
	}
	return before - len(q.Files()), nil
}

// MinOffset implements store.ExpiringFiles.
func (r retentionSegments) MinOffset() int64 { return r.g.segQ.MinOffset() }
