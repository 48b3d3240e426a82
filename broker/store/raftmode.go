package store

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// RaftHooks connect a MessageStore to its Raft log (Config.Raft): the
// CommitLog's segment queue is the Raft log's file space (package raftlog
// frames Raft entries in it, message batches inside the frames), so
//
//   - every append is a Raft entry written (and synced) by the Raft log
//     store; the store has no put path of its own;
//   - OpenLog recovers the space and cuts a torn tail (the store does not
//     scan it: a Raft frame is not a stored message);
//   - the FSM dispatches committed messages with Reput().DispatchRequests;
//   - retention deletes segments through Segments, which moves the Raft
//     log's first index durably before files go.
type RaftHooks struct {
	// OpenLog is called once during Open with the CommitLog's segment
	// queue, before ConsumeQueues are loaded and cut to the CommitLog's end.
	// It opens the Raft log store over the queue (raftlog.OpenOnQueue),
	// which recovers the space and cuts a torn tail.
	OpenLog func(q *storage.MappedFileQueue) error
	// Segments is what retention deletes CommitLog segments through; nil
	// disables time- and space-based CommitLog deletion (ConsumeQueue and
	// index files still follow the CommitLog's minimum offset).
	Segments ExpiringFiles
}

// noExpiry is the ExpiringFiles of a store without RaftHooks.Segments.
type noExpiry struct{ q *storage.MappedFileQueue }

func (n noExpiry) DeleteExpired(time.Time, int, int) (int, error) { return 0, nil }
func (n noExpiry) MinOffset() int64                               { return n.q.MinOffset() }

// PatchStoredBatch writes PHYSICALOFFSET (base + the message's offset in
// data) and STORETIMESTAMP into every stored message of a batch in place and
// reseals each entry CRC. It is deterministic and idempotent, which the Raft
// log store's PatchCommand requires (followers may get patched or unpatched
// copies of the same entry and must end with identical bytes).
func PatchStoredBatch(data []byte, base int64, storeTimestampMs int64) error {
	off := 0
	for off < len(data) {
		// The entry may come from a leader over the network: its layout
		// is checked before the fixed-position writes.
		l, err := wire.CheckEntry(data[off:], false)
		if err == nil && l.Magic == wire.MagicBlank {
			err = errors.New("blank filler in a batch")
		}
		if err != nil {
			return fmt.Errorf("%w: message at batch offset %d of %d: %v", ErrCorruptMessage, off, len(data), err)
		}
		wire.PatchStored(data[off:off+l.Size], base+int64(off), storeTimestampMs)
		off += l.Size
	}
	return nil
}

// StartQueueAt makes the queue topic/queueID continue at logical offset
// next when it is behind it: a follower that installed a snapshot continues
// its queues where the leader's were (queue offsets are identical on every
// replica). A queue at or past next is left alone; a queue behind it (its
// units point into segments the snapshot install removed) is destroyed and
// restarted empty at next, with blank units before it (RocketMQ's
// fillPreBlank). Called only from Raft apply/restore.
func (s *ConsumeQueueStore) StartQueueAt(topic string, queueID int32, next int64) error {
	// next comes from a snapshot image; a queue offset whose byte position
	// does not fit an int64 is not one any queue can reach.
	if next < 0 || next > math.MaxInt64/CQUnitSize {
		return fmt.Errorf("consume queue %s/%d: cannot start at offset %d: %w", topic, queueID, next, ErrCorruptFile)
	}
	cq := s.Get(topic, queueID)
	if cq != nil && cq.MaxOffset() >= next {
		return nil
	}
	if cq != nil {
		cq.mu.Lock()
		err := cq.destroyLocked()
		cq.mu.Unlock()
		if err != nil {
			return fmt.Errorf("consume queue %s/%d: destroy before restart at %d: %w", topic, queueID, next, err)
		}
		s.mu.Lock()
		delete(s.queues[topic], queueID)
		s.mu.Unlock()
	}
	cq, err := s.FindOrCreate(topic, queueID)
	if err != nil {
		return err
	}
	if next == 0 {
		return nil
	}
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.fillPreBlankLocked(next)
}

// FlushLogics makes the ConsumeQueues and the index, its live file too,
// durable and writes the checkpoint that says so (a Raft snapshot marker
// is only taken once everything it covers is; a catch-up finishes only
// once the units and index files it added below the live ones are).
// Without it a crash recovery drops the index files newer than the last
// periodic checkpoint, and their entries below the snapshot must be
// indexed again from the log (the broker's index rebuild).
func (s *MessageStore) FlushLogics() error { return s.writeCheckpoint(true) }

// CheckDiskWritable says why the Raft group must refuse new messages (store
// closed, disk above the full ratio), or returns nil.
func (s *MessageStore) CheckDiskWritable() error {
	if s.closed.Load() {
		return fmt.Errorf("%w: %w", ErrServiceNotAvailable, ErrStoreClosed)
	}
	if err := s.clean.CheckWritable(); err != nil {
		return fmt.Errorf("%w: %w", ErrServiceNotAvailable, err)
	}
	return nil
}

// DiskFull reports whether the disk guard currently refuses writes (use
// above the full ratio, or a recent ENOSPC). A Raft leader that sees it
// hands leadership to a follower with room.
func (s *MessageStore) DiskFull() bool { return s.clean.DiskFull() }

// NoteWriteError sets the disk guard at once when err, the raw error of a
// file operation made for this store's group (Raft log append, checkpoint,
// snapshot), is ENOSPC or EDQUOT, instead of waiting for the next usage
// check; it reports whether it did. See CleanService.NoteWriteError.
func (s *MessageStore) NoteWriteError(err error) bool { return s.clean.NoteWriteError(err) }
