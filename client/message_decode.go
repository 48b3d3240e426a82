package client

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/raftmq/raftmq/wire"
)

// The stored-message format, its magic codes, sysflags and msgIds are
// package wire's (wire.DecodeEntry, wire.SysFlag*, wire.ParseMessageID);
// this file turns wire entries into the SDK's MessageExt.

// MessageExt is a message as stored by a broker and returned by a pull:
// the sent message plus what the broker assigned.
type MessageExt struct {
	Message
	// MsgID is the UNIQ_KEY the producer assigned, or OffsetMsgID when the
	// message has none (as MessageClientExt.getMsgId).
	MsgID string
	// OffsetMsgID is the broker-side id: store host + physical offset.
	OffsetMsgID string
	// StoreSize is TOTALSIZE, the stored entry's length in bytes.
	StoreSize int32
	// BodyCRC is the stored CRC of the (possibly compressed) body.
	BodyCRC int32
	// QueueID and QueueOffset locate the message in its consume queue.
	QueueID     int32
	QueueOffset int64
	// CommitLogOffset is the physical offset in the broker's CommitLog.
	CommitLogOffset int64
	// SysFlag is the stored system flag (the compressed bit is cleared once
	// the body is inflated).
	SysFlag int32
	// BornTimestamp and StoreTimestamp are milliseconds since the epoch.
	BornTimestamp, StoreTimestamp int64
	// BornHost and StoreHost are "ip:port".
	BornHost, StoreHost string
	// ReconsumeTimes counts redeliveries after consume failures.
	ReconsumeTimes int32
	// PreparedTransactionOffset is the half message's offset of a
	// transactional message.
	PreparedTransactionOffset int64
	// ServedBy is the address ("ip:port") of the broker member whose pull
	// answer carried the message, "" when it did not come from a pull. A
	// raftmq follower serves pulls too, and QueueOffset and
	// CommitLogOffset are that member's view: this says which replica a
	// message's position came from.
	ServedBy string

	// cachedSize is the body bytes its process queue counted it for when
	// it was cached: a listener may replace Body, and counting it off by
	// its new length would leave the queue's count wrong for good.
	cachedSize int64
}

// String summarizes the message for logs.
func (m *MessageExt) String() string {
	return fmt.Sprintf("MessageExt{topic=%s queue=%d offset=%d msgId=%s offsetMsgId=%s tags=%q body=%dB}",
		m.Topic, m.QueueID, m.QueueOffset, m.MsgID, m.OffsetMsgID, m.Tags, len(m.Body))
}

// DecodeOptions adjusts DecodeMessagesWith.
type DecodeOptions struct {
	// CheckCRC verifies each BODYCRC (CRC-32 IEEE & 0x7FFFFFFF over the
	// stored body bytes), as a broker does; clients skip it by default.
	CheckCRC bool
	// KeepCompressed leaves compressed bodies as stored instead of
	// inflating them (zlib, LZ4 or zstd, by the sysFlag's compression
	// type).
	KeepCompressed bool
	// MaxInflatedSize bounds an inflated body (default 4 MiB × 8) so that a
	// hostile or corrupt body cannot exhaust memory. A zstd frame whose
	// window is larger than both this and 8 MiB is refused too (zstd
	// levels up to 20 stream with windows of at most 32 MiB).
	MaxInflatedSize int
}

// DecodeMessages decodes the stored-message entries of a pull response
// body (MessageDecoder.decodes as the client calls it: bodies inflated, no
// CRC check). A blank-magic entry ends the data. On malformed bytes it
// returns the messages before the bad one and a *DecodeError, wrapped in
// an *UndecodableMessageError when only the bad one's body failed.
func DecodeMessages(data []byte) ([]*MessageExt, error) {
	return DecodeMessagesWith(data, DecodeOptions{})
}

// DecodeMessagesWith is DecodeMessages with options.
func DecodeMessagesWith(data []byte, opts DecodeOptions) ([]*MessageExt, error) {
	out, _, err := decodeMessages(data, opts, 0)
	return out, err
}

// pullInflateBudget bounds the body bytes one pull's messages decode to
// together. Each body is bounded by the inflate limit, but a batch of 32
// compressed bodies each inflating to it would hold a gigabyte for one
// pulled queue.
const pullInflateBudget = 2 * defaultInflateLimit

// decodeMessages decodes data as DecodeMessagesWith does; with budget > 0
// it stops before a message whose body would take the decoded bodies
// past budget (never before the first message): more says entries were
// left for the next pull, which starts at the first of them.
func decodeMessages(data []byte, opts DecodeOptions, budget int) (out []*MessageExt, more bool, err error) {
	if opts.MaxInflatedSize <= 0 {
		opts.MaxInflatedSize = defaultInflateLimit
	}
	bodies := 0
	for off := 0; off < len(data); {
		if len(data)-off >= 8 && binary.BigEndian.Uint32(data[off+4:]) == wire.MagicBlank {
			break
		}
		m, n, err := decodeOne(data[off:], opts)
		if err != nil {
			var de *DecodeError
			if errors.As(err, &de) {
				de.Offset += off
			}
			return out, false, err
		}
		if bodies += len(m.Body); budget > 0 && bodies > budget && len(out) > 0 {
			return out, true, nil
		}
		out = append(out, m)
		off += n
	}
	return out, false, nil
}

func decodeOne(b []byte, opts DecodeOptions) (*MessageExt, int, error) {
	e, n, err := wire.DecodeEntry(b)
	if err != nil {
		return nil, 0, err
	}
	m := &MessageExt{
		StoreSize: e.StoreSize, BodyCRC: e.BodyCRC, QueueID: e.QueueID, QueueOffset: e.QueueOffset,
		CommitLogOffset: e.PhysicalOffset, SysFlag: e.SysFlag, BornTimestamp: e.BornTimestamp,
		StoreTimestamp: e.StoreTimestamp, BornHost: e.BornHost.String(), StoreHost: e.StoreHost.String(),
		ReconsumeTimes: e.ReconsumeTimes, PreparedTransactionOffset: e.PreparedTransactionOffset,
	}
	m.Flag = e.Flag
	body := e.Body
	if opts.CheckCRC && len(body) > 0 {
		if crc := int32(wire.BodyCRC32(body)); crc != m.BodyCRC {
			return nil, 0, &DecodeError{Reason: fmt.Sprintf("body CRC %d, stored %d", crc, m.BodyCRC)}
		}
	}
	if len(body) > 0 {
		m.Body = append([]byte(nil), body...)
	}
	m.Topic = string(e.Topic)
	m.Properties = wire.DecodeProperties(string(e.Properties))
	m.Tags = m.Properties[wire.PropertyTags]
	if keys := m.Properties[wire.PropertyKeys]; keys != "" {
		m.Keys = strings.Fields(keys)
	}
	if d := m.Properties[wire.PropertyDelayTimeLevel]; d != "" {
		m.DelayLevel, _ = strconv.Atoi(d)
	}
	m.ShardingKey = m.Properties[wire.PropertyShardingKey]
	m.OffsetMsgID = e.OffsetMsgID()
	m.MsgID = m.Properties[wire.PropertyUniqKey]
	if m.MsgID == "" {
		m.MsgID = m.OffsetMsgID
	}
	if m.SysFlag&wire.SysFlagCompressed != 0 && !opts.KeepCompressed && len(body) > 0 {
		inflated, err := inflateBody(body, m.SysFlag, opts.MaxInflatedSize)
		if err != nil {
			return nil, 0, &UndecodableMessageError{Message: m, Err: &DecodeError{Reason: err.Error()}}
		}
		m.Body = inflated
		m.SysFlag &^= wire.SysFlagCompressed
	}
	return m, n, nil
}

// UndecodableMessageError is a stored message whose entry is sound but
// whose body cannot be given back as the producer sent it: compressed
// with a type this SDK does not know, corrupt, or inflating past
// DecodeOptions.MaxInflatedSize. Message is the rest of it, decoded: topic,
// properties, ids, queue and commit log offsets, and the body as stored
// (SysFlag says how it is compressed). It unwraps to its *DecodeError, so
// errors.Is(err, ErrMalformedMessage) holds.
//
// The consumers hand such a message to the group's dead-letter queue and
// go on past it (see PushConsumer); a PullMessage caller gets it as the
// error of a pull whose first message it is.
type UndecodableMessageError struct {
	Message *MessageExt
	Err     *DecodeError
}

// Error implements error.
func (e *UndecodableMessageError) Error() string {
	m := e.Message
	return fmt.Sprintf("client: message %s of topic %s (queue %d, queue offset %d, commit log offset %d) cannot be decoded: %v",
		m.MsgID, m.Topic, m.QueueID, m.QueueOffset, m.CommitLogOffset, e.Err)
}

// Unwrap returns the *DecodeError.
func (e *UndecodableMessageError) Unwrap() error { return e.Err }

// inflateBody undoes the producer's compression, chosen by the type in
// sysFlag bits 8-10 (RocketMQ's CompressionType): zlib (0, the RocketMQ
// 4.x flag without a type, and 3) as ZlibCompressor writes it, an LZ4
// frame (1) as Lz4Compressor's LZ4FrameOutputStream writes it, a zstd
// frame (2) as ZstdCompressor's ZstdOutputStream writes it. Concatenated
// frames decode as one body, as RocketMQ's stream readers do. No codec
// produces more than limit+1 bytes, so a body that would inflate past the
// limit is refused before it is held in memory.
func inflateBody(body []byte, sysFlag int32, limit int) ([]byte, error) {
	var (
		out []byte
		err error
	)
	switch t := (sysFlag & wire.SysFlagCompressionType) >> 8; t {
	case 0, 3:
		var zr io.ReadCloser
		if zr, err = zlib.NewReader(bytes.NewReader(body)); err != nil {
			return nil, fmt.Errorf("inflate zlib body: %v", err)
		}
		defer zr.Close()
		out, err = io.ReadAll(io.LimitReader(zr, int64(limit)+1))
		if err != nil {
			return nil, fmt.Errorf("inflate zlib body: %v", err)
		}
	case 1:
		out, err = io.ReadAll(io.LimitReader(lz4.NewReader(bytes.NewReader(body)), int64(limit)+1))
		if err != nil {
			return nil, fmt.Errorf("inflate LZ4 body: %v", err)
		}
	case 2:
		if out, err = decodeZstd(body, limit); err != nil {
			switch {
			case errors.Is(err, zstd.ErrDecoderSizeExceeded):
				return nil, fmt.Errorf("inflated body larger than %d bytes", limit)
			case errors.Is(err, zstd.ErrWindowSizeExceeded):
				return nil, fmt.Errorf("zstd window larger than %d bytes", max(limit, zstdMinWindow))
			}
			return nil, fmt.Errorf("inflate zstd body: %v", err)
		}
	default:
		return nil, fmt.Errorf("body compressed with unknown type %d (sysFlag %#x; known: zlib 0 and 3, LZ4 1, zstd 2)", t, sysFlag)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("inflated body larger than %d bytes", limit)
	}
	return out, nil
}

// defaultInflateLimit is DecodeOptions.MaxInflatedSize's default.
const defaultInflateLimit = 8 * DefaultMaxMessageSize

// zstdMinWindow is the largest zstd window every decode accepts, whatever
// its limit: ZstdOutputStream streams with its level's window however
// small the body (2 MiB at RocketMQ's default level 5, 8 MiB up to level
// 19), and the window costs a one-shot decode nothing.
const zstdMinWindow = 8 << 20

var (
	// zstdDefault decodes under the default limit. A Decoder's DecodeAll
	// may be called concurrently, and one without a reader starts no
	// goroutines.
	zstdDefault = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil, zstd.WithDecoderMaxMemory(defaultInflateLimit), zstd.WithDecoderLowmem(true))
	})
	// zstdSmall decodes under limits below zstdMinWindow: a decoder's
	// output bound is also its largest window, so the output is bounded
	// by the capacity of the buffer it is given instead.
	zstdSmall = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil, zstd.WithDecoderMaxMemory(zstdMinWindow), zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderLowmem(true))
	})
)

// decodeZstd decodes the zstd frames of body into at most limit+1 bytes
// (no more is allocated, give or take a block); a frame declaring a larger
// content size or window than the decoder allows fails at its header.
func decodeZstd(body []byte, limit int) ([]byte, error) {
	switch {
	case limit == defaultInflateLimit:
		d, err := zstdDefault()
		if err != nil {
			return nil, err
		}
		return d.DecodeAll(body, nil)
	case limit < zstdMinWindow:
		d, err := zstdSmall()
		if err != nil {
			return nil, err
		}
		return d.DecodeAll(body, make([]byte, 0, limit+1))
	}
	d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(uint64(limit)), zstd.WithDecoderLowmem(true))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.DecodeAll(body, nil)
}
