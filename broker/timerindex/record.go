package timerindex

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// RecordSize is the size of one Record on disk.
const RecordSize = 20

// BucketMs is the width of a bucket. It is part of the on-disk format
// (bucket numbers are file names) and the same on every replica.
const BucketMs = 1000

// ErrCorrupt reports a record whose checksum does not match.
var ErrCorrupt = errors.New("timerindex: corrupt record")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record is one pending timer: when it is due and where its message is (the
// queue offset in the timer topic's single queue).
type Record struct {
	DeliverMs   int64
	QueueOffset int64
}

// BucketOf is the bucket of a deliver time (floor division, so times
// before 1970 stay ordered).
func BucketOf(ms int64) int64 {
	b := ms / BucketMs
	if ms < 0 && ms%BucketMs != 0 {
		b--
	}
	return b
}

// AppendRecord appends r's 20 bytes to dst.
func AppendRecord(dst []byte, r Record) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(r.DeliverMs))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(r.QueueOffset))
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// DecodeRecord decodes the record at the start of b. It returns ErrCorrupt
// when b is short or the checksum does not match; it never panics.
func DecodeRecord(b []byte) (Record, error) {
	if len(b) < RecordSize {
		return Record{}, ErrCorrupt
	}
	if crc32.Checksum(b[:16], castagnoli) != binary.LittleEndian.Uint32(b[16:20]) {
		return Record{}, ErrCorrupt
	}
	return Record{
		DeliverMs:   int64(binary.LittleEndian.Uint64(b[0:8])),
		QueueOffset: int64(binary.LittleEndian.Uint64(b[8:16])),
	}, nil
}
