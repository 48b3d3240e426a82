package wire

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
)

// An offset msgId names where a message is stored: upper-case hex of the
// store host's IP (4 or 16 bytes), its port (int32) and the CommitLog
// physical offset (int64) — 32 hex characters for an IPv4 store host, 56
// for IPv6 (MessageDecoder.createMessageId / decodeMessageId).

// MessageID is a decoded offset msgId: where the message is stored.
type MessageID struct {
	// Addr is the store host "ip:port".
	Addr netip.AddrPort
	// Offset is the CommitLog physical offset.
	Offset int64
}

// OffsetMsgID renders the offset msgId of a message stored at
// physicalOffset on storeHost. An IPv4-mapped IPv6 address counts as IPv4.
func OffsetMsgID(storeHost netip.AddrPort, physicalOffset int64) string {
	a := storeHost.Addr().Unmap()
	return offsetMsgID(storeHost, a.Is6(), physicalOffset)
}

// EncodeMessageID renders id as an offset msgId; the inverse of
// ParseMessageID.
func EncodeMessageID(id MessageID) string { return OffsetMsgID(id.Addr, id.Offset) }

// offsetMsgID renders the id with the host written as 16 bytes when v6,
// else as 4 (the stored host's width, which a v4-mapped v6 host keeps).
func offsetMsgID(storeHost netip.AddrPort, v6 bool, physicalOffset int64) string {
	var buf [28]byte
	n := 0
	if v6 {
		ip := storeHost.Addr().As16()
		n = copy(buf[:], ip[:])
	} else {
		var ip [4]byte
		if a := storeHost.Addr().Unmap(); a.Is4() {
			ip = a.As4()
		}
		n = copy(buf[:], ip[:])
	}
	binary.BigEndian.PutUint32(buf[n:], uint32(storeHost.Port()))
	n += 4
	binary.BigEndian.PutUint64(buf[n:], uint64(physicalOffset))
	n += 8
	const digits = "0123456789ABCDEF"
	var out [56]byte
	for i, b := range buf[:n] {
		out[2*i], out[2*i+1] = digits[b>>4], digits[b&0xF]
	}
	return string(out[:2*n])
}

// ParseMessageID parses an offset msgId (32 hex characters for an IPv4
// store host, 56 for IPv6) as MessageDecoder.decodeMessageId does. Errors
// wrap ErrInvalidMessageID.
func ParseMessageID(id string) (MessageID, error) {
	if len(id) != 32 && len(id) != 56 {
		// Clipped: the id is a client's header value, and the error
		// becomes a response's remark.
		return MessageID{}, fmt.Errorf("%w: %s has %d characters, want 32 (IPv4) or 56 (IPv6)", ErrInvalidMessageID, quoteClipped(id), len(id))
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
