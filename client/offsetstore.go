package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/raftmq/raftmq/storage"
	"os"
	"slices"
	"strconv"
	"sync"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// ReadOffsetType says where OffsetStore.Read looks (RocketMQ's
// ReadOffsetType).
type ReadOffsetType int

const (
	// ReadFromMemory returns only the cached offset.
	ReadFromMemory ReadOffsetType = iota
	// ReadFromStore asks the store (broker or file) and caches the answer.
	ReadFromStore
	// MemoryFirstThenStore uses the cache and falls back to the store.
	MemoryFirstThenStore
)

// OffsetStore keeps a consumer group's consume offsets: on the brokers
// for clustering consumption (RemoteOffsetStore), in a local file for
// broadcasting (LocalOffsetStore). Updates go to memory; Persist writes
// them out (the consumers call it every 5 s and on Close).
type OffsetStore interface {
	// Load reads persisted offsets into memory where that applies.
	Load() error
	// Update records offset for mq; with increaseOnly a smaller offset is
	// ignored (concurrent consumption commits out of order).
	Update(mq MessageQueue, offset int64, increaseOnly bool)
	// Read returns mq's offset, ErrOffsetNotFound when none is recorded.
	Read(ctx context.Context, mq MessageQueue, typ ReadOffsetType) (int64, error)
	// Persist writes the offsets of mqs out.
	Persist(ctx context.Context, mqs []MessageQueue) error
	// Remove forgets mq once its queue was handed to another consumer
	// and its offset committed; a store whose offsets only this consumer
	// keeps (LocalOffsetStore) keeps it instead.
	Remove(mq MessageQueue)
}

// offsetTable is the in-memory part shared by both stores.
type offsetTable struct {
	mu      sync.Mutex
	offsets map[MessageQueue]int64 // guarded by mu
}

func (t *offsetTable) update(mq MessageQueue, offset int64, increaseOnly bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.offsets == nil {
		t.offsets = map[MessageQueue]int64{}
	}
	if old, ok := t.offsets[mq]; ok && increaseOnly && offset < old {
		return
	}
	t.offsets[mq] = offset
}

func (t *offsetTable) get(mq MessageQueue) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	off, ok := t.offsets[mq]
	return off, ok
}

func (t *offsetTable) remove(mq MessageQueue) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.offsets, mq)
}

func (t *offsetTable) snapshot() map[MessageQueue]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[MessageQueue]int64, len(t.offsets))
	for mq, off := range t.offsets {
		out[mq] = off
	}
	return out
}

// LocalOffsetStore keeps offsets in one JSON file, for broadcasting
// consumers (every consumer has its own progress). Writes are atomic: a
// temporary file, fsync, rename, directory fsync.
type LocalOffsetStore struct {
	path   string
	table  offsetTable
	fileMu sync.Mutex // serializes Persist
}

// NewLocalOffsetStore returns a store backed by path (created on first
// Persist; its directory must be writable).
func NewLocalOffsetStore(path string) *LocalOffsetStore { return &LocalOffsetStore{path: path} }

// offsetFile is the file layout: a list, since JSON object keys cannot be
// message queues.
type offsetFile struct {
	Offsets []offsetEntry `json:"offsetTable"`
}

type offsetEntry struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
	Offset     int64  `json:"offset"`
}

// Load reads the file; a missing file is an empty store.
func (s *LocalOffsetStore) Load() error {
	stored, err := s.readFile()
	if err != nil {
		return err
	}
	for mq, off := range stored {
		s.table.update(mq, off, false)
	}
	return nil
}

// readFile returns the offsets the file holds (none when it is missing).
func (s *LocalOffsetStore) readFile() (map[MessageQueue]int64, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("client: read offsets: %w", err)
	}
	var f offsetFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("client: offsets file %s is corrupt (%v); move it away to start from ConsumeFromWhere", s.path, err)
	}
	out := make(map[MessageQueue]int64, len(f.Offsets))
	for _, e := range f.Offsets {
		out[MessageQueue{Topic: e.Topic, BrokerName: e.BrokerName, QueueID: e.QueueID}] = e.Offset
	}
	return out, nil
}

// readStored returns mq's offset in the file without storing it in
// memory, where a newer one may be (ErrOffsetNotFound when the file has
// none).
func (s *LocalOffsetStore) readStored(mq MessageQueue) (int64, error) {
	stored, err := s.readFile()
	if err != nil {
		return 0, err
	}
	off, ok := stored[mq]
	if !ok {
		return 0, fmt.Errorf("%w: %s in %s", ErrOffsetNotFound, mq, s.path)
	}
	return off, nil
}

// Update implements OffsetStore.
func (s *LocalOffsetStore) Update(mq MessageQueue, offset int64, increaseOnly bool) {
	s.table.update(mq, offset, increaseOnly)
}

// Read implements OffsetStore. ReadFromStore reads the file and stores
// mq's offset from it in memory, no other queue's: theirs in memory may
// be newer than the last Persist (RocketMQ's LocalFileOffsetStore).
func (s *LocalOffsetStore) Read(_ context.Context, mq MessageQueue, typ ReadOffsetType) (int64, error) {
	if typ != ReadFromStore {
		if off, ok := s.table.get(mq); ok {
			return off, nil
		}
		if typ == ReadFromMemory {
			return 0, ErrOffsetNotFound
		}
	}
	off, err := s.readStored(mq)
	if err != nil {
		return 0, err
	}
	s.table.update(mq, off, false)
	return off, nil
}

// Remove implements OffsetStore; it keeps mq's offset, in memory and so in
// the file. A broadcasting consumer consumes every queue of its topics, so
// a queue leaves it only by leaving the route (its broker group gone from
// the name server, its read queues shrunk) and is its own again when it
// comes back: it resumes at its offset, where ConsumeFromWhere would skip
// or repeat messages (RocketMQ's LocalFileOffsetStore.removeOffset does
// nothing either).
func (s *LocalOffsetStore) Remove(MessageQueue) {}

// Persist writes every offset in memory, mqs or not: those of queues that
// left the route too (Remove keeps them), so a queue that comes back after
// a restart resumes at its offset. The file is this consumer's alone
// (OffsetDir).
func (s *LocalOffsetStore) Persist(_ context.Context, _ []MessageQueue) error {
	snap := s.table.snapshot()
	f := offsetFile{Offsets: make([]offsetEntry, 0, len(snap))}
	for mq, off := range snap {
		f.Offsets = append(f.Offsets, offsetEntry{Topic: mq.Topic, BrokerName: mq.BrokerName, QueueID: mq.QueueID, Offset: off})
	}
	slices.SortFunc(f.Offsets, func(a, b offsetEntry) int {
		return CompareQueues(MessageQueue{a.Topic, a.BrokerName, a.QueueID}, MessageQueue{b.Topic, b.BrokerName, b.QueueID})
	})
	data, err := json.MarshalIndent(&f, "", "  ")
	if err != nil {
		return err
	}
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if err := storage.WriteFileAtomic(storage.OSFS(), s.path, data); err != nil {
		return fmt.Errorf("client: offsets: %w", err)
	}
	return nil
}

// BrokerResolver returns the address to ask about a broker group's
// offsets ("" when the group is unknown).
type BrokerResolver func(brokerName string) string

// RemoteOffsetStore keeps a clustering group's offsets on the brokers:
// QUERY_CONSUMER_OFFSET (14) to read, UPDATE_CONSUMER_OFFSET (15) to
// write (RocketMQ's RemoteBrokerOffsetStore). In raftmq the update goes
// through the group's Raft log, so a new leader knows every offset.
type RemoteOffsetStore struct {
	group   string
	rc      *remoting.Client
	resolve BrokerResolver
	table   offsetTable

	mu sync.Mutex
	// known is, per queue, the group's committed offset as this store last
	// read it or had it confirmed (-1: the broker had none); a queue's
	// hand-over takes it along (knownCommitted, persistUnlessPassed).
	known map[MessageQueue]int64 // guarded by mu
}

// NewRemoteOffsetStore returns a store for group talking through rc to the
// addresses resolve gives.
func NewRemoteOffsetStore(group string, rc *remoting.Client, resolve BrokerResolver) *RemoteOffsetStore {
	return &RemoteOffsetStore{group: group, rc: rc, resolve: resolve}
}

// Load implements OffsetStore; remote offsets are read lazily.
func (s *RemoteOffsetStore) Load() error { return nil }

// Update implements OffsetStore.
func (s *RemoteOffsetStore) Update(mq MessageQueue, offset int64, increaseOnly bool) {
	s.table.update(mq, offset, increaseOnly)
}

// Remove implements OffsetStore.
func (s *RemoteOffsetStore) Remove(mq MessageQueue) {
	s.table.remove(mq)
	s.mu.Lock()
	delete(s.known, mq)
	s.mu.Unlock()
}

// Read implements OffsetStore. A broker answering QUERY_NOT_FOUND (22)
// gives ErrOffsetNotFound.
func (s *RemoteOffsetStore) Read(ctx context.Context, mq MessageQueue, typ ReadOffsetType) (int64, error) {
	if typ != ReadFromStore {
		if off, ok := s.table.get(mq); ok {
			return off, nil
		}
		if typ == ReadFromMemory {
			return 0, ErrOffsetNotFound
		}
	}
	off, err := s.readCommitted(ctx, mq)
	if err != nil {
		return 0, err
	}
	s.table.update(mq, off, false)
	return off, nil
}

// readCommitted asks mq's broker for the group's committed offset, as
// Read with ReadFromStore does, without storing it in memory, where a
// newer offset no broker has taken yet may be kept.
func (s *RemoteOffsetStore) readCommitted(ctx context.Context, mq MessageQueue) (int64, error) {
	addr := s.resolve(mq.BrokerName)
	if addr == "" {
		return 0, fmt.Errorf("%w: broker group %q", ErrNoQueue, mq.BrokerName)
	}
	off, err := s.queryAt(ctx, mq, addr)
	switch {
	case errors.Is(err, ErrOffsetNotFound):
		s.setKnown(mq, -1)
		return 0, err
	case err != nil:
		return 0, err
	}
	s.setKnown(mq, off)
	return off, nil
}

func (s *RemoteOffsetStore) setKnown(mq MessageQueue, off int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.known == nil {
		s.known = map[MessageQueue]int64{}
	}
	s.known[mq] = off
}

// queryAt asks addr for the group's committed offset of mq
// (ErrOffsetNotFound when it has none).
func (s *RemoteOffsetStore) queryAt(ctx context.Context, mq MessageQueue, addr string) (int64, error) {
	req := remoting.NewRequest(remoting.RequestQueryConsumerOffset,
		&wire.QueryConsumerOffsetRequestHeader{ConsumerGroup: s.group, Topic: mq.Topic, QueueID: int32(mq.QueueID), BrokerName: mq.BrokerName}, nil)
	resp, err := s.rc.InvokeSync(ctx, addr, req)
	if err != nil {
		return 0, err
	}
	switch resp.Code {
	case remoting.ResponseSuccess:
	case remoting.ResponseQueryNotFound:
		return 0, fmt.Errorf("%w: %s of group %s", ErrOffsetNotFound, mq, s.group)
	default:
		return 0, &BrokerError{Broker: mq.BrokerName, Addr: addr, Code: resp.Code, Remark: resp.Remark, LeaderAddr: resp.ExtFields[wire.ExtLeaderAddr]}
	}
	off, err := strconv.ParseInt(resp.ExtFields["offset"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("client: offset answer from %s: %q is not a number", addr, resp.ExtFields["offset"])
	}
	return off, nil
}

// Persist sends the in-memory offset of each of mqs to its broker and
// waits for each answer; it returns every failure joined.
func (s *RemoteOffsetStore) Persist(ctx context.Context, mqs []MessageQueue) error {
	var errs []error
	for _, mq := range mqs {
		addr := s.resolve(mq.BrokerName)
		if addr == "" {
			if _, ok := s.table.get(mq); ok {
				errs = append(errs, fmt.Errorf("%w: broker group %q", ErrNoQueue, mq.BrokerName))
			}
			continue
		}
		if _, err := s.persistAt(ctx, mq, addr); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// persistAt sends mq's in-memory offset to addr and waits for the answer;
// it returns the offset sent (-1 when none is recorded, and nothing is
// sent).
func (s *RemoteOffsetStore) persistAt(ctx context.Context, mq MessageQueue, addr string) (int64, error) {
	off, ok := s.table.get(mq)
	if !ok {
		return -1, nil
	}
	req := remoting.NewRequest(remoting.RequestUpdateConsumerOffset, &wire.UpdateConsumerOffsetRequestHeader{
		ConsumerGroup: s.group, Topic: mq.Topic, QueueID: int32(mq.QueueID), CommitOffset: off, BrokerName: mq.BrokerName}, nil)
	resp, err := s.rc.InvokeSync(ctx, addr, req)
	if err != nil {
		return off, fmt.Errorf("client: commit offset of %s: %w", mq, err)
	}
	if resp.Code != remoting.ResponseSuccess {
		return off, &BrokerError{Broker: mq.BrokerName, Addr: addr, Code: resp.Code, Remark: resp.Remark, LeaderAddr: resp.ExtFields[wire.ExtLeaderAddr]}
	}
	s.setKnown(mq, off)
	return off, nil
}

// persistUnlessPassed is persistAt for a queue handed to another consumer:
// it first asks addr for the group's committed offset, and does not send
// mq's when that is already at or past it and is not known, the one this
// store knew when the queue was handed over (knownCommitted; hasKnown
// false when it knew none): the queue's new owner committed since, and
// brokers keep the last offset they are sent, so ours would move the
// owner's back (RocketMQ's client sends a queue's offset once, when it
// gives the queue up, never after). The store's own record is no guide
// here: reading the start offset of the queue coming back records the new
// owner's commit. A committed offset below ours is an older one of ours
// or the new owner's still behind ours: sending ours then loses nothing. It returns mq's offset, sent or not (-1 when
// none is recorded, and nothing is asked).
func (s *RemoteOffsetStore) persistUnlessPassed(ctx context.Context, mq MessageQueue, addr string, known int64, hasKnown bool) (int64, error) {
	off, ok := s.table.get(mq)
	if !ok {
		return -1, nil
	}
	committed, err := s.queryAt(ctx, mq, addr)
	switch {
	case errors.Is(err, ErrOffsetNotFound):
		committed = -1
	case err != nil:
		return off, err
	}
	if committed >= off && (!hasKnown || committed != known) {
		return off, nil
	}
	return s.persistAt(ctx, mq, addr)
}

// knownCommitted returns the group's committed offset of mq as this store
// last read it or had it confirmed (-1: the broker had none); ok is false
// when it knows none.
func (s *RemoteOffsetStore) knownCommitted(mq MessageQueue) (off int64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	off, ok = s.known[mq]
	return off, ok
}
