package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"strconv"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// Deleted topics (DELETE_TOPIC_IN_BROKER). As in RocketMQ
// (DefaultMessageStore.deleteTopics), deleting a topic destroys its
// ConsumeQueues, so a topic created again under the name starts empty at
// offset 0 and the deleted topic's messages are never served again.
//
// Queue offsets are assigned by every replica's FSM, and a replica may
// dispatch a deleted topic's messages again after the delete (the FSM
// re-applies the log after its snapshot at a restart). So the store
// remembers, per topic, the CommitLog offset where its last delete was
// applied (the end of the delete's log entry): a message of the topic
// below it belongs to the deleted topic and gets no unit, whenever it is
// dispatched, and a delete whose offset is not above the remembered one
// was already carried out (the queues there now are the new topic's).
// The offsets are kept in the consumequeue directory (the name holds a
// '.', which no topic may) and in Raft snapshots, so every replica's
// queues of a created-again topic hold the same messages at the same
// offsets, also after a restart or a snapshot install. The offsets are
// never pruned: a member that missed a delete and later installs a snapshot
// relies on the image naming it (DESIGN.md, "Deleted topics", says what a
// safe prune would need).
const deletedTopicsName = "deleted-topics.json"

func (s *ConsumeQueueStore) deletedTopicsPath() string {
	return filepath.Join(s.root, deletedTopicsName)
}

// loadDeletedTopics reads the deleted topics' offsets (none if the file
// does not exist).
func (s *ConsumeQueueStore) loadDeletedTopics() error {
	path := s.deletedTopicsPath()
	if err := storage.RemoveTempFiles(s.fsys, path); err != nil {
		return fmt.Errorf("consume queue store: %w", err)
	}
	data, err := readWholeFile(s.fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("consume queue store: read %s: %w", path, err)
	}
	var m map[string]int64
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("consume queue store: %s: %v: %w", path, err, ErrCorruptFile)
	}
	for t, off := range m {
		if off < 0 {
			return fmt.Errorf("consume queue store: %s: topic %q deleted at negative offset %d: %w", path, t, off, ErrCorruptFile)
		}
	}
	s.deleted.Store(&m)
	return nil
}

// dropDeletedTopicsQueues drops, at open, the queues a crash in the
// middle of a delete left (dropDeletedQueues for every deleted topic).
func (s *ConsumeQueueStore) dropDeletedTopicsQueues() error {
	for topic := range s.DeletedTopics() {
		if err := s.dropDeletedQueues(topic); err != nil {
			return err
		}
	}
	return nil
}

// DeletedAt is the CommitLog offset at which topic was last deleted (0:
// never): its messages below it are not put in its queues.
func (s *ConsumeQueueStore) DeletedAt(topic string) int64 {
	if m := s.deleted.Load(); m != nil {
		return (*m)[topic]
	}
	return 0
}

// DeletedTopics returns every deleted topic's DeletedAt (a copy; nil when
// none was deleted).
func (s *ConsumeQueueStore) DeletedTopics() map[string]int64 {
	if m := s.deleted.Load(); m != nil {
		return maps.Clone(*m)
	}
	return nil
}

// DeleteTopicAt carries out the delete of topic applied at CommitLog
// offset at (the end of the delete's log entry). The offset is made
// durable first (unless the topic was deleted at or after it already: a
// re-applied delete), then every queue of the topic that holds no unit of
// a message after the topic's last delete is destroyed. The queues of the
// topic created again after it (units past the offset) stay. Doing it
// again after a failure or a crash at any point finishes it, and a store
// opened after such a crash drops the remains (Load). Called only from
// Raft apply/restore.
func (s *ConsumeQueueStore) DeleteTopicAt(topic string, at int64) error {
	if at < 0 {
		return fmt.Errorf("consume queue store: delete topic %s at negative offset %d: %w", topic, at, ErrCorruptFile)
	}
	if s.DeletedAt(topic) < at {
		next := s.DeletedTopics()
		if next == nil {
			next = map[string]int64{}
		}
		next[topic] = at
		data, err := json.Marshal(next)
		if err != nil {
			return err
		}
		if err := storage.WriteFileAtomic(s.fsys, s.deletedTopicsPath(), data); err != nil {
			return fmt.Errorf("consume queue store: record delete of topic %s: %w", topic, err)
		}
		s.deleted.Store(&next)
		s.log.Info("topic deleted: its consume queues are destroyed", zap.String("topic", topic), zap.Int64("commitLogOffset", at))
	}
	return s.dropDeletedQueues(topic)
}

// dropDeletedQueues destroys the queues of topic that hold no unit of a
// message after its DeletedAt: those of the deleted topic (every unit
// below it), and those a crash in the middle of the delete left. A queue
// of the topic created again has a unit past it (queues are created by a
// dispatch, or by a snapshot restore that comes after the delete).
func (s *ConsumeQueueStore) dropDeletedQueues(topic string) error {
	at := s.DeletedAt(topic)
	if at == 0 {
		return nil
	}
	// Queues whose destroy failed before are no longer in the table but
	// may have files left: opened again, they are judged like the others.
	dirs, err := s.fsys.ReadDir(filepath.Join(s.root, topic))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("consume queue store: list topic %s: %w", topic, err)
	}
	for _, d := range dirs {
		if id, err := strconv.ParseInt(d.Name(), 10, 32); err == nil && d.IsDir() {
			if _, err := s.FindOrCreate(topic, int32(id)); err != nil {
				return err
			}
		}
	}
	s.mu.Lock()
	var stale []*ConsumeQueue
	for id, cq := range s.queues[topic] {
		if cq.MaxPhysicOffset() <= at {
			stale = append(stale, cq)
			delete(s.queues[topic], id)
		}
	}
	if len(s.queues[topic]) == 0 {
		delete(s.queues, topic)
	}
	s.mu.Unlock()
	if len(stale) == 0 {
		return nil
	}
	var first error
	for _, cq := range stale {
		cq.mu.Lock()
		err := cq.destroyLocked()
		cq.mu.Unlock()
		if err == nil {
			_ = s.fsys.Remove(cq.mfq.Dir())
		} else if first == nil {
			first = fmt.Errorf("consume queue %s/%d: destroy: %w", topic, cq.queueID, err)
		}
	}
	_ = s.fsys.Remove(filepath.Join(s.root, topic)) // fails while queues of the new topic are in it
	// An empty queue directory left by a crash would open as a queue of
	// the topic at offset 0, one other replicas do not have.
	if err := s.fsys.SyncDir(filepath.Join(s.root, topic)); err != nil && !errors.Is(err, fs.ErrNotExist) && first == nil {
		first = err
	}
	if err := s.fsys.SyncDir(s.root); err != nil && first == nil {
		first = err
	}
	return first
}

// RestoreDeletedTopics carries out the deletes a Raft snapshot knows of
// and this store does not (DeleteTopicAt for each): a member that
// installs a snapshot taken after a delete drops the queues it still has
// of the deleted topic.
func (s *ConsumeQueueStore) RestoreDeletedTopics(deleted map[string]int64) error {
	for topic, at := range deleted {
		if err := s.DeleteTopicAt(topic, at); err != nil {
			return err
		}
	}
	return nil
}
