package store

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// segLog stands in for the Raft log store in this package's tests: stored
// messages appended to a MappedFileQueue (with RocketMQ's blank filler at
// segment ends instead of Raft frames), and decoded back into dispatch
// requests the way the FSM decodes a committed entry. The real log store
// (package raftlog) is tested by its owner; this keeps the store's tests
// independent of Raft.
type segLog struct {
	t   testing.TB
	mfq *storage.MappedFileQueue
	ts  int64
	// end is the durable end of the log (see sync): attach cuts a reopened
	// queue there, as the Raft log store cuts a torn tail.
	end int64
}

func newSegLog(t testing.TB, fsys storage.FS, dir string, segSize int) *segLog {
	t.Helper()
	mfq, err := storage.OpenMappedFileQueue(fsys, filepath.Join(dir, "commitlog"), segSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mfq.Close() })
	return &segLog{t: t, mfq: mfq, ts: 1_700_000_000_000}
}

// hooks returns RaftHooks that put l over the store's CommitLog queue.
func (l *segLog) hooks() *RaftHooks {
	return &RaftHooks{OpenLog: func(q *storage.MappedFileQueue) error {
		l.mfq = q
		return q.TruncateDirty(l.end)
	}}
}

// append stores m and returns its physical offset and size.
func (l *segLog) append(m *Message) (int64, int) {
	l.t.Helper()
	if !m.BornHost.IsValid() {
		m.BornHost = netip.MustParseAddrPort("127.0.0.1:5555")
	}
	if !m.StoreHost.IsValid() {
		m.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	}
	b, err := wire.AppendMessage(nil, m)
	if err != nil {
		l.t.Fatal(err)
	}
	for {
		mf, err := l.mfq.LastOrCreate(l.mfq.MaxOffset())
		if err != nil {
			l.t.Fatal(err)
		}
		if mf.Remaining() < len(b)+wire.BlankHeaderSize {
			blank := make([]byte, mf.Remaining())
			binary.BigEndian.PutUint32(blank[0:], uint32(len(blank)))
			binary.BigEndian.PutUint32(blank[4:], wire.MagicBlank)
			if _, err := mf.Append(blank); err != nil {
				l.t.Fatal(err)
			}
			continue
		}
		phy := mf.FileFromOffset() + int64(mf.WrotePosition())
		l.ts += 1000
		wire.PatchStored(b, phy, l.ts)
		if _, err := mf.Append(b); err != nil {
			l.t.Fatal(err)
		}
		return phy, len(b)
	}
}

// sync makes everything appended durable, as the Raft log store does
// before an entry is acknowledged.
func (l *segLog) sync() {
	l.t.Helper()
	if err := l.mfq.Flush(); err != nil {
		l.t.Fatal(err)
	}
	l.end = l.mfq.MaxOffset()
}

// requests decodes the messages stored in [from, to), skipping blank
// fillers, as the FSM decodes the messages of committed entries.
func (l *segLog) requests(from, to int64) []*DispatchRequest {
	l.t.Helper()
	var reqs []*DispatchRequest
	for pos := from; pos < to; {
		mf := l.mfq.FindByOffset(pos)
		if mf == nil {
			l.t.Fatalf("no segment holds offset %d", pos)
		}
		req, n, err := CheckAndDecode(mf.Bytes()[pos-mf.FileFromOffset():])
		if errors.Is(err, ErrEndOfData) {
			break
		}
		if err != nil {
			l.t.Fatalf("message at %d: %v", pos, err)
		}
		if req.Blank {
			pos = mf.FileFromOffset() + int64(mf.Size())
			continue
		}
		reqs = append(reqs, &req)
		pos += int64(n)
	}
	return reqs
}

// dispatch hands [from, to) of l to r, as the FSM applies entries.
func (l *segLog) dispatch(r *ReputService, from, to int64) {
	l.t.Helper()
	if err := r.DispatchRequests(l.requests(from, to)); err != nil {
		l.t.Fatal(err)
	}
}

// testStore is a MessageStore on a segLog: put appends, syncs and
// dispatches like a committed Raft entry.
type testStore struct {
	*MessageStore
	log *segLog
}

// openTestStore opens a store over log (a fresh segLog{t: t} for a new
// store; the same one to reopen, which re-applies the whole log as the FSM
// does after a restart without a snapshot).
func openTestStore(t testing.TB, cfg Config, log *segLog) *testStore {
	t.Helper()
	if log.ts == 0 {
		log.ts = 1_700_000_000_000
	}
	log.t = t
	cfg.Raft = log.hooks()
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := &testStore{MessageStore: s, log: log}
	log.dispatch(s.Reput(), s.CommitLog().MinOffset(), log.end)
	return ts
}

// put stores msgs as one committed entry and returns their positions.
func (s *testStore) put(msgs ...*Message) []*DispatchRequest {
	from := s.log.mfq.MaxOffset()
	for _, m := range msgs {
		s.log.append(m)
	}
	s.log.sync()
	reqs := s.log.requests(from, s.log.end)
	if err := s.Reput().DispatchRequests(reqs); err != nil {
		s.log.t.Fatal(err)
	}
	return reqs
}
