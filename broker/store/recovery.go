package store

import (
	"bytes"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// RecoveryReport says what CommitLog recovery found at Open.
type RecoveryReport struct {
	// Abnormal is true when the abort file showed the last run crashed.
	Abnormal bool
	// ScanFrom is the offset scanning started at (a segment start).
	ScanFrom int64
	// End is the recovered end of the CommitLog (its new MaxOffset).
	End int64
	// Corrupt is set when scanning stopped at a damaged entry rather than at
	// the end of the data; CorruptErr says what was wrong.
	Corrupt    bool
	CorruptErr error
	// DroppedBytes counts the written-looking bytes past End that were
	// discarded (a torn tail, or everything past a corrupt entry).
	DroppedBytes int64
	// Checkpoint is the checkpoint read at start (zero if none).
	Checkpoint Checkpoint
}

// normalRecoveryFiles is how many trailing segments a clean restart
// re-verifies (RocketMQ recoverNormally starts from the third-last file).
const normalRecoveryFiles = 3

// scanFromIndex picks the first segment to verify.
func scanFromIndex(files []*storage.MappedFile, abnormal bool, ckpt Checkpoint, haveCkpt bool) int {
	if !abnormal {
		return max(0, len(files)-normalRecoveryFiles)
	}
	if !haveCkpt {
		return 0 // nothing known durable: verify everything
	}
	for i := len(files) - 1; i >= 0; i-- {
		if files[i].FileFromOffset() <= ckpt.PhysicOffset {
			return i
		}
	}
	return 0
}

// recover finds the end of valid data: it scans from the chosen segment,
// checking every entry's magic, sizes, body and entry CRC and that its
// PHYSICALOFFSET field names its own position, until zeros (the end), a
// blank filler (next segment) or a damaged entry. Everything past that point
// is truncated (tail zeroed, later segments removed).
//
// A damaged entry below the checkpoint's durable offset is media corruption
// of acknowledged data, not a torn write: recovery then refuses (error
// wrapping ErrCorruptMessage, nothing modified) unless truncateCorrupt says
// the operator accepts losing everything from there.
func (c *CommitLog) recover(abnormal bool, ckpt Checkpoint, haveCkpt, truncateCorrupt bool) (RecoveryReport, error) {
	rep := RecoveryReport{Abnormal: abnormal, Checkpoint: ckpt}
	files := c.mfq.Files()
	if len(files) == 0 {
		return rep, nil
	}
	start := scanFromIndex(files, abnormal, ckpt, haveCkpt)
	rep.ScanFrom = files[start].FileFromOffset()
	end := rep.ScanFrom
scan:
	for i := start; i < len(files); i++ {
		mf := files[i]
		b := mf.Bytes()
		from := mf.FileFromOffset()
		p := 0
		for p < len(b) {
			req, n, err := CheckAndDecode(b[p:])
			if errors.Is(err, ErrEndOfData) {
				end = from + int64(p)
				break scan
			}
			if err == nil && !req.Blank && req.CommitLogOffset != from+int64(p) {
				err = fmt.Errorf("%w: PHYSICALOFFSET field says %d", ErrCorruptMessage, req.CommitLogOffset)
			}
			if err != nil {
				end = from + int64(p)
				rep.Corrupt, rep.CorruptErr = true, err
				break scan
			}
			if req.Blank {
				break
			}
			p += n
		}
		end = from + int64(len(b))
	}
	rep.End = end
	for _, mf := range files {
		if last := mf.FileFromOffset() + int64(mf.Size()); last > end {
			rep.DroppedBytes += nonZeroExtent(mf, max(0, int(end-mf.FileFromOffset())))
		}
	}
	if rep.Corrupt && haveCkpt && end < ckpt.PhysicOffset {
		c.log.Error("CommitLog entry damaged below the durable checkpoint (media corruption of acknowledged data)",
			zap.Int64("offset", end), zap.Int64("checkpointOffset", ckpt.PhysicOffset), zap.Error(rep.CorruptErr),
			zap.Bool("truncating", truncateCorrupt))
		if !truncateCorrupt {
			return rep, fmt.Errorf("commit log recovery: entry at offset %d is damaged below the durable checkpoint %d (%w); "+
				"refusing to start so nothing past it is served or destroyed: restore the segment, or set truncateCorruptCommitLog=true to drop everything from offset %d",
				end, ckpt.PhysicOffset, rep.CorruptErr, end)
		}
	} else if rep.Corrupt {
		c.log.Warn("CommitLog tail torn by a crash; truncating it",
			zap.Int64("offset", end), zap.Int64("droppedBytes", rep.DroppedBytes), zap.Error(rep.CorruptErr))
	}
	if err := c.mfq.TruncateDirty(end); err != nil {
		return rep, fmt.Errorf("commit log recovery: truncate at %d: %w", end, err)
	}
	return rep, nil
}

// nonZeroExtent returns how many bytes from pos to the last non-zero byte of
// the file would be discarded (for the report only), reading only ranges
// the file system says may hold data.
func nonZeroExtent(mf *storage.MappedFile, pos int) int64 {
	b := mf.Bytes()
	last := -1
	for off := int64(pos); off < int64(len(b)); {
		start, end := off, int64(len(b))
		start, end = max(start, off), min(end, int64(len(b)))
		var zero [4096]byte
		for e := int(end); e > int(start); {
			lo := max(int(start), e-len(zero))
			if !bytes.Equal(b[lo:e], zero[:e-lo]) {
				for i := e - 1; i >= lo; i-- {
					if b[i] != 0 {
						last = max(last, i)
						break
					}
				}
				break
			}
			e = lo
		}
		off = end
	}
	if last < pos {
		return 0
	}
	return int64(last + 1 - pos)
}
