package store

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// newTestCommitLog opens a CommitLog and a segLog writing into its segments.
func newTestCommitLog(t *testing.T, fsys storage.FS, dir string, fileSize int) (*CommitLog, *segLog) {
	t.Helper()
	cl, err := newCommitLog(fsys, dir, fileSize, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.close() })
	return cl, &segLog{t: t, mfq: cl.Queue(), ts: 1_700_000_000_000}
}

func coreMsg(topic string, qid int32, body string) *Message {
	return &Message{Topic: topic, QueueID: qid, Body: []byte(body), BornTimestamp: 1,
		BornHost:   netip.MustParseAddrPort("10.0.0.1:1000"),
		Properties: map[string]string{"TAGS": "T", "KEYS": "key-" + body[:min(len(body), 16)]}}
}

// TestCommitLogReadsAcrossSegments: every message of a log spanning
// segments (with blank fillers at their ends) reads back verified at its
// physical offset; a filler is never served as a message.
func TestCommitLogReadsAcrossSegments(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		const fileSize = 4096
		cl, l := newTestCommitLog(t, fsys, dir, fileSize)
		var offs []int64
		for i := 0; i < 20; i++ {
			phy, _ := l.append(coreMsg("T", 0, strings.Repeat("x", 300+i)))
			offs = append(offs, phy)
		}
		if n := len(cl.Queue().Files()); n < 2 {
			t.Fatalf("%d segments", n)
		}
		for i, off := range offs {
			s, err := cl.ReadMessage(off)
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			m, _, err := wire.DecodeMessage(s.B, false)
			if err != nil || len(m.Body) != 300+i || m.PhysicalOffset != off {
				t.Fatalf("message %d: %v len %d", i, err, len(m.Body))
			}
			s.Release()
		}
		first := cl.Queue().Files()[0]
		filler := offs[0]
		for _, off := range offs {
			if off < fileSize {
				filler = off
			}
		}
		last, err := cl.ReadMessage(filler)
		if err != nil {
			t.Fatal(err)
		}
		filler += int64(len(last.B))
		last.Release()
		if filler >= first.FileFromOffset()+int64(first.Size()) {
			t.Fatal("first segment has no filler")
		}
		if _, err := cl.ReadMessage(filler); !errors.Is(err, ErrOutOfRange) {
			t.Fatalf("blank filler served: %v", err)
		}
	})
}

func TestCommitLogReadsNeverPastWrittenEnd(t *testing.T) {
	f := storage.NewFaultFS(1)
	cl, l := newTestCommitLog(t, f, "/cl", 1<<16)
	l.append(coreMsg("T", 0, "abc"))
	end := cl.MaxOffset()
	if _, err := cl.Read(0, int(end)+1); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("read past end: %v", err)
	}
	if _, err := cl.ReadMessage(end); !errors.Is(err, ErrCorruptMessage) && !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("message at end: %v", err)
	}
	if _, err := cl.Read(1<<20, 1); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("read of unknown segment: %v", err)
	}
}

func TestCommitLogReadVerifiedRejectsFlippedBits(t *testing.T) {
	f := storage.NewFaultFS(1)
	cl, l := newTestCommitLog(t, f, "/cl", 1<<16)
	phy, size := l.append(coreMsg("T", 0, "payload"))
	res := struct {
		PhysicalOffset int64
		Size           int32
	}{phy, int32(size)}
	if s, err := cl.ReadVerified(res.PhysicalOffset, res.Size); err != nil {
		t.Fatal(err)
	} else {
		s.Release()
	}
	for _, at := range []int64{12, 40, 100, int64(res.Size) - 30} { // queue id, born ts, body, properties
		if err := f.FlipBit("/cl/"+storage.FileName(0), at, 3); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.ReadVerified(res.PhysicalOffset, res.Size); !errors.Is(err, ErrCorruptMessage) {
			t.Fatalf("flip at %d served: %v", at, err)
		}
		if _, err := cl.ReadMessage(res.PhysicalOffset); !errors.Is(err, ErrCorruptMessage) {
			t.Fatalf("flip at %d served by ReadMessage: %v", at, err)
		}
		f.FlipBit("/cl/"+storage.FileName(0), at, 3) // restore
	}
}
