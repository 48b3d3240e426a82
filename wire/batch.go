package wire

import (
	"encoding/binary"
	"fmt"
)

// A SEND_BATCH_MESSAGE (320) body is the messages one after another, each
// (MessageDecoder.encodeMessage):
//
//	TOTALSIZE i32 · MAGICCODE i32 · BODYCRC i32 · FLAG i32 ·
//	BODYLEN i32 + body · PROPLEN i16 + properties
//
// RocketMQ's clients write 0 for MAGICCODE and BODYCRC and brokers ignore
// both; EncodeBatch writes 0 for the magic and the real body CRC, which
// costs nothing and lets a broker check the bytes it got.

// BatchEntryOverhead is the fixed part of one batch entry: its size
// without body and properties.
const BatchEntryOverhead = 4 + 4 + 4 + 4 + 4 + 2

// BatchEntry is one message of a batch body: what the broker needs of it.
type BatchEntry struct {
	// Flag is the message's Flag.
	Flag int32
	// Body is the body as sent (batches are never compressed).
	Body []byte
	// Properties is the message's properties string (EncodeProperties).
	Properties string
}

// AppendBatchEntry appends one entry to dst. Properties longer than the
// int16 PROPLEN can express are an error wrapping ErrMessageIllegal.
func AppendBatchEntry(dst []byte, e BatchEntry) ([]byte, error) {
	if len(e.Properties) > MaxPropertiesLen {
		return dst, fmt.Errorf("%w: properties are %d bytes, above %d", ErrMessageIllegal, len(e.Properties), MaxPropertiesLen)
	}
	size := BatchEntryOverhead + len(e.Body) + len(e.Properties)
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, BodyCRC32(e.Body))
	dst = binary.BigEndian.AppendUint32(dst, uint32(e.Flag))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(e.Body)))
	dst = append(dst, e.Body...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(e.Properties)))
	return append(dst, e.Properties...), nil
}

// EncodeBatch renders entries as a SEND_BATCH_MESSAGE body.
func EncodeBatch(entries []BatchEntry) ([]byte, error) {
	n := 0
	for _, e := range entries {
		n += BatchEntryOverhead + len(e.Body) + len(e.Properties)
	}
	out := make([]byte, 0, n)
	var err error
	for _, e := range entries {
		if out, err = AppendBatchEntry(out, e); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DecodeBatch parses a SEND_BATCH_MESSAGE body back into its entries
// (MessageDecoder.decodeMessages). Bodies alias body. A *DecodeError
// names the first entry that does not fit.
func DecodeBatch(body []byte) ([]BatchEntry, error) {
	var out []BatchEntry
	for off := 0; off < len(body); {
		r := &reader{b: body[off:]}
		size := r.i32("TOTALSIZE")
		r.u32("MAGICCODE")
		r.u32("BODYCRC")
		flag := r.i32("FLAG")
		bodyLen := r.i32("BODYLEN")
		b := r.bytes(int(bodyLen), "BODY")
		var propLen int
		if p := r.bytes(2, "PROPLEN"); p != nil {
			propLen = int(int16(binary.BigEndian.Uint16(p)))
		}
		props := r.bytes(max(propLen, 0), "PROPERTIES")
		if r.err != nil {
			r.err.Offset = off
			return out, r.err
		}
		if int(size) != r.pos {
			return out, &DecodeError{Offset: off, Reason: fmt.Sprintf("TOTALSIZE %d but the fields end at %d", size, r.pos)}
		}
		out = append(out, BatchEntry{Flag: flag, Body: b, Properties: string(props)})
		off += r.pos
	}
	return out, nil
}
