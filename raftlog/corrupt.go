package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/storage"
)

// Torn tail or corruption in the middle.
//
// Recovery scans frames from the anchor and stops at the first one that
// fails its checks. A crash can only tear what was not yet synced; under
// Options.Sync that is the one sync in flight, at the end of the log, and
// at most MaxBatchEntries entries long (Raft hands the log store no more per
// call when its MaxAppendEntries is the same; a longer call, from a leader
// configured otherwise, is synced window by window). So when a bad frame is
// found, the rest of the written space is searched for valid frames: a
// valid frame whose index lies a whole batch or more past the bad one was
// written after the bad frame's batch was synced, and so acknowledged.
// The bad frame is then damage to acknowledged data, not a torn tail, and
// Open refuses to cut it: it fails with a *CorruptionError naming the file
// and offset, so the member neither votes nor serves anything. Frames valid
// within one batch of the bad one are a torn batch (pages of an unsynced
// write reach the disk in any order) and are cut as before.
//
// A whole frame whose term is below the entry before it counts as a bad
// frame too: Raft never stores one after the other, so it is what a power
// loss brought back of a failed batch whose cut could leave no record.
// Such frames belong to that one batch, which started at or before the
// expected index, so the window test above cuts them as a torn tail.
//
// A cut in doubt (meta.ZeroTo recorded, not yet cleared: a suffix
// truncation, or a failed batch) anchors the log at the cut, and recovery
// ends the log there without scanning: every frame found past it, whole or
// not, is one the cut removes.
//
// Without Sync everything after the anchor may be unsynced, so nothing can
// be told apart and the tail is cut at the first bad frame.

// defaultMaxBatchEntries is hashicorp/raft's default MaxAppendEntries.
const defaultMaxBatchEntries = 64

// ErrMidLogCorruption marks a corrupt frame with acknowledged frames after
// it (CorruptionError unwraps to it).
var ErrMidLogCorruption = errors.New("raftlog: corrupt frame in the middle of the log")

// CorruptionError says where a log is damaged: the first bad frame and the
// furthest valid frame found after it.
type CorruptionError struct {
	// Path and FileOffset locate the bad frame in its segment file;
	// Position is the same place in the log's file space.
	Path       string
	FileOffset int64
	Position   int64
	// Index is the raft index expected at Position (0 if unknown).
	Index uint64
	// ValidIndex and ValidPosition are the last valid frame found after the
	// damage: everything up to it was acknowledged.
	ValidIndex    uint64
	ValidPosition int64
	// Cause is why the frame at Position failed.
	Cause error
}

// Error implements error.
func (e *CorruptionError) Error() string {
	return fmt.Sprintf("raftlog: corrupt frame in %s at offset %d (log position %d, raft index %d) with valid entries after it up to index %d at position %d: "+
		"acknowledged entries are not truncated; this member does not start. Repair: move this member's store away and restart it empty, "+
		"it catches up from its peers (DESIGN.md section 7): %v",
		e.Path, e.FileOffset, e.Position, e.Index, e.ValidIndex, e.ValidPosition, e.Cause)
}

// Unwrap returns ErrMidLogCorruption and the cause.
func (e *CorruptionError) Unwrap() []error { return []error{ErrMidLogCorruption, e.Cause} }

// classifyStopLocked decides whether the bad frame at pos (expected index
// expect, 0 = any) is a torn tail (nil) or damage to acknowledged frames
// (a *CorruptionError). Called by recover only.
func (s *LogStore) classifyStopLocked(pos int64, expect uint64, cause error) error {
	if !s.opts.Sync || expect == 0 {
		// Without Sync, or before any frame was ever anchored, every frame
		// found may be unsynced.
		return nil
	}
	window := uint64(s.tornWindow())
	vIndex, vPos, ok := s.lastValidFrameAfter(pos + 1)
	if !ok || vIndex < expect+window {
		return nil
	}
	e := &CorruptionError{Position: pos, Index: expect, ValidIndex: vIndex, ValidPosition: vPos, Cause: cause}
	if mf := s.segQ.FindByOffset(pos); mf != nil {
		e.Path, e.FileOffset = mf.Path(), pos-mf.FileFromOffset()
	}
	return e
}

// batchWindow is the most entries one sync makes durable
// (writeBatchLocked), so the most a power loss can tear.
func (s *LogStore) batchWindow() int {
	if s.opts.MaxBatchEntries > 0 {
		return s.opts.MaxBatchEntries
	}
	return defaultMaxBatchEntries
}

// tornWindow is the most entries a power loss can have torn at the end of
// the log being recovered: the batch window of the process that wrote it
// (windowFileName), which a restart may have changed.
func (s *LogStore) tornWindow() int {
	if s.prevWindow > 0 {
		return s.prevWindow
	}
	return s.batchWindow()
}

// windowFileName records the batch window (MaxBatchEntries) of the process
// that last opened the log, for the next recovery's tornWindow.
const windowFileName = "raftlog.window"

// readWindow returns the recorded batch window, 0 when none is recorded.
func readWindow(fsys storage.FS, dir string) (int, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, windowFileName), os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("raftlog: read %s: %w", windowFileName, err)
	}
	defer f.Close()
	var b [32]byte
	k, err := f.ReadAt(b[:], 0)
	if err != nil && err != io.EOF {
		return 0, fmt.Errorf("raftlog: read %s: %w", windowFileName, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b[:k])))
	if err != nil || n <= 0 {
		// Unreadable: the current window is the only guess left, as before
		// the file existed.
		return 0, nil
	}
	return n, nil
}

// recordWindow writes this process's batch window before it stores
// anything, unless it is the one recorded.
func (s *LogStore) recordWindow() error {
	w := s.batchWindow()
	if w == s.prevWindow {
		return nil
	}
	if err := storage.WriteFileAtomic(s.fsys, filepath.Join(s.dir, windowFileName), []byte(strconv.Itoa(w)+"\n")); err != nil {
		return fmt.Errorf("raftlog: record the batch window: %w", err)
	}
	return nil
}

// lastValidFrameAfter searches the written space from position from on for
// frames that pass every check (found by their magic, since the damaged
// frame's size cannot be trusted) and returns the one with the highest
// index.
func (s *LogStore) lastValidFrameAfter(from int64) (index uint64, pos int64, ok bool) {
	var magic [4]byte
	binary.BigEndian.PutUint32(magic[:], FrameMagic)
	for _, mf := range s.segQ.Files() {
		start := mf.FileFromOffset()
		if start+int64(mf.Size()) <= from {
			continue
		}
		b := mf.Bytes()
		i := 0
		if from > start {
			i = int(from - start)
		}
		for i+offMagic < len(b) {
			j := bytes.Index(b[i+offMagic:], magic[:])
			if j < 0 {
				break
			}
			at := i + j // the frame would start 4 bytes before its magic
			h, err := CheckFrame(b[at:])
			if err != nil {
				i = at + 1
				continue
			}
			if !ok || h.Index > index {
				index, pos, ok = h.Index, start+int64(at), true
			}
			i = at + h.Size
		}
	}
	return index, pos, ok
}
