package broker

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/raftmq/raftmq/wire"
)

// Replicated commands. Every change to the replicated tables is a Raft
// log entry whose Extensions start with two bytes, the CommandType and the
// layout version, followed by the type's fields in Extensions and/or Data.
// Entries stay on disk for the life of the log (and followers may run an
// older binary during a rolling upgrade), so every layout ever written must
// stay decodable.
//
// How to add a command type:
//
//  1. Append a CommandType constant below with the next unused value and a
//     comment saying what Data and Extensions hold. Never reuse or renumber
//     a value.
//  2. Add the type's fields to Command (reuse a field when the shape is the
//     same). Payloads are broker-owned: binary via appendString/reader, or
//     JSON of a record struct in command_records.go with frozen JSON names;
//     never a wire type, which may change for protocol reasons.
//  3. Encode in EncodeCommand and decode in DecodeCommand. The decoder must
//     not panic or allocate without bound on any input (counts go through
//     reader.count) and must reject trailing bytes.
//  4. Add a seed to FuzzDecodeCommand and an entry to the golden table in
//     command_compat_test.go, so the layout is pinned from its first day.
//  5. Apply it in state.applyLocked (the FSM goroutine; deterministic: use
//     the entry's log time, never the local clock), and give the Replica a
//     method that proposes it.
//  6. If it changes a table, put the table in stateImage (snapshots) through
//     a record type as well, or a follower restored from a snapshot misses it.
//
// To change an existing type's layout, write the new layout under the next
// version byte for that type and keep decoding every older version. An
// optional field may be added to a JSON record under the same version only
// if its absence (zero value) means what old entries meant.

// CommandType is the first byte of a Raft command entry's Extensions.
//
// ONLY APPEND TO THIS LIST: the values are in every Raft log on disk.
type CommandType byte

// Command types.
const (
	// CmdMessages: Data is a concatenation of stored messages (the store's
	// encoder), so raftlog's PHYSICALOFFSET rule holds and pulls read them
	// straight from the segments. Extensions carry the idempotent-producer
	// keys of the messages that have them.
	CmdMessages CommandType = 1
	// CmdOffsets: consumer offset commits (binary, see encodeOffsets).
	CmdOffsets CommandType = 2
	// CmdUpdateTopic: Data is a topicRecord as JSON.
	CmdUpdateTopic CommandType = 3
	// CmdDeleteTopic: Data is the topic name. Version 1 removes the
	// topic's config and consumer offsets; version 2 also destroys its
	// ConsumeQueues (fsm.deleteTopicQueues).
	CmdDeleteTopic CommandType = 4
	// CmdUpdateGroup: Data is a groupRecord as JSON.
	CmdUpdateGroup CommandType = 5
	// CmdDeleteGroup: Data is the group name. Version 1 removes the
	// group's consumer offsets with it; version 2 carries one Extensions
	// byte after the header, 1 to keep the offsets (RocketMQ's
	// DELETE_SUBSCRIPTIONGROUP without cleanOffset) and 0 to remove them.
	CmdDeleteGroup CommandType = 6
	// CmdScheduleOffsets: delay level → offset pairs (binary).
	CmdScheduleOffsets CommandType = 7
	// CmdMemberAddr: a new leader announces its remoting address (Data:
	// "id\x00addr"), so followers can name it in not-leader answers.
	CmdMemberAddr CommandType = 8
	// CmdTxnEnd decides a transaction's half message: Data is stored
	// messages as in CmdMessages (the op record, after the real message
	// when it commits); Extensions carry the half's CommitLog offset
	// (varint) and a commit byte (1 commit, 0 rollback). The FSM
	// dispatches the messages only if the half is still undecided, so a
	// half is committed at most once on every replica (txn.go).
	CmdTxnEnd CommandType = 9
	// CmdTxnCheck: the leader's check-back progress (binary, see
	// encodeTxnCheck): the new floor of the half queue, the halves it
	// checked back and the ones it discarded.
	CmdTxnCheck CommandType = 10
	// CmdTimerProgress: the timer service's cursor moves (binary, see
	// TimerProgress).
	CmdTimerProgress CommandType = 11
	// CmdDedupParams: the idempotent-producer window and producer TTL
	// every replica applies from this entry on (Data: uvarint window,
	// varint TTL in ms). A leader proposes it when its raftDedupWindow or
	// raftDedupProducerTTL differs from the replicated values, which are
	// the defaults until the first such entry (dedup.go).
	CmdDedupParams CommandType = 12
)

// commandVersion is the second Extensions byte. Every type is at version 1
// but CmdDeleteGroup, which also has deleteGroupKeepVersion, and
// CmdDeleteTopic, which also has deleteTopicQueuesVersion; decoders
// refuse other versions.
const commandVersion = 1

// deleteTopicQueuesVersion is CmdDeleteTopic's second layout (the same
// Data), which every delete a leader proposes now has: it destroys the
// topic's ConsumeQueues. Version-1 entries, in logs written before it,
// keep leaving the queues: a member re-applying one must not give the
// topic created after it other queue offsets than the members that
// applied it before. A binary that predates version 2 refuses it and
// stops applying rather than keep queues the other replicas destroy.
const deleteTopicQueuesVersion = 2

// deleteGroupKeepVersion is CmdDeleteGroup's second layout, written only
// for a delete that keeps the group's offsets. A delete that removes them
// is still written as version 1, which every binary applies the same way;
// a binary that predates version 2 refuses it and stops applying (see
// fsm.Apply) rather than removing offsets the other replicas keep.
const deleteGroupKeepVersion = 2

// maxCommandItems bounds item counts read from an entry so a corrupt entry
// cannot make the decoder allocate without limit.
const maxCommandItems = 1 << 20

// idemKey is the idempotent-producer identity of one message of a
// CmdMessages entry (properties __RAFTMQ_PID / __RAFTMQ_SEQ).
type idemKey struct {
	Index    uint32 // message index within the entry
	Producer string
	Seq      int64
}

// Command is a decoded Raft command entry.
type Command struct {
	Type CommandType
	// Idem lists the idempotent messages of a CmdMessages entry.
	Idem []idemKey
	// Offsets of a CmdOffsets entry.
	Offsets []OffsetCommit
	// Topic of CmdUpdateTopic.
	Topic wire.TopicConfig
	// Group of CmdUpdateGroup.
	Group wire.SubscriptionGroupConfig
	// Name of CmdDeleteTopic / CmdDeleteGroup.
	Name string
	// KeepOffsets: CmdDeleteGroup leaves the group's consumer offsets in
	// place. False (every version-1 entry) removes them.
	KeepOffsets bool
	// DropQueues: CmdDeleteTopic destroys the topic's ConsumeQueues
	// (version 2); false only for version-1 entries.
	DropQueues bool
	// Schedule of CmdScheduleOffsets.
	Schedule map[int32]int64
	// MemberID and MemberAddr of CmdMemberAddr.
	MemberID, MemberAddr string
	// TxnHalf (the half's CommitLog offset) and TxnCommit of CmdTxnEnd.
	TxnHalf   int64
	TxnCommit bool
	// TxnCheck of CmdTxnCheck.
	TxnCheck *txnCheck
	// Timer of CmdTimerProgress.
	Timer TimerProgress
	// Dedup of CmdDedupParams.
	Dedup dedupParams
}

// EncodeCommand returns the Extensions and Data of c's Raft entry. For
// CmdMessages the data (the stored messages) is passed in by the batcher and
// returned unchanged.
func EncodeCommand(c *Command, messages []byte) (ext, data []byte, err error) {
	ext = []byte{byte(c.Type), commandVersion}
	switch c.Type {
	case CmdMessages:
		if len(c.Idem) > 0 {
			ext = binary.AppendUvarint(ext, uint64(len(c.Idem)))
			for _, k := range c.Idem {
				ext = binary.AppendUvarint(ext, uint64(k.Index))
				ext = appendString(ext, k.Producer)
				ext = binary.AppendVarint(ext, k.Seq)
			}
		}
		return ext, messages, nil
	case CmdTxnEnd:
		ext = binary.AppendVarint(ext, c.TxnHalf)
		commit := byte(0)
		if c.TxnCommit {
			commit = 1
		}
		return append(ext, commit), messages, nil
	case CmdTxnCheck:
		if c.TxnCheck == nil {
			return nil, nil, fmt.Errorf("%w: transaction check without progress", ErrBadCommand)
		}
		data = encodeTxnCheck(c.TxnCheck)
	case CmdOffsets:
		data = binary.AppendUvarint(nil, uint64(len(c.Offsets)))
		for _, o := range c.Offsets {
			data = appendString(data, o.Group)
			data = appendString(data, o.Topic)
			data = binary.AppendVarint(data, int64(o.QueueID))
			data = binary.AppendVarint(data, o.Offset)
		}
	case CmdUpdateTopic:
		data, err = json.Marshal(topicRecordOf(c.Topic))
	case CmdUpdateGroup:
		data, err = json.Marshal(groupRecordOf(c.Group))
	case CmdDeleteGroup:
		if c.KeepOffsets {
			ext = []byte{byte(c.Type), deleteGroupKeepVersion, 1}
		}
		data = []byte(c.Name)
	case CmdDeleteTopic:
		if c.DropQueues {
			ext = []byte{byte(c.Type), deleteTopicQueuesVersion}
		}
		data = []byte(c.Name)
	case CmdScheduleOffsets:
		data = binary.AppendUvarint(nil, uint64(len(c.Schedule)))
		for _, level := range sortedLevels(c.Schedule) {
			data = binary.AppendVarint(data, int64(level))
			data = binary.AppendVarint(data, c.Schedule[level])
		}
	case CmdMemberAddr:
		data = appendString(nil, c.MemberID)
		data = appendString(data, c.MemberAddr)
	case CmdTimerProgress:
		data = encodeTimerProgress(c.Timer)
	case CmdDedupParams:
		data = binary.AppendUvarint(nil, uint64(c.Dedup.Window))
		data = binary.AppendVarint(data, c.Dedup.TTLms)
	default:
		return nil, nil, fmt.Errorf("%w: unknown command type %d", ErrBadCommand, c.Type)
	}
	return ext, data, err
}

// DecodeCommand decodes a command entry's Extensions and Data. It never
// panics on malformed input (fuzzed); errors wrap ErrBadCommand. For
// CmdMessages only the Extensions are decoded (the messages are walked by
// the FSM).
func DecodeCommand(ext, data []byte) (*Command, error) {
	if len(ext) < 2 {
		return nil, fmt.Errorf("%w: extensions of %d bytes", ErrBadCommand, len(ext))
	}
	c := &Command{Type: CommandType(ext[0])}
	if ext[1] != commandVersion && (c.Type != CmdDeleteGroup || ext[1] != deleteGroupKeepVersion) &&
		(c.Type != CmdDeleteTopic || ext[1] != deleteTopicQueuesVersion) {
		return nil, fmt.Errorf("%w: command version %d", ErrBadCommand, ext[1])
	}
	var err error
	switch c.Type {
	case CmdMessages:
		r := reader{b: ext[2:]}
		if len(r.b) > 0 {
			n := r.count()
			for i := 0; i < n && r.err == nil; i++ {
				k := idemKey{Index: uint32(r.uvarint()), Producer: r.string(), Seq: r.varint()}
				c.Idem = append(c.Idem, k)
			}
		}
		err = r.done()
	case CmdTxnEnd:
		r := reader{b: ext[2:]}
		c.TxnHalf = r.varint()
		switch b := r.byte(); {
		case r.err != nil:
		case b > 1:
			r.err = fmt.Errorf("commit byte %d", b)
		default:
			c.TxnCommit = b == 1
		}
		err = r.done()
	case CmdTxnCheck:
		c.TxnCheck, err = decodeTxnCheck(data)
	case CmdOffsets:
		r := reader{b: data}
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			o := OffsetCommit{Group: r.string(), Topic: r.string(), QueueID: int32(r.varint()), Offset: r.varint()}
			c.Offsets = append(c.Offsets, o)
		}
		err = r.done()
	case CmdUpdateTopic:
		var r topicRecord
		err = json.Unmarshal(data, &r)
		c.Topic = r.config()
		if err == nil && c.Topic.TopicName == "" {
			err = fmt.Errorf("topic without a name")
		}
	case CmdUpdateGroup:
		var r groupRecord
		err = json.Unmarshal(data, &r)
		c.Group = r.config()
		if err == nil && c.Group.GroupName == "" {
			err = fmt.Errorf("group without a name")
		}
	case CmdDeleteTopic:
		c.Name = string(data)
		if ext[1] == deleteTopicQueuesVersion {
			c.DropQueues = true
			err = (&reader{b: ext[2:]}).done()
		}
	case CmdDeleteGroup:
		c.Name = string(data)
		if ext[1] == deleteGroupKeepVersion {
			r := reader{b: ext[2:]}
			switch b := r.byte(); {
			case r.err != nil:
			case b > 1:
				r.err = fmt.Errorf("keep-offsets byte %d", b)
			default:
				c.KeepOffsets = b == 1
			}
			err = r.done()
		}
	case CmdScheduleOffsets:
		r := reader{b: data}
		n := r.count()
		c.Schedule = make(map[int32]int64, min(n, 64))
		for i := 0; i < n && r.err == nil; i++ {
			level := int32(r.varint())
			c.Schedule[level] = r.varint()
		}
		err = r.done()
	case CmdMemberAddr:
		r := reader{b: data}
		c.MemberID, c.MemberAddr = r.string(), r.string()
		err = r.done()
	case CmdTimerProgress:
		c.Timer, err = decodeTimerProgress(data)
	case CmdDedupParams:
		r := reader{b: data}
		w := r.uvarint()
		c.Dedup = dedupParams{Window: int64(w), TTLms: r.varint()}
		if err = r.done(); err == nil && !c.Dedup.valid() {
			err = fmt.Errorf("dedup window %d, TTL %d ms", w, c.Dedup.TTLms)
		}
	default:
		return nil, fmt.Errorf("%w: unknown command type %d", ErrBadCommand, c.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: type %d: %v", ErrBadCommand, c.Type, err)
	}
	return c, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader decodes varints and strings, remembering the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = fmt.Errorf("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = fmt.Errorf("missing byte")
		return 0
	}
	b := r.b[0]
	r.b = r.b[1:]
	return b
}

func (r *reader) count() int {
	n := r.uvarint()
	if n > maxCommandItems || n > uint64(len(r.b)) {
		if r.err == nil {
			r.err = fmt.Errorf("item count %d exceeds the entry", n)
		}
		return 0
	}
	return int(n)
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("string of %d bytes past the end", n)
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	return r.err
}
