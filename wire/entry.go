package wire

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Entry is one stored message as DecodeEntry reads it: the fixed fields
// decoded, the variable ones aliasing the input.
type Entry struct {
	// StoreSize is TOTALSIZE, the entry's length in bytes.
	StoreSize int32
	// BodyCRC is the stored CRC of the (possibly compressed) body.
	BodyCRC        int32
	QueueID        int32
	Flag           int32
	QueueOffset    int64
	PhysicalOffset int64
	SysFlag        int32
	// BornTimestamp and StoreTimestamp are milliseconds since the epoch.
	BornTimestamp  int64
	BornHost       netip.AddrPort
	StoreTimestamp int64
	StoreHost      netip.AddrPort
	ReconsumeTimes int32
	// PreparedTransactionOffset is the half message's offset of a
	// transactional message.
	PreparedTransactionOffset int64
	// Body, Topic and Properties alias the decoded bytes.
	Body       []byte
	Topic      []byte
	Properties []byte
}

// OffsetMsgID renders the entry's offset msgId with the store host as wide
// as it is stored (MessageDecoder.createMessageId).
func (e *Entry) OffsetMsgID() string {
	return offsetMsgID(e.StoreHost, e.SysFlag&SysFlagStoreHostV6 != 0, e.PhysicalOffset)
}

// DecodeEntry reads the stored message at the start of b leniently, as a
// client reads a pull body (MessageDecoder.decode): magic and lengths are
// checked, no CRC is, and a missing CRC property is fine. It returns the
// entry and its size; on malformed bytes a *DecodeError with Offset 0.
// The caller recognises a MagicBlank filler before calling.
func DecodeEntry(b []byte) (Entry, int, error) {
	r := &reader{b: b}
	var e Entry
	e.StoreSize = r.i32("TOTALSIZE")
	magic := r.u32("MAGICCODE")
	if r.err != nil {
		return Entry{}, 0, r.err
	}
	if magic != MagicV1 && magic != MagicV2 {
		return Entry{}, 0, &DecodeError{Reason: fmt.Sprintf("unknown magic code %#x", magic)}
	}
	if e.StoreSize < 0 || int(e.StoreSize) > len(b) {
		return Entry{}, 0, &DecodeError{Reason: fmt.Sprintf("TOTALSIZE %d beyond the %d bytes left", e.StoreSize, len(b))}
	}
	// Parse only within TOTALSIZE so a lying length cannot pull bytes of
	// the next entry into this one.
	r.b = b[:e.StoreSize]
	e.BodyCRC = r.i32("BODYCRC")
	e.QueueID = r.i32("QUEUEID")
	e.Flag = r.i32("FLAG")
	e.QueueOffset = r.i64("QUEUEOFFSET")
	e.PhysicalOffset = r.i64("PHYSICALOFFSET")
	e.SysFlag = r.i32("SYSFLAG")
	e.BornTimestamp = r.i64("BORNTIMESTAMP")
	e.BornHost = r.host(e.SysFlag&SysFlagBornHostV6 != 0, "BORNHOST")
	e.StoreTimestamp = r.i64("STORETIMESTAMP")
	e.StoreHost = r.host(e.SysFlag&SysFlagStoreHostV6 != 0, "STOREHOST")
	e.ReconsumeTimes = r.i32("RECONSUMETIMES")
	e.PreparedTransactionOffset = r.i64("PREPAREDTRANSACTIONOFFSET")
	bodyLen := r.i32("BODYLEN")
	e.Body = r.bytes(int(bodyLen), "BODY")
	var topicLen int
	if magic == MagicV1 {
		if t := r.bytes(1, "TOPICLEN"); t != nil {
			topicLen = int(t[0])
		}
	} else if t := r.bytes(2, "TOPICLEN"); t != nil {
		topicLen = int(binary.BigEndian.Uint16(t))
	}
	e.Topic = r.bytes(topicLen, "TOPIC")
	var propLen int
	if p := r.bytes(2, "PROPLEN"); p != nil {
		propLen = int(int16(binary.BigEndian.Uint16(p)))
	}
	if propLen > 0 {
		e.Properties = r.bytes(propLen, "PROPERTIES")
	}
	if r.err != nil {
		return Entry{}, 0, r.err
	}
	if r.pos != int(e.StoreSize) {
		return Entry{}, 0, &DecodeError{Reason: fmt.Sprintf("TOTALSIZE %d but the fields end at %d", e.StoreSize, r.pos)}
	}
	return e, r.pos, nil
}

// reader walks one entry; the first short read records an error and every
// later read returns zero values, so callers check once per field group.
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
func (r *reader) host(v6 bool, what string) netip.AddrPort {
	n := 4
	if v6 {
		n = 16
	}
	raw := r.bytes(n+4, what)
	if raw == nil {
		return netip.AddrPort{}
	}
	ip, _ := netip.AddrFromSlice(raw[:n])
	return netip.AddrPortFrom(ip, uint16(binary.BigEndian.Uint32(raw[n:])))
}
