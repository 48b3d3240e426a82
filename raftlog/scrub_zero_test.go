package raftlog

import (
	"errors"
	"os"
	"testing"

	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

// TestScrubFindsZeroedFrameInClosedSegment: a frame header zeroed in a
// closed segment below the anchor (a lost or zeroed write, not a single
// flipped bit) looks like the end of written data; frames follow it in the
// same segment, so it is damage, and the scrub names it.
func TestScrubFindsZeroedFrameInClosedSegment(t *testing.T) {
	f := storage.NewFaultFS(13)
	o := testOptions(f)
	s := mustOpen(t, "/log", o)
	for i := uint64(1); i <= 400; i += 8 {
		storeAll(t, s, raftlogtest.Entries(i, i+7, 1))
	}
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	pos, _, err := s.ReadFrame(20)
	if err != nil {
		t.Fatal(err)
	}
	mf := s.segQ.FindByOffset(pos)
	path, off := mf.Path(), pos-mf.FileFromOffset()
	s.Close()
	fh, err := f.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt(make([]byte, 8), off); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	s = mustOpen(t, "/log", o)
	defer s.Close()

	_, _, err = scrubAll(s)
	var de *DamageError
	if !errors.As(err, &de) || de.Path != path || de.FileOffset != off {
		t.Fatalf("scrub after zeroing frame 20's header at %s:%d: %v, want a DamageError there", path, off, err)
	}
	if err := s.VerifySegmentAt(pos); !errors.As(err, &de) || de.FileOffset != off {
		t.Fatalf("VerifySegmentAt: %v", err)
	}
}
