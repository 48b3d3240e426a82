package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// fakeReplica is a single-node Replica for processor tests: a real
// store.MessageStore (real files) and in-memory tables. Writes are
// "replicated" at once: appended to the CommitLog's segments and synced,
// as the Raft log store would, then dispatched as Apply does; leadership is
// switched by the test.
type fakeReplica struct {
	st        *store.MessageStore
	storeHost netip.AddrPort
	putMu     sync.Mutex // serializes appends to segs
	segs      *storage.MappedFileQueue

	leader     atomic.Bool
	leaderAddr atomic.Value // string

	mu      sync.Mutex
	topics  map[string]wire.TopicConfig
	dv      wire.DataVersion
	groups  map[string]wire.SubscriptionGroupConfig
	offsets map[string]map[int32]int64
	sched   map[int32]int64
	roleFns []func(bool, uint64)
	term    uint64

	// topicWrites counts UpdateTopic calls; with topicGate set, each
	// waits for it to close first.
	topicWrites atomic.Int32
	topicGate   chan struct{} // guarded by mu

	// deletes counts DeleteTopic and DeleteSubscriptionGroup calls; with
	// deleteGate set, each waits for it to close first (a delete whose
	// Raft entry is in flight). logOrder is held by such a delete until it
	// is applied and taken by CommitOffsets, so offsets proposed meanwhile
	// apply after it, as a Raft log orders them.
	deletes    atomic.Int32
	deleteGate chan struct{} // guarded by mu
	logOrder   sync.Mutex

	// failCommits makes CommitOffsets fail as a Raft write that timed out.
	failCommits atomic.Bool
}

func newFakeReplica(t *testing.T, storeHost string, storeOpts ...func(*store.Config)) *fakeReplica {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.StorePathRootDir = t.TempDir()
	cfg.MappedFileSizeCommitLog = 8 << 20
	cfg.MappedFileSizeConsumeQueue = 6000 * store.CQUnitSize
	cfg.MaxHashSlotNum, cfg.MaxIndexNum = 1000, 4000
	cfg.FlushDiskType = store.SyncFlush
	cfg.StoreHost = netip.MustParseAddrPort(storeHost)
	for _, o := range storeOpts {
		o(&cfg)
	}
	r := &fakeReplica{storeHost: cfg.StoreHost, topics: map[string]wire.TopicConfig{}, groups: map[string]wire.SubscriptionGroupConfig{},
		offsets: map[string]map[int32]int64{}, sched: map[int32]int64{}}
	cfg.Raft = &store.RaftHooks{OpenLog: func(q *storage.MappedFileQueue) error {
		r.segs = q
		return nil
	}}
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.st = st
	r.leader.Store(true)
	r.leaderAddr.Store(storeHost)
	t.Cleanup(func() { _ = st.Close() })
	return r
}

func (r *fakeReplica) setLeader(leader bool, addr string) {
	r.leader.Store(leader)
	r.leaderAddr.Store(addr)
	r.mu.Lock()
	r.term++
	fns, term := append([]func(bool, uint64){}, r.roleFns...), r.term
	r.mu.Unlock()
	for _, f := range fns {
		f(leader, term)
	}
}

func (r *fakeReplica) notLeader() error {
	return fmt.Errorf("%w; leader is %s", ErrNotLeader, r.LeaderAddr())
}

func (r *fakeReplica) IsLeader() bool     { return r.leader.Load() }
func (r *fakeReplica) LeaderAddr() string { return r.leaderAddr.Load().(string) }

func (r *fakeReplica) PutMessages(_ context.Context, msgs []*store.Message) ([]PutResult, error) {
	if !r.IsLeader() {
		return nil, r.notLeader()
	}
	if err := r.st.CheckDiskWritable(); err != nil {
		return nil, err
	}
	var batch []byte
	for _, m := range msgs {
		m.StoreHost = r.storeHost
		var err error
		if batch, err = wire.AppendMessage(batch, m); err != nil {
			return nil, err
		}
	}
	r.putMu.Lock()
	defer r.putMu.Unlock()
	mf, err := r.segs.LastOrCreate(r.segs.MaxOffset())
	if err != nil {
		return nil, err
	}
	if rem := mf.Remaining(); rem < len(batch)+wire.BlankHeaderSize {
		blank := make([]byte, rem)
		binary.BigEndian.PutUint32(blank, uint32(rem))
		binary.BigEndian.PutUint32(blank[4:], wire.MagicBlank)
		if _, err := mf.Append(blank); err != nil {
			return nil, err
		}
		if mf, err = r.segs.LastOrCreate(r.segs.MaxOffset()); err != nil {
			return nil, err
		}
	}
	base := mf.FileFromOffset() + int64(mf.WrotePosition())
	if err := store.PatchStoredBatch(batch, base, time.Now().UnixMilli()); err != nil {
		return nil, err
	}
	if _, err := mf.Append(batch); err != nil {
		return nil, err
	}
	if err := r.segs.Flush(); err != nil {
		return nil, err
	}
	// Like Apply on a real group: visible in the ConsumeQueue when acked.
	var reqs []*store.DispatchRequest
	for off := 0; off < len(batch); {
		req, n, err := store.CheckAndDecode(batch[off:])
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, &req)
		off += n
	}
	if err := r.st.Reput().DispatchRequests(reqs); err != nil {
		return nil, err
	}
	out := make([]PutResult, len(reqs))
	for i, req := range reqs {
		out[i] = PutResult{MsgID: wire.OffsetMsgID(r.storeHost, req.CommitLogOffset), QueueID: req.QueueID,
			QueueOffset: req.ConsumeQueueOffset, PhysicalOffset: req.CommitLogOffset, StoreTimestamp: req.StoreTimestamp}
	}
	return out, nil
}

func (r *fakeReplica) CommitOffsets(_ context.Context, commits []OffsetCommit) error {
	if !r.IsLeader() {
		return r.notLeader()
	}
	if r.failCommits.Load() {
		return fmt.Errorf("%w: injected", ErrApplyTimeout)
	}
	r.logOrder.Lock()
	defer r.logOrder.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range commits {
		k := c.Topic + "@" + c.Group
		if r.offsets[k] == nil {
			r.offsets[k] = map[int32]int64{}
		}
		r.offsets[k][c.QueueID] = c.Offset
	}
	return nil
}

func (r *fakeReplica) UpdateTopic(_ context.Context, tc wire.TopicConfig) error {
	if !r.IsLeader() {
		return r.notLeader()
	}
	r.topicWrites.Add(1)
	r.mu.Lock()
	gate := r.topicGate
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.topics[tc.TopicName] = tc
	r.dv.Counter++
	r.dv.Timestamp = time.Now().UnixMilli()
	return nil
}

// waitDeleteGate counts a delete and holds it while deleteGate is open;
// the caller applies it and then calls the function returned.
func (r *fakeReplica) waitDeleteGate() (applied func()) {
	r.logOrder.Lock()
	r.deletes.Add(1)
	r.mu.Lock()
	gate := r.deleteGate
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return r.logOrder.Unlock
}

func (r *fakeReplica) DeleteTopic(_ context.Context, topic string) error {
	if !r.IsLeader() {
		return r.notLeader()
	}
	defer r.waitDeleteGate()()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.topics, topic)
	r.dv.Counter++
	for k := range r.offsets { // as the FSM: the topic's offsets go with it
		if strings.HasPrefix(k, topic+"@") {
			delete(r.offsets, k)
		}
	}
	return nil
}

func (r *fakeReplica) UpdateSubscriptionGroup(_ context.Context, sg wire.SubscriptionGroupConfig) error {
	if !r.IsLeader() {
		return r.notLeader()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.groups[sg.GroupName] = sg
	return nil
}

func (r *fakeReplica) DeleteSubscriptionGroup(_ context.Context, group string, cleanOffset bool) error {
	if !r.IsLeader() {
		return r.notLeader()
	}
	defer r.waitDeleteGate()()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.groups, group)
	if cleanOffset {
		for k := range r.offsets {
			if strings.HasSuffix(k, "@"+group) {
				delete(r.offsets, k)
			}
		}
	}
	return nil
}

func (r *fakeReplica) UpdateScheduleOffsets(_ context.Context, p map[int32]int64) error {
	if !r.IsLeader() {
		return r.notLeader()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range p {
		r.sched[k] = v
	}
	return nil
}

func (r *fakeReplica) State() StateReader         { return (*fakeState)(r) }
func (r *fakeReplica) Store() *store.MessageStore { return r.st }
func (r *fakeReplica) OnRoleChange(f func(bool, uint64)) {
	r.mu.Lock()
	r.roleFns = append(r.roleFns, f)
	r.mu.Unlock()
}

// fakeState is the fake's StateReader (copies under the fake's lock).
type fakeState fakeReplica

func (s *fakeState) Topic(name string) (wire.TopicConfig, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tc, ok := s.topics[name]
	return tc, ok
}

func (s *fakeState) Topics() map[string]wire.TopicConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]wire.TopicConfig, len(s.topics))
	for k, v := range s.topics {
		out[k] = v
	}
	return out
}

func (s *fakeState) TopicsDataVersion() wire.DataVersion {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dv
}

func (s *fakeState) SubscriptionGroup(name string) (wire.SubscriptionGroupConfig, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[name]
	return g, ok
}

func (s *fakeState) SubscriptionGroups() map[string]wire.SubscriptionGroupConfig {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]wire.SubscriptionGroupConfig, len(s.groups))
	for k, v := range s.groups {
		out[k] = v
	}
	return out
}

func (s *fakeState) ConsumerOffset(group, topic string, queueID int32) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, ok := s.offsets[topic+"@"+group][queueID]
	return off, ok
}

func (s *fakeState) ConsumerOffsets() map[string]map[int32]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[int32]int64{}
	for k, m := range s.offsets {
		out[k] = map[int32]int64{}
		for q, o := range m {
			out[k][q] = o
		}
	}
	return out
}

func (s *fakeState) ScheduleOffsets() map[int32]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int32]int64, len(s.sched))
	for k, v := range s.sched {
		out[k] = v
	}
	return out
}
