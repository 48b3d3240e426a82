package raftlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
)

// Frame layout: how one raft.Log sits in the CommitLog file space.
//
// All integers are big-endian, like RocketMQ's stored messages, and the first
// eight bytes are TOTALSIZE + MAGIC exactly as in a stored message and in the
// blank filler, so one scanner can walk a segment holding any mix of them by
// dispatching on the magic.
//
//	offset size field
//	     0    4 TOTALSIZE   whole frame: header + extensions + data + CRC
//	     4    4 MAGIC       FrameMagic (0x52414654, "RAFT")
//	     8    1 VERSION     FrameVersion (1)
//	     9    1 TYPE        raft.LogType
//	    10    2 RESERVED    zero
//	    12    4 EXTLEN      length of Extensions
//	    16    8 INDEX       raft index
//	    24    8 TERM        raft term
//	    32    8 APPENDEDAT  unix nanoseconds, 0 for the zero time
//	    40    4 DATALEN     length of Data
//	    44    E EXTENSIONS
//	  44+E    D DATA
//	44+E+D    4 CRC         CRC32-C (Castagnoli) of bytes [0, 44+E+D)
//
// Data starts at frame position + FrameHeaderSize + EXTLEN. For a LogCommand
// entry whose data is a batch of RocketMQ stored messages, the messages are
// therefore contiguous in the file, and a message's PHYSICALOFFSET is
//
//	frame position + FrameHeaderSize + EXTLEN + the message's offset in Data
//
// Because the layout is a deterministic function of the Raft log (same
// entries, same segment size ⇒ same positions on every replica), a msgId
// (store host + PHYSICALOFFSET) names the same bytes on every replica and
// stays valid after failover.
const (
	// FrameMagic marks a Raft entry frame. It differs from the stored-message
	// magics (0xDAA320A7, 0xDAA320AB) and the blank filler (0xCBD43194).
	FrameMagic uint32 = 0x52414654
	// BlankMagic marks the filler at a segment's end (RocketMQ's
	// BLANK_MAGIC_CODE): TOTALSIZE + MAGIC, TOTALSIZE covering the rest of the
	// segment. A frame never spans segments.
	BlankMagic uint32 = 0xCBD43194
	// FrameVersion is the layout version written in every frame.
	FrameVersion = 1
	// FrameHeaderSize is the fixed part of a frame before the extensions.
	FrameHeaderSize = 44
	// FrameTrailerSize is the CRC after the data.
	FrameTrailerSize = 4
	// BlankHeaderSize is the smallest blank filler. A segment always keeps
	// room for one, so every segment ends in a filler or exactly at its end.
	BlankHeaderSize = 8
)

const (
	offTotalSize  = 0
	offMagic      = 4
	offVersion    = 8
	offType       = 9
	offReserved   = 10
	offExtLen     = 12
	offIndex      = 16
	offTerm       = 24
	offAppendedAt = 32
	offDataLen    = 40
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FrameSize returns the encoded size of an entry with the given extension
// and data lengths.
func FrameSize(extLen, dataLen int) int {
	return FrameHeaderSize + extLen + dataLen + FrameTrailerSize
}

// EncodedSize returns the encoded size of l.
func EncodedSize(l *raft.Log) int { return FrameSize(len(l.Extensions), len(l.Data)) }

// FrameHeader is the decoded fixed header of a frame.
type FrameHeader struct {
	// Size is TOTALSIZE: the whole frame in bytes.
	Size int
	// Type is the raft entry type.
	Type raft.LogType
	// Index and Term are the raft index and term.
	Index, Term uint64
	// AppendedAt is the leader's append time in unix nanoseconds (0 = unset).
	AppendedAt int64
	// ExtLen and DataLen are the lengths of Extensions and Data.
	ExtLen, DataLen int
}

// headerOf is the header encodeFrameBody writes for l.
func headerOf(l *raft.Log) FrameHeader {
	return FrameHeader{
		Size:       EncodedSize(l),
		Type:       l.Type,
		Index:      l.Index,
		Term:       l.Term,
		AppendedAt: appendedAtNanos(l.AppendedAt),
		ExtLen:     len(l.Extensions),
		DataLen:    len(l.Data),
	}
}

// DataOffset returns where Data starts, relative to the frame start.
func (h FrameHeader) DataOffset() int { return FrameHeaderSize + h.ExtLen }

// appendedAtNanos maps a time to the APPENDEDAT field. The zero time (used
// by BootstrapCluster's configuration entry) is 0: UnixNano of year 1 is not
// representable, and every replica must encode it the same way.
func appendedAtNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func appendedAtTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// encodeFrameBody writes header, extensions and data of l into dst, which
// must be exactly EncodedSize(l) long. The CRC is written by sealFrame, so a
// caller can patch the data in place (PHYSICALOFFSET of stored messages)
// between the two.
func encodeFrameBody(dst []byte, l *raft.Log) {
	be := binary.BigEndian
	be.PutUint32(dst[offTotalSize:], uint32(len(dst)))
	be.PutUint32(dst[offMagic:], FrameMagic)
	dst[offVersion] = FrameVersion
	dst[offType] = byte(l.Type)
	be.PutUint16(dst[offReserved:], 0)
	be.PutUint32(dst[offExtLen:], uint32(len(l.Extensions)))
	be.PutUint64(dst[offIndex:], l.Index)
	be.PutUint64(dst[offTerm:], l.Term)
	be.PutUint64(dst[offAppendedAt:], uint64(appendedAtNanos(l.AppendedAt)))
	be.PutUint32(dst[offDataLen:], uint32(len(l.Data)))
	n := copy(dst[FrameHeaderSize:], l.Extensions)
	copy(dst[FrameHeaderSize+n:], l.Data)
}

// sealFrame writes the CRC over everything before it.
func sealFrame(dst []byte) {
	end := len(dst) - FrameTrailerSize
	binary.BigEndian.PutUint32(dst[end:], crc32.Checksum(dst[:end], castagnoli))
}

// EncodeFrame writes the frame of l into dst, which must be exactly
// EncodedSize(l) bytes long.
func EncodeFrame(dst []byte, l *raft.Log) error {
	if len(dst) != EncodedSize(l) {
		return fmt.Errorf("raftlog: encode frame of index %d: buffer of %d bytes, need %d", l.Index, len(dst), EncodedSize(l))
	}
	encodeFrameBody(dst, l)
	sealFrame(dst)
	return nil
}

// AppendFrame appends the frame of l to b.
func AppendFrame(b []byte, l *raft.Log) []byte {
	n := EncodedSize(l)
	b = append(b, make([]byte, n)...)
	dst := b[len(b)-n:]
	encodeFrameBody(dst, l)
	sealFrame(dst)
	return b
}

// EntryKind says what a scanner found at a position.
type EntryKind int

// Kinds of entries in the CommitLog file space.
const (
	// KindFrame is a Raft entry frame.
	KindFrame EntryKind = iota + 1
	// KindBlank is a segment-end filler; skip Size bytes (to the segment end).
	KindBlank
)

// DecodeFrameHeader decodes and bounds-checks the fixed header at the start
// of b: magic, version, reserved bits, and that TOTALSIZE matches the
// lengths and fits in b. It does not check the CRC (CheckFrame does).
func DecodeFrameHeader(b []byte) (FrameHeader, error) {
	var h FrameHeader
	if len(b) < FrameHeaderSize {
		return h, fmt.Errorf("%w: %d bytes left, a frame header needs %d", ErrCorruptFrame, len(b), FrameHeaderSize)
	}
	be := binary.BigEndian
	if m := be.Uint32(b[offMagic:]); m != FrameMagic {
		return h, fmt.Errorf("%w: bad magic %#08x", ErrCorruptFrame, m)
	}
	if b[offVersion] != FrameVersion || be.Uint16(b[offReserved:]) != 0 {
		return h, fmt.Errorf("%w: unknown frame version %d/%#04x", ErrCorruptFrame, b[offVersion], be.Uint16(b[offReserved:]))
	}
	size := uint64(be.Uint32(b[offTotalSize:]))
	ext := uint64(be.Uint32(b[offExtLen:]))
	data := uint64(be.Uint32(b[offDataLen:]))
	// uint64 arithmetic: the sum of two 32-bit lengths cannot overflow it.
	if size != FrameHeaderSize+ext+data+FrameTrailerSize {
		return h, fmt.Errorf("%w: TOTALSIZE %d but header %d + extensions %d + data %d + crc %d", ErrCorruptFrame, size, FrameHeaderSize, ext, data, FrameTrailerSize)
	}
	if size > uint64(len(b)) {
		return h, fmt.Errorf("%w: frame of %d bytes with %d left", ErrCorruptFrame, size, len(b))
	}
	h = FrameHeader{
		Size:       int(size),
		Type:       raft.LogType(b[offType]),
		Index:      be.Uint64(b[offIndex:]),
		Term:       be.Uint64(b[offTerm:]),
		AppendedAt: int64(be.Uint64(b[offAppendedAt:])),
		ExtLen:     int(ext),
		DataLen:    int(data),
	}
	return h, nil
}

// CheckFrame decodes the header of the frame at the start of b and verifies
// its CRC without copying anything.
func CheckFrame(b []byte) (FrameHeader, error) {
	h, err := DecodeFrameHeader(b)
	if err != nil {
		return h, err
	}
	end := h.Size - FrameTrailerSize
	want := binary.BigEndian.Uint32(b[end:])
	if got := crc32.Checksum(b[:end], castagnoli); got != want {
		return h, fmt.Errorf("%w: index %d: crc %#08x, stored %#08x", ErrCorruptFrame, h.Index, got, want)
	}
	return h, nil
}

// DecodeFrame verifies the frame at the start of b and fills l from it,
// copying Extensions and Data once out of b (b usually aliases a mapping
// that may change after the caller's lock is released). Empty extensions or
// data decode as nil. It returns the frame size.
func DecodeFrame(b []byte, l *raft.Log) (int, error) {
	h, err := CheckFrame(b)
	if err != nil {
		return 0, err
	}
	fillLog(l, h, b)
	return h.Size, nil
}

// fillLog sets l from a checked header and its frame bytes. Extensions and
// data share one allocation: one copy out of the mapping.
func fillLog(l *raft.Log, h FrameHeader, b []byte) {
	l.Index, l.Term, l.Type = h.Index, h.Term, h.Type
	l.AppendedAt = appendedAtTime(h.AppendedAt)
	l.Extensions, l.Data = nil, nil
	if n := h.ExtLen + h.DataLen; n > 0 {
		// append into a nil slice allocates without zeroing what it copies
		// over (make + copy would clear the whole entry first).
		buf := append([]byte(nil), b[FrameHeaderSize:FrameHeaderSize+n]...)
		if h.ExtLen > 0 {
			l.Extensions = buf[:h.ExtLen:h.ExtLen]
		}
		if h.DataLen > 0 {
			l.Data = buf[h.ExtLen:n:n]
		}
	}
}

// ScanEntry looks at the entry at the start of b, which runs to the end of
// its segment: a frame (checked, CRC included), a blank filler (which must
// cover exactly the rest of b), or zeros (ErrEndOfData). Anything else is
// ErrCorruptFrame. It returns the kind, the header for a frame, and the
// number of bytes to skip.
func ScanEntry(b []byte) (EntryKind, FrameHeader, int, error) {
	if len(b) == 0 {
		return 0, FrameHeader{}, 0, ErrEndOfData
	}
	if len(b) < BlankHeaderSize {
		// Segments always keep room for a blank header; a shorter tail can only
		// be reached through a corrupt size.
		return 0, FrameHeader{}, 0, fmt.Errorf("%w: %d bytes left in segment", ErrCorruptFrame, len(b))
	}
	be := binary.BigEndian
	size := be.Uint32(b[offTotalSize:])
	magic := be.Uint32(b[offMagic:])
	switch {
	case size == 0 && magic == 0:
		return 0, FrameHeader{}, 0, ErrEndOfData
	case magic == BlankMagic:
		if uint64(size) != uint64(len(b)) {
			return 0, FrameHeader{}, 0, fmt.Errorf("%w: blank filler of %d bytes with %d left in segment", ErrCorruptFrame, size, len(b))
		}
		return KindBlank, FrameHeader{}, len(b), nil
	}
	h, err := CheckFrame(b)
	if err != nil {
		return 0, h, 0, err
	}
	return KindFrame, h, h.Size, nil
}

// putBlank writes a blank filler header covering all of dst.
func putBlank(dst []byte) {
	binary.BigEndian.PutUint32(dst[offTotalSize:], uint32(len(dst)))
	binary.BigEndian.PutUint32(dst[offMagic:], BlankMagic)
}
