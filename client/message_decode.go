package client

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"net/netip"
	"strconv"
	"strings"
)

// Stored-message magic codes (RocketMQ MessageVersion / CommitLog).
const (
	// MagicV1 marks a stored message whose topic length is one byte.
	MagicV1 uint32 = 0xDAA320A7
	// MagicV2 marks a stored message whose topic length is two bytes.
	MagicV2 uint32 = 0xDAA320AB
	// MagicBlank marks the filler at the end of a CommitLog segment; a
	// decoder that meets it has reached the end of the messages.
	MagicBlank uint32 = 0xCBD43194
)

// SysFlag bits (RocketMQ MessageSysFlag).
const (
	SysFlagCompressed    int32 = 0x1
	SysFlagMultiTags     int32 = 0x2
	SysFlagTransPrepared int32 = 0x4
	SysFlagTransCommit   int32 = 0x8
	SysFlagTransRollback int32 = 0xC
	SysFlagBornHostV6    int32 = 0x10
	SysFlagStoreHostV6   int32 = 0x20
	// sysFlagCompressionType holds the codec of a compressed body in bits
	// 8–10: 0 (older clients) and 3 mean zlib, 1 LZ4, 2 zstd.
	sysFlagCompressionType int32 = 0x7 << 8
)

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
	// inflating them.
	KeepCompressed bool
	// MaxInflatedSize bounds an inflated body (default 4 MiB × 8) so that a
	// hostile or corrupt body cannot exhaust memory.
	MaxInflatedSize int
}

// DecodeMessages decodes the stored-message entries of a pull response
// body (MessageDecoder.decodes as the client calls it: bodies inflated, no
// CRC check). A blank-magic entry ends the data. On malformed bytes it
// returns the messages before the bad one and a *DecodeError.
func DecodeMessages(data []byte) ([]*MessageExt, error) {
	return DecodeMessagesWith(data, DecodeOptions{})
}

// DecodeMessagesWith is DecodeMessages with options.
func DecodeMessagesWith(data []byte, opts DecodeOptions) ([]*MessageExt, error) {
	if opts.MaxInflatedSize <= 0 {
		opts.MaxInflatedSize = 8 * DefaultMaxMessageSize
	}
	var out []*MessageExt
	for off := 0; off < len(data); {
		if len(data)-off >= 8 && binary.BigEndian.Uint32(data[off+4:]) == MagicBlank {
			break
		}
		m, n, err := decodeOne(data[off:], opts)
		if err != nil {
			if de, ok := err.(*DecodeError); ok {
				de.Offset += off
			}
			return out, err
		}
		out = append(out, m)
		off += n
	}
	return out, nil
}

// reader walks one entry; the first short read records an error and every
// later read returns zero values, so decodeOne checks once per field group.
type reader struct {
	b   []byte
	pos int
	err *DecodeError
}

func (r *reader) need(n int, what string) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || len(r.b)-r.pos < n {
		r.err = &DecodeError{Offset: 0, Reason: fmt.Sprintf("%s: need %d bytes at %d, have %d", what, n, r.pos, len(r.b)-r.pos)}
		return false
	}
	return true
}

func (r *reader) u32(what string) uint32 {
	if !r.need(4, what) {
		return 0
	}
	v := binary.BigEndian.Uint32(r.b[r.pos:])
	r.pos += 4
	return v
}

func (r *reader) i32(what string) int32 { return int32(r.u32(what)) }

func (r *reader) i64(what string) int64 {
	if !r.need(8, what) {
		return 0
	}
	v := int64(binary.BigEndian.Uint64(r.b[r.pos:]))
	r.pos += 8
	return v
}

func (r *reader) bytes(n int, what string) []byte {
	if !r.need(n, what) {
		return nil
	}
	v := r.b[r.pos : r.pos+n]
	r.pos += n
	return v
}

// host reads an IPv4 (4 bytes) or IPv6 (16 bytes) address and a port.
func (r *reader) host(v6 bool, what string) ([]byte, string) {
	n := 4
	if v6 {
		n = 16
	}
	raw := r.bytes(n+4, what)
	if raw == nil {
		return nil, ""
	}
	ip, _ := netip.AddrFromSlice(raw[:n])
	port := binary.BigEndian.Uint32(raw[n:])
	return raw, netip.AddrPortFrom(ip, uint16(port)).String()
}

func decodeOne(b []byte, opts DecodeOptions) (*MessageExt, int, error) {
	r := &reader{b: b}
	m := &MessageExt{}
	m.StoreSize = r.i32("TOTALSIZE")
	magic := r.u32("MAGICCODE")
	if r.err != nil {
		return nil, 0, r.err
	}
	if magic != MagicV1 && magic != MagicV2 {
		return nil, 0, &DecodeError{Reason: fmt.Sprintf("unknown magic code %#x", magic)}
	}
	if m.StoreSize < 0 || int(m.StoreSize) > len(b) {
		return nil, 0, &DecodeError{Reason: fmt.Sprintf("TOTALSIZE %d beyond the %d bytes left", m.StoreSize, len(b))}
	}
	// Parse only within TOTALSIZE so a lying length cannot pull bytes of
	// the next entry into this one.
	r.b = b[:m.StoreSize]
	m.BodyCRC = r.i32("BODYCRC")
	m.QueueID = r.i32("QUEUEID")
	m.Flag = r.i32("FLAG")
	m.QueueOffset = r.i64("QUEUEOFFSET")
	m.CommitLogOffset = r.i64("PHYSICALOFFSET")
	m.SysFlag = r.i32("SYSFLAG")
	m.BornTimestamp = r.i64("BORNTIMESTAMP")
	_, m.BornHost = r.host(m.SysFlag&SysFlagBornHostV6 != 0, "BORNHOST")
	m.StoreTimestamp = r.i64("STORETIMESTAMP")
	storeHost, storeHostStr := r.host(m.SysFlag&SysFlagStoreHostV6 != 0, "STOREHOST")
	m.StoreHost = storeHostStr
	m.ReconsumeTimes = r.i32("RECONSUMETIMES")
	m.PreparedTransactionOffset = r.i64("PREPAREDTRANSACTIONOFFSET")
	bodyLen := r.i32("BODYLEN")
	body := r.bytes(int(bodyLen), "BODY")
	var topicLen int
	if magic == MagicV1 {
		if t := r.bytes(1, "TOPICLEN"); t != nil {
			topicLen = int(t[0])
		}
	} else if t := r.bytes(2, "TOPICLEN"); t != nil {
		topicLen = int(binary.BigEndian.Uint16(t))
	}
	topic := r.bytes(topicLen, "TOPIC")
	var propLen int
	if p := r.bytes(2, "PROPLEN"); p != nil {
		propLen = int(int16(binary.BigEndian.Uint16(p)))
	}
	var props []byte
	if propLen > 0 {
		props = r.bytes(propLen, "PROPERTIES")
	}
	if r.err != nil {
		return nil, 0, r.err
	}
	if r.pos != int(m.StoreSize) {
		return nil, 0, &DecodeError{Reason: fmt.Sprintf("TOTALSIZE %d but the fields end at %d", m.StoreSize, r.pos)}
	}
	if opts.CheckCRC && bodyLen > 0 {
		if crc := int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF); crc != m.BodyCRC {
			return nil, 0, &DecodeError{Reason: fmt.Sprintf("body CRC %d, stored %d", crc, m.BodyCRC)}
		}
	}
	if len(body) > 0 {
		m.Body = append([]byte(nil), body...)
	}
	if m.SysFlag&SysFlagCompressed != 0 && !opts.KeepCompressed && len(body) > 0 {
		inflated, err := inflateBody(body, m.SysFlag, opts.MaxInflatedSize)
		if err != nil {
			return nil, 0, &DecodeError{Reason: err.Error()}
		}
		m.Body = inflated
		m.SysFlag &^= SysFlagCompressed
	}
	m.Topic = string(topic)
	m.Properties = DecodeProperties(string(props))
	m.Tags = m.Properties[PropertyTags]
	if keys := m.Properties[PropertyKeys]; keys != "" {
		m.Keys = strings.Fields(keys)
	}
	if d := m.Properties[PropertyDelayTimeLevel]; d != "" {
		m.DelayLevel, _ = strconv.Atoi(d)
	}
	m.ShardingKey = m.Properties[PropertyShardingKey]
	m.OffsetMsgID = offsetMsgID(storeHost, m.CommitLogOffset)
	m.MsgID = m.Properties[PropertyUniqClientMessageID]
	if m.MsgID == "" {
		m.MsgID = m.OffsetMsgID
	}
	return m, r.pos, nil
}

// inflateBody undoes the producer's compression. Only zlib exists in the
// RocketMQ 4.x protocol (type 0) and is what RocketMQ 5 calls type 3; LZ4
// and zstd bodies are reported rather than handed over still compressed.
func inflateBody(body []byte, sysFlag int32, limit int) ([]byte, error) {
	switch t := (sysFlag & sysFlagCompressionType) >> 8; t {
	case 0, 3:
	default:
		return nil, fmt.Errorf("body compressed with type %d (LZ4=1, zstd=2), only zlib is supported", t)
	}
	zr, err := zlib.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("inflate body: %v", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("inflate body: %v", err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("inflated body larger than %d bytes", limit)
	}
	return out, nil
}

// offsetMsgID renders the broker-side message id: store host bytes (IP and
// port) then the physical offset, upper-case hex (MessageDecoder
// .createMessageId with UtilAll.bytes2string).
func offsetMsgID(storeHost []byte, offset int64) string {
	buf := make([]byte, len(storeHost)+8)
	copy(buf, storeHost)
	binary.BigEndian.PutUint64(buf[len(storeHost):], uint64(offset))
	return strings.ToUpper(hex.EncodeToString(buf))
}

// MessageID is a decoded offset message id: where the message is stored.
type MessageID struct {
	// Addr is the store host "ip:port".
	Addr netip.AddrPort
	// Offset is the CommitLog physical offset.
	Offset int64
}

// DecodeMessageID parses an offset msgId (32 hex characters for an IPv4
// store host, 56 for IPv6) as MessageDecoder.decodeMessageId does.
func DecodeMessageID(id string) (MessageID, error) {
	if len(id) != 32 && len(id) != 56 {
		return MessageID{}, fmt.Errorf("%w: %q has %d characters, want 32 (IPv4) or 56 (IPv6)", ErrInvalidMessageID, id, len(id))
	}
	raw, err := hex.DecodeString(id)
	if err != nil {
		return MessageID{}, fmt.Errorf("%w: %q is not hex", ErrInvalidMessageID, id)
	}
	ipLen := 4
	if len(id) == 56 {
		ipLen = 16
	}
	ip, _ := netip.AddrFromSlice(raw[:ipLen])
	port := binary.BigEndian.Uint32(raw[ipLen:])
	if port > 65535 {
		return MessageID{}, fmt.Errorf("%w: %q has port %d", ErrInvalidMessageID, id, port)
	}
	return MessageID{
		Addr:   netip.AddrPortFrom(ip, uint16(port)),
		Offset: int64(binary.BigEndian.Uint64(raw[ipLen+4:])),
	}, nil
}

// EncodeMessageID renders an offset msgId from a store address and a
// physical offset; the inverse of DecodeMessageID.
func EncodeMessageID(id MessageID) string {
	ip := id.Addr.Addr()
	var host []byte
	if ip.Is4() || ip.Is4In6() {
		a := ip.Unmap().As4()
		host = a[:]
	} else {
		a := ip.As16()
		host = a[:]
	}
	host = binary.BigEndian.AppendUint32(host, uint32(id.Addr.Port()))
	return offsetMsgID(host, id.Offset)
}
