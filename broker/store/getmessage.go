package store

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// GetMessageStatus mirrors RocketMQ's GetMessageStatus.
type GetMessageStatus int

// Get statuses (RocketMQ names in String).
const (
	// Found: Messages holds at least one message.
	Found GetMessageStatus = iota
	// NoMatchedMessage: units were scanned but the filter matched none.
	NoMatchedMessage
	// MessageWasRemoving: units pointed below the CommitLog minimum.
	MessageWasRemoving
	// OffsetFoundNull: no ConsumeQueue file holds the offset, though it is
	// in the queue's range; NextBeginOffset is the next file's first offset.
	OffsetFoundNull
	// OffsetOverflowBadly: the offset is past MaxOffset.
	OffsetOverflowBadly
	// OffsetOverflowOne: the offset equals MaxOffset (caught up).
	OffsetOverflowOne
	// OffsetTooSmall: the offset is below MinOffset.
	OffsetTooSmall
	// NoMatchedLogicQueue: the queue does not exist.
	NoMatchedLogicQueue
	// NoMessageInQueue: the queue exists but is empty.
	NoMessageInQueue
)

// String returns the RocketMQ name of the status.
func (s GetMessageStatus) String() string {
	return [...]string{"FOUND", "NO_MATCHED_MESSAGE", "MESSAGE_WAS_REMOVING", "OFFSET_FOUND_NULL",
		"OFFSET_OVERFLOW_BADLY", "OFFSET_OVERFLOW_ONE", "OFFSET_TOO_SMALL", "NO_MATCHED_LOGIC_QUEUE",
		"NO_MESSAGE_IN_QUEUE"}[s]
}

// MessageFilter selects messages on the pull path (RocketMQ MessageFilter).
type MessageFilter interface {
	// MatchTagsCode filters on the ConsumeQueue's tags hash code.
	MatchTagsCode(tagsCode int64) bool
	// MatchMessage filters on the stored bytes (after MatchTagsCode passed).
	MatchMessage(msg []byte) bool
}

// TagsFilter matches messages whose tags hash code is in the set; an empty
// set matches everything ("*"). Hash collisions pass, as in RocketMQ: the
// client re-checks the tag string.
type TagsFilter map[int64]struct{}

// NewTagsFilter builds a filter from tag names; "" or "*" matches all.
func NewTagsFilter(tags ...string) TagsFilter {
	f := TagsFilter{}
	for _, t := range tags {
		if t == "" || t == "*" {
			return TagsFilter{}
		}
		f[wire.TagsHashCode(t)] = struct{}{}
	}
	return f
}

// MatchTagsCode implements MessageFilter.
func (f TagsFilter) MatchTagsCode(code int64) bool {
	if len(f) == 0 {
		return true
	}
	_, ok := f[code]
	return ok
}

// MatchMessage implements MessageFilter.
func (f TagsFilter) MatchMessage([]byte) bool { return true }

// Pull-size limits: the bytes returned (RocketMQ
// maxTransferBytesOnMessageInMemory), the units one pull looks at, and
// the bytes of messages it reads only to have MatchMessage (SQL92) reject
// them. A pull stopped by either of the last two answers where it got to
// (PULL_RETRY_IMMEDIATELY when it found nothing); RocketMQ stops at 800
// units (maxFilterMessageSize, 16,000 bytes of ConsumeQueue) whatever
// the messages weigh.
const (
	maxTransferBytes   = 256 << 10
	maxFilterMessages  = 16000
	maxFilterReadBytes = 16 * maxTransferBytes
)

// GetMessageResult is the answer to GetMessage.
type GetMessageResult struct {
	Status          GetMessageStatus
	NextBeginOffset int64
	MinOffset       int64
	MaxOffset       int64
	// Body is the concatenation of the returned messages in stored format,
	// each with QUEUEOFFSET patched to its ConsumeQueue offset: a pull
	// response body. Messages slices it per message.
	Body     []byte
	Messages [][]byte
	// QueueOffsets holds each returned message's queue offset.
	QueueOffsets []int64
	// SkippedRemoved is set when units whose message is no longer in this
	// store's CommitLog, or offsets no ConsumeQueue file holds, were
	// stepped over (NextBeginOffset is past them).
	SkippedRemoved bool
}

// GetMessage reads up to maxMsgNums messages of topic/queueID from offset
// (PULL_MESSAGE), skipping messages the filter rejects. Every message is
// verified (magic, sizes, CRCs) before it is copied; a damaged one ends the
// batch and is never returned.
func (s *MessageStore) GetMessage(group, topic string, queueID int32, offset int64, maxMsgNums int, filter MessageFilter) (GetMessageResult, error) {
	var r GetMessageResult
	if s.closed.Load() {
		return r, fmt.Errorf("%w: %w", ErrServiceNotAvailable, ErrStoreClosed)
	}
	cq, err := s.queue(topic, queueID)
	if err != nil {
		return r, err
	}
	if cq == nil {
		r.Status, r.NextBeginOffset = NoMatchedLogicQueue, nextOffsetCorrection(offset, 0)
		return r, nil
	}
	r.MinOffset, r.MaxOffset = cq.MinOffset(), cq.MaxOffset()
	switch {
	case r.MaxOffset == 0:
		r.Status, r.NextBeginOffset = NoMessageInQueue, nextOffsetCorrection(offset, 0)
		return r, nil
	case offset < r.MinOffset:
		r.Status, r.NextBeginOffset = OffsetTooSmall, nextOffsetCorrection(offset, r.MinOffset)
		return r, nil
	case offset == r.MaxOffset:
		r.Status, r.NextBeginOffset = OffsetOverflowOne, offset
		return r, nil
	case offset > r.MaxOffset:
		r.Status = OffsetOverflowBadly
		if r.MinOffset == 0 {
			r.NextBeginOffset = nextOffsetCorrection(offset, r.MinOffset)
		} else {
			r.NextBeginOffset = nextOffsetCorrection(offset, r.MaxOffset)
		}
		return r, nil
	}
	if maxMsgNums <= 0 {
		maxMsgNums = 1
	}
	r.Status = NoMatchedMessage
	clMin := s.cl.MinOffset()
	next := offset
	scanned := 0
	sawRemoved, sawUnit, noFile := false, false, false
	rejected := 0 // bytes of the messages read that MatchMessage rejected
	var body []byte
	var sizes []int
	cur := segmentCursor{cl: s.cl}
	defer cur.release()
read:
	for next < r.MaxOffset && len(sizes) < maxMsgNums && scanned < maxFilterMessages {
		batch, err := cq.Read(next, min(maxFilterMessages-scanned, max(maxMsgNums, 32)))
		if err != nil {
			if errors.Is(err, errNoQueueFile) && len(sizes) == 0 {
				// RocketMQ answers OFFSET_FOUND_NULL with the next file's
				// first offset: kept at an offset no file holds, the
				// consumer would ask for it again forever.
				rolled := cq.nextFileStart(next)
				s.log.Warn("no ConsumeQueue file holds the offset asked for; moving the consumer to the next file",
					zap.String("topic", topic), zap.Int32("queueId", queueID), zap.Int64("offset", next),
					zap.Int64("nextBeginOffset", rolled), zap.Int64("minOffset", r.MinOffset), zap.Int64("maxOffset", r.MaxOffset))
				next, noFile = rolled, true
				break
			}
			if errors.Is(err, ErrOutOfRange) {
				break
			}
			return r, err
		}
		if body == nil {
			// Size the result once: the next units' sizes, capped.
			est := 0
			for i := 0; i < batch.Len() && i < maxMsgNums && est < maxTransferBytes; i++ {
				if u := batch.Unit(i); !u.IsBlank() && u.Size > 0 {
					est += int(u.Size)
				}
			}
			// A size damaged on disk (huge, or negative with its sign
			// bit flipped) must not size the buffer: the unit is only
			// checked when its message is read.
			body = make([]byte, 0, min(est, maxTransferBytes))
			sizes = make([]int, 0, min(maxMsgNums, batch.Len()))
			r.QueueOffsets = make([]int64, 0, min(maxMsgNums, batch.Len()))
		}
		for i := 0; i < batch.Len(); i++ {
			u := batch.Unit(i)
			if u.IsBlank() {
				next++
				scanned++
				continue
			}
			sawUnit = true
			if len(body)+int(u.Size) > maxTransferBytes && len(sizes) > 0 {
				batch.Release()
				break read
			}
			if u.PhyOffset < clMin || (filter != nil && !filter.MatchTagsCode(u.TagsCode)) {
				sawRemoved = sawRemoved || u.PhyOffset < clMin
				next++
				scanned++
				continue
			}
			b, err := cur.message(u.PhyOffset, u.Size)
			if err != nil {
				if errors.Is(err, ErrCorruptMessage) {
					// Never serve it, nor step past it silently: the
					// messages before it go out, and the pull that starts at
					// it fails with the file and offset (the consumer stays
					// at this offset).
					batch.Release()
					if len(sizes) == 0 {
						return r, err
					}
					break read
				}
				if errors.Is(err, ErrOutOfRange) || errors.Is(err, ErrFileClosed) {
					sawRemoved = true
					next++
					scanned++
					continue
				}
				batch.Release()
				return r, err
			}
			next++
			scanned++
			if filter != nil && !filter.MatchMessage(b) {
				if rejected += len(b); rejected >= maxFilterReadBytes {
					batch.Release()
					break read
				}
				continue
			}
			start := len(body)
			body = append(body, b...)
			wire.PatchQueueOffset(body[start:], next-1)
			sizes = append(sizes, int(u.Size))
			r.QueueOffsets = append(r.QueueOffsets, next-1)
			if len(sizes) >= maxMsgNums {
				break
			}
		}
		batch.Release()
	}
	r.NextBeginOffset = next
	r.SkippedRemoved = sawRemoved || noFile
	r.Body = body
	p := 0
	r.Messages = make([][]byte, 0, len(sizes))
	for _, n := range sizes {
		r.Messages = append(r.Messages, body[p:p+n:p+n])
		p += n
	}
	switch {
	case len(sizes) > 0:
		r.Status = Found
	case noFile:
		r.Status = OffsetFoundNull
	case sawRemoved:
		r.Status = MessageWasRemoving
	case !sawUnit && next == offset:
		r.Status = OffsetFoundNull
	}
	return r, nil
}

// nextOffsetCorrection mirrors RocketMQ: a master moves the consumer to the
// corrected offset.
func nextOffsetCorrection(old, corrected int64) int64 { return corrected }

// ReadAppliedMessage returns a view of the verified stored message at a
// physical offset a client named (view by id, send-back, a transaction's
// half); the caller must Release it. Only applied messages are read: the
// CommitLog past the dispatched position holds entries Raft has not
// committed and may still truncate, and a message copied or shown from
// there could be one that was never acknowledged.
//
// An offset where no message starts (a mistyped or forged msgId) is bad
// input, answered as such: only bytes that name offset as their own
// PHYSICALOFFSET are checked as a message, and bytes that fail the checks
// (ErrCorruptMessage, never served) are not reported as CommitLog damage
// (no log, no CorruptEntryError), since a client can write such bytes into
// a message body and name their offset. Damage to real messages is
// reported by the reads that take offsets from the ConsumeQueues (pulls)
// and by the scrub. A body can also hold a complete, valid message naming
// its own offset, which passes: the callers (END_TRANSACTION, send-back,
// view by id) check the message's queue unit too.
func (s *MessageStore) ReadAppliedMessage(phyOffset int64) (*storage.Slice, error) {
	if applied := s.DispatchedOffset(); phyOffset < 0 || phyOffset >= applied {
		return nil, fmt.Errorf("%w: offset %d is not below the applied position %d", ErrOutOfRange, phyOffset, applied)
	}
	if !s.cl.claimedBy(phyOffset) {
		return nil, fmt.Errorf("%w: no message starts at offset %d", ErrOutOfRange, phyOffset)
	}
	sl, err := s.cl.readMessage(phyOffset)
	if errors.Is(err, ErrCorruptMessage) {
		return nil, fmt.Errorf("no intact message starts at offset %d: %w", phyOffset, err)
	}
	return sl, err
}

// LookMessageByOffset decodes the applied message stored at a physical
// offset (ReadAppliedMessage). The body is copied.
func (s *MessageStore) LookMessageByOffset(phyOffset int64) (*Message, error) {
	sl, err := s.ReadAppliedMessage(phyOffset)
	if err != nil {
		return nil, err
	}
	defer sl.Release()
	m, _, err := wire.DecodeMessage(sl.B, true)
	return m, err
}

// queue returns the ConsumeQueue of topic/queueID, nil if there is none.
// Close empties the queue table after marking the store closed, so a queue
// missing from a closed store may be one that exists: it is
// ErrServiceNotAvailable (ErrStoreClosed), never "no such queue", which
// clients are answered as an empty queue at offset 0 (a pull is moved
// there, a reset or GET_MAX_OFFSET answer commits it).
func (s *MessageStore) queue(topic string, queueID int32) (*ConsumeQueue, error) {
	if cq := s.cqs.Get(topic, queueID); cq != nil {
		return cq, nil
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("%w: %w", ErrServiceNotAvailable, ErrStoreClosed)
	}
	return nil, nil
}

// QueueRange returns the queue's minimum and next offsets (0 and 0 if it
// does not exist), failing while the store closes (see queue): the form
// for answers clients act on.
func (s *MessageStore) QueueRange(topic string, queueID int32) (minOff, maxOff int64, err error) {
	cq, err := s.queue(topic, queueID)
	if cq == nil {
		return 0, 0, err
	}
	return cq.MinOffset(), cq.MaxOffset(), nil
}

// GetMaxOffsetInQueue returns the queue's next offset (0 if it does not
// exist, or the store is closing: QueueRange tells them apart).
func (s *MessageStore) GetMaxOffsetInQueue(topic string, queueID int32) int64 {
	if cq := s.cqs.Get(topic, queueID); cq != nil {
		return cq.MaxOffset()
	}
	return 0
}

// QueueStartsRecently reports whether a consumer group with no offset for
// the queue should start at 0 rather than where its ConsumeFromWhere
// says: the queue still starts at offset 0 and is empty, or its first
// message is recent (less than accessMessageInMemoryMaxRatio of physical
// memory behind the CommitLog's end). RocketMQ's broker answers such a
// QUERY_CONSUMER_OFFSET with 0 (checkInDiskByConsumeOffset), so that a
// queue added to a topic, or a young topic, is read from its start by a
// group that was not there for its first messages, instead of from its end.
func (s *MessageStore) QueueStartsRecently(topic string, queueID int32) bool {
	cq := s.cqs.Get(topic, queueID)
	if cq == nil || cq.MaxOffset() == 0 {
		return true
	}
	if cq.MinOffset() > 0 {
		return false
	}
	b, err := cq.Read(0, 1)
	if err != nil {
		return false
	}
	defer b.Release()
	first := b.Unit(0)
	if first.IsBlank() {
		return false
	}
	return s.cl.MaxOffset()-first.PhyOffset <= s.recentBytes
}

// GetMinOffsetInQueue returns the queue's first readable offset.
func (s *MessageStore) GetMinOffsetInQueue(topic string, queueID int32) int64 {
	if cq := s.cqs.Get(topic, queueID); cq != nil {
		return cq.MinOffset()
	}
	return 0
}

// GetOffsetInQueueByTime returns the first queue offset stored at or after
// timestamp (ms) (SEARCH_OFFSET_BY_TIMESTAMP).
func (s *MessageStore) GetOffsetInQueueByTime(topic string, queueID int32, timestamp int64) (int64, error) {
	cq, err := s.queue(topic, queueID)
	if cq == nil {
		return 0, err
	}
	return cq.SearchByTimestamp(timestamp, s.cl.StoreTimeAt)
}

// GetUpperOffsetInQueueByTime returns the last queue offset stored at or
// before timestamp (ms), or the queue's first one if none is
// (SEARCH_OFFSET_BY_TIMESTAMP with boundaryType UPPER).
func (s *MessageStore) GetUpperOffsetInQueueByTime(topic string, queueID int32, timestamp int64) (int64, error) {
	cq, err := s.queue(topic, queueID)
	if cq == nil {
		return 0, err
	}
	return cq.SearchUpperByTimestamp(timestamp, s.cl.StoreTimeAt)
}

// GetEarliestMessageTime returns the store time of the queue's oldest
// message (GET_EARLIEST_MSG_STORETIME), or -1 if there is none.
func (s *MessageStore) GetEarliestMessageTime(topic string, queueID int32) (int64, error) {
	cq, err := s.queue(topic, queueID)
	if cq == nil || cq.MaxOffset() == cq.MinOffset() {
		return -1, err
	}
	u, err := cq.Get(cq.MinOffset())
	if err != nil {
		return -1, err
	}
	return s.cl.StoreTimeAt(u.PhyOffset, u.Size)
}

// GetEarliestStoreTime returns the store time of the oldest message a
// ConsumeQueue still points at, or -1 if there is none. The CommitLog's
// first byte is not a message in Raft mode (segments hold Raft frames with
// messages inside), so the oldest message is found through the queues.
func (s *MessageStore) GetEarliestStoreTime() (int64, error) {
	var (
		first     int64 = -1
		firstSize int32
	)
	for _, cq := range s.cqs.All() {
		if cq.MaxOffset() == cq.MinOffset() {
			continue
		}
		u, err := cq.Get(cq.MinOffset())
		if err != nil || u.PhyOffset < s.cl.MinOffset() {
			continue
		}
		if first < 0 || u.PhyOffset < first {
			first, firstSize = u.PhyOffset, u.Size
		}
	}
	if first < 0 {
		return -1, nil
	}
	return s.cl.StoreTimeAt(first, firstSize)
}

// QueryMessageResult is the answer to QueryMessage.
type QueryMessageResult struct {
	Messages                 []*Message
	IndexLastUpdateTimestamp int64
	IndexLastUpdatePhyOffset int64
}

// QueryMessage finds up to maxNum messages of topic with KEYS or UNIQ_KEY
// key stored within [begin, end] ms (QUERY_MESSAGE), newest first.
func (s *MessageStore) QueryMessage(topic, key string, maxNum int, begin, end int64) (QueryMessageResult, error) {
	var r QueryMessageResult
	if s.idx == nil {
		return r, fmt.Errorf("%w: messageIndexEnable is false", ErrServiceNotAvailable)
	}
	q := s.idx.QueryOffset(topic, key, maxNum, begin, end)
	r.IndexLastUpdateTimestamp, r.IndexLastUpdatePhyOffset = q.IndexLastUpdateTimestamp, q.IndexLastUpdatePhyOffset
	for _, off := range q.PhyOffsets {
		m, err := s.LookMessageByOffset(off)
		if err != nil {
			continue // removed by retention, or damaged
		}
		if m.Topic != topic {
			continue // hash collision of topic#key
		}
		r.Messages = append(r.Messages, m)
	}
	return r, nil
}
