package broker

import (
	"maps"
	"sort"
	"strings"
	"sync"

	"github.com/raftmq/raftmq/wire"
)

// state holds the replicated tables. Apply (the FSM goroutine) is the only
// writer; processors read through StateReader methods, which copy under the
// read lock.
type state struct {
	mu sync.RWMutex
	// Guarded by mu.
	topics        map[string]wire.TopicConfig
	topicsVersion wire.DataVersion
	groups        map[string]wire.SubscriptionGroupConfig
	offsets       map[string]map[int32]int64 // "topic@group" → queue → offset
	schedule      map[int32]int64
	members       map[string]string // raft server id → remoting address
	dedup         *dedupTable
	timer         TimerCursor
	txn           *txnTable
}

func newState(dedupWindow int, dedupTTLms int64) *state {
	return &state{
		topics:   map[string]wire.TopicConfig{},
		groups:   map[string]wire.SubscriptionGroupConfig{},
		offsets:  map[string]map[int32]int64{},
		schedule: map[int32]int64{},
		members:  map[string]string{},
		dedup:    newDedupTable(dedupWindow, dedupTTLms),
		txn:      newTxnTable(),
	}
}

var _ StateReader = (*state)(nil)

// topicGroupKey is RocketMQ's ConsumerOffsetManager key.
func topicGroupKey(topic, group string) string { return topic + "@" + group }

// bumpTopicsVersionLocked changes the data version deterministically (log
// time and a counter), so every replica reports the same version.
func (s *state) bumpTopicsVersionLocked(nowMs int64) {
	s.topicsVersion.Timestamp = nowMs
	s.topicsVersion.Counter++
}

// applyLocked applies a non-message command.
func (s *state) applyLocked(c *Command, nowMs int64) {
	switch c.Type {
	case CmdOffsets:
		for _, o := range c.Offsets {
			k := topicGroupKey(o.Topic, o.Group)
			q := s.offsets[k]
			if q == nil {
				q = map[int32]int64{}
				s.offsets[k] = q
			}
			q[o.QueueID] = o.Offset
		}
	case CmdUpdateTopic:
		s.topics[c.Topic.TopicName] = c.Topic
		s.bumpTopicsVersionLocked(nowMs)
	case CmdDeleteTopic:
		// The topic's queues are destroyed (fsm.deleteTopicQueues); the
		// dedup windows of its queues go with them.
		if _, ok := s.topics[c.Name]; ok {
			delete(s.topics, c.Name)
			s.bumpTopicsVersionLocked(nowMs)
		}
		s.dedup.dropTopic(c.Name)
		for k := range s.offsets {
			if strings.HasPrefix(k, c.Name+"@") {
				delete(s.offsets, k)
			}
		}
	case CmdUpdateGroup:
		s.groups[c.Group.GroupName] = c.Group
	case CmdDeleteGroup:
		delete(s.groups, c.Name)
		if c.KeepOffsets {
			break
		}
		for k := range s.offsets {
			if strings.HasSuffix(k, "@"+c.Name) {
				delete(s.offsets, k)
			}
		}
	case CmdScheduleOffsets:
		maps.Copy(s.schedule, c.Schedule)
	case CmdMemberAddr:
		s.members[c.MemberID] = c.MemberAddr
	case CmdTxnCheck:
		s.txn.applyCheck(c.TxnCheck, nowMs)
	case CmdDedupParams:
		s.dedup.setParams(c.Dedup)
	}
}

// Topic implements StateReader.
func (s *state) Topic(name string) (wire.TopicConfig, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.topics[name]
	return t, ok
}

// Topics implements StateReader.
func (s *state) Topics() map[string]wire.TopicConfig {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.topics)
}

// TopicsDataVersion implements StateReader.
func (s *state) TopicsDataVersion() wire.DataVersion {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.topicsVersion
}

// SubscriptionGroup implements StateReader.
func (s *state) SubscriptionGroup(name string) (wire.SubscriptionGroupConfig, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g, ok := s.groups[name]
	return g, ok
}

// SubscriptionGroups implements StateReader.
func (s *state) SubscriptionGroups() map[string]wire.SubscriptionGroupConfig {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.groups)
}

// ConsumerOffset implements StateReader.
func (s *state) ConsumerOffset(group, topic string, queueID int32) (int64, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	off, ok := s.offsets[topicGroupKey(topic, group)][queueID]
	return off, ok
}

// ConsumerOffsets implements StateReader.
func (s *state) ConsumerOffsets() map[string]map[int32]int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]map[int32]int64, len(s.offsets))
	for k, q := range s.offsets {
		out[k] = maps.Clone(q)
	}
	return out
}

// ScheduleOffsets implements StateReader.
func (s *state) ScheduleOffsets() map[int32]int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.schedule)
}

// dedupParams is the dedup window and TTL the FSM applies.
func (s *state) dedupParams() dedupParams {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.dedup.params()
}

func (s *state) memberAddr(id string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.members[id]
}

// queueNext is a ConsumeQueue's next logical offset at a snapshot: a
// follower that installs the snapshot continues each queue there.
type queueNext struct {
	Topic   string `json:"topic"`
	QueueID int32  `json:"queueId"`
	Next    int64  `json:"next"`
}

// stateImage is the snapshot form of the tables (JSON after the log
// position record). Tables of wire types are stored as broker records (see
// command_records.go), so the snapshot format is the broker's own.
type stateImage struct {
	Topics        map[string]topicRecord     `json:"topics"`
	TopicsVersion versionRecord              `json:"topicsVersion"`
	Groups        map[string]groupRecord     `json:"groups"`
	Offsets       map[string]map[int32]int64 `json:"offsets"`
	Schedule      map[int32]int64            `json:"schedule"`
	Members       map[string]string          `json:"members"`
	Dedup         dedupImage                 `json:"dedup"`
	Queues        []queueNext                `json:"queues"`
	// Timer is the timer service's cursor; absent while it is zero (images
	// from before timer messages).
	Timer *TimerCursor `json:"timer,omitempty"`
	// Txn is the transaction table; absent while it is empty (images from
	// before transactions).
	Txn *txnImage `json:"txn,omitempty"`
	// DeletedTopics is each deleted topic's CommitLog offset of its last
	// delete (store.ConsumeQueueStore.DeletedAt); absent while no topic
	// was deleted.
	DeletedTopics map[string]int64 `json:"deletedTopics,omitempty"`
}

// imageLocked deep-copies the tables (the snapshot is persisted while Apply
// goes on).
func (s *state) imageLocked() stateImage {
	img := stateImage{
		Topics:        make(map[string]topicRecord, len(s.topics)),
		TopicsVersion: versionRecordOf(s.topicsVersion),
		Groups:        make(map[string]groupRecord, len(s.groups)),
		Offsets:       make(map[string]map[int32]int64, len(s.offsets)),
		Schedule:      maps.Clone(s.schedule),
		Members:       maps.Clone(s.members),
		Dedup:         s.dedup.image(),
		Txn:           s.txn.image(),
	}
	if s.timer != (TimerCursor{}) {
		c := s.timer
		img.Timer = &c
	}
	for name, tc := range s.topics {
		img.Topics[name] = topicRecordOf(tc)
	}
	for name, g := range s.groups {
		img.Groups[name] = groupRecordOf(g)
	}
	for k, q := range s.offsets {
		img.Offsets[k] = maps.Clone(q)
	}
	return img
}

func (s *state) loadLocked(img stateImage) {
	s.topics = make(map[string]wire.TopicConfig, len(img.Topics))
	for name, r := range img.Topics {
		s.topics[name] = r.config()
	}
	s.topicsVersion = img.TopicsVersion.dataVersion()
	s.groups = make(map[string]wire.SubscriptionGroupConfig, len(img.Groups))
	for name, r := range img.Groups {
		s.groups[name] = r.config()
	}
	s.offsets = img.Offsets
	if s.offsets == nil {
		s.offsets = map[string]map[int32]int64{}
	}
	s.schedule = img.Schedule
	if s.schedule == nil {
		s.schedule = map[int32]int64{}
	}
	s.members = img.Members
	if s.members == nil {
		s.members = map[string]string{}
	}
	s.dedup.load(img.Dedup)
	s.timer = TimerCursor{}
	if img.Timer != nil {
		s.timer = *img.Timer
	}
	s.txn.load(img.Txn)
}

func sortedLevels(m map[int32]int64) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
