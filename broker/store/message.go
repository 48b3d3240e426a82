package store

import (
	"encoding/binary"

	"github.com/raftmq/raftmq/wire"
)

// The stored-message format itself (layout, magic codes, sysflags, the
// codec, properties and msgIds) is package wire's: the SDK decodes the
// same bytes. This file holds what the store derives from it.

// Message is a message as stored in the CommitLog. It is wire.Message
// under the store's name: the store's API (PutMessages, GetMessage, the
// Raft FSM) deals in stored messages throughout.
type Message = wire.Message

// DispatchRequest is what the dispatcher needs from one stored message to
// build ConsumeQueue and index entries (RocketMQ DispatchRequest).
type DispatchRequest struct {
	Topic           string
	QueueID         int32
	CommitLogOffset int64
	MsgSize         int32
	TagsCode        int64
	StoreTimestamp  int64
	// ConsumeQueueOffset is the QUEUEOFFSET the appender wrote; the
	// dispatcher assigns the real one (see DESIGN notes on queue offsets).
	ConsumeQueueOffset        int64
	Keys                      string
	UniqKey                   string
	SysFlag                   int32
	BornTimestamp             int64
	PreparedTransactionOffset int64
	// Blank is set for a segment-end filler: no message, skip MsgSize bytes
	// to the next segment.
	Blank bool
}

// CheckAndDecode validates the entry at the start of buf (magic, TOTALSIZE,
// field lengths, body CRC, entry CRC) and returns its dispatch request and size. A
// blank filler returns Blank with its size. Zeros return ErrEndOfData, any
// damage ErrCorruptMessage: nothing at or past such an entry may be served.
// CommitLogOffset is the PHYSICALOFFSET field as written.
func CheckAndDecode(buf []byte) (DispatchRequest, int, error) {
	l, err := wire.CheckEntry(buf, true)
	if err != nil {
		return DispatchRequest{}, 0, err
	}
	if l.Magic == wire.MagicBlank {
		return DispatchRequest{Blank: true, MsgSize: int32(l.Size)}, l.Size, nil
	}
	be := binary.BigEndian
	req := DispatchRequest{
		Topic:                     string(l.Topic),
		QueueID:                   int32(be.Uint32(buf[wire.OffQueueID:])),
		CommitLogOffset:           int64(be.Uint64(buf[wire.OffPhysicalOffset:])),
		MsgSize:                   int32(l.Size),
		StoreTimestamp:            int64(be.Uint64(buf[wire.StoreTimestampOffset(l.SysFlag):])),
		ConsumeQueueOffset:        int64(be.Uint64(buf[wire.OffQueueOffset:])),
		SysFlag:                   l.SysFlag,
		BornTimestamp:             int64(be.Uint64(buf[wire.OffBornTimestamp:])),
		PreparedTransactionOffset: int64(be.Uint64(buf[l.BodyStart-4-8:])),
	}
	if len(l.Props) > 0 {
		req.Keys = wire.PropertyValue(l.Props, wire.PropertyKeys)
		req.UniqKey = wire.PropertyValue(l.Props, wire.PropertyUniqKey)
		req.TagsCode = wire.TagsHashCodeBytes(wire.PropertyBytes(l.Props, wire.PropertyTags))
	}
	return req, l.Size, nil
}
