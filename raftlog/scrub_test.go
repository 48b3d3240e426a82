package raftlog

import (
	"errors"
	"testing"

	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

// scrubAll runs ScrubSegment passes from the start until the pass ends or
// finds damage; it returns the segments verified and the bytes paced.
func scrubAll(s *LogStore) (segs, bytes int, err error) {
	pace := func(n int) error { bytes += n; return nil }
	for pos := int64(0); ; segs++ {
		next, ok, err := s.ScrubSegment(pos, pace)
		if err != nil || !ok {
			return segs, bytes, err
		}
		pos = next
	}
}

// TestScrubFindsDamageBelowTheAnchor: a bit flipped in a checkpointed
// closed segment passes Open (recovery starts at the anchor) but the scrub
// finds it and names the file and offset, and ReadRange refuses to hand
// the frame out; the frames before it are still served.
func TestScrubFindsDamageBelowTheAnchor(t *testing.T) {
	f := storage.NewFaultFS(11)
	o := testOptions(f)
	s := mustOpen(t, "/log", o)
	for i := uint64(1); i <= 400; i += 8 {
		storeAll(t, s, raftlogtest.Entries(i, i+7, 1))
	}
	segs, n, err := scrubAll(s)
	if err != nil || segs < 3 || n < segs*(16<<10)/2 {
		t.Fatalf("clean scrub: %d segments, %d bytes, %v", segs, n, err)
	}
	last, _, _ := s.ReadFrame(400)
	if err := s.VerifySegmentAt(last); err != nil {
		t.Fatalf("VerifySegmentAt the open segment: %v", err)
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	pos, frame, err := s.ReadFrame(20)
	if err != nil {
		t.Fatal(err)
	}
	mf := s.segQ.FindByOffset(pos)
	path, off := mf.Path(), pos-mf.FileFromOffset()
	prev, _, err := s.ReadFrame(19)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := f.FlipBit(path, off+int64(len(frame))/2, 5); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, "/log", o) // below the anchor: Open does not look
	defer s.Close()

	_, _, err = scrubAll(s)
	var de *DamageError
	if !errors.As(err, &de) || !errors.Is(err, ErrDamagedLog) || !errors.Is(err, ErrCorruptFrame) {
		t.Fatalf("scrub after the flip: %v, want a DamageError", err)
	}
	if de.Path != path || de.FileOffset != off || de.Position != pos || de.AfterIndex != 19 {
		t.Fatalf("damage at %s:%d (pos %d, after %d), want %s:%d (pos %d, after 19)", de.Path, de.FileOffset, de.Position, de.AfterIndex, path, off, pos)
	}
	t.Log(de)

	if err := s.VerifySegmentAt(pos + 100); !errors.As(err, &de) || de.FileOffset != off {
		t.Fatalf("VerifySegmentAt: %v", err)
	}
	if _, err := s.ReadRange(pos, 1<<20); !errors.As(err, &de) || de.FileOffset != off {
		t.Fatalf("ReadRange of the damaged frame: %v", err)
	}
	if _, err := s.ReadRange(prev, 1<<20); !errors.As(err, &de) || de.Position != pos {
		t.Fatalf("ReadRange across the damaged frame: %v", err)
	}
	if b, err := s.ReadRange(prev, int(pos-prev)); err != nil || int64(len(b)) != pos-prev {
		t.Fatalf("ReadRange of the frame before it: %d bytes, %v", len(b), err)
	}
	// Not an entry boundary: a mismatch, not damage.
	if _, err := s.ReadRange(prev+3, 100); !errors.Is(err, ErrLogMismatch) {
		t.Fatalf("ReadRange inside a frame: %v", err)
	}
}

// TestReadRangeWholeFrames: ReadRange hands out whole entries only, at
// least one, and a copy driven by it reproduces the log's bytes.
func TestReadRangeWholeFrames(t *testing.T) {
	s := mustOpen(t, "/log", testOptions(storage.NewFaultFS(12)))
	defer s.Close()
	storeAll(t, s, raftlogtest.Entries(1, 200, 1))
	end, _, err := s.ReadFrame(200)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 100, 3000, 1 << 20} {
		for pos := int64(0); pos <= end; {
			b, err := s.ReadRange(pos, n)
			if err != nil {
				t.Fatalf("n=%d: ReadRange(%d): %v", n, pos, err)
			}
			if !entryMagicAt(b) {
				t.Fatalf("n=%d: chunk at %d does not start with an entry", n, pos)
			}
			pos += int64(len(b))
		}
	}
}
