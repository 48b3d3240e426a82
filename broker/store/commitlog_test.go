package store

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

func newTestCommitLog(t *testing.T, fsys storage.FS, dir string, fileSize, maxMsg int) *CommitLog {
	t.Helper()
	cl, err := newCommitLog(fsys, commitLogConfig{
		Dir: dir, FileSize: fileSize, MaxMessageSize: maxMsg,
		StoreHost: netip.MustParseAddrPort("127.0.0.1:10911"),
		Now:       func() time.Time { return time.UnixMilli(1_700_000_000_000) },
	}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.close() })
	return cl
}

func coreMsg(topic string, qid int32, body string) *Message {
	return &Message{Topic: topic, QueueID: qid, Body: []byte(body), BornTimestamp: 1,
		BornHost:   netip.MustParseAddrPort("10.0.0.1:1000"),
		Properties: map[string]string{"TAGS": "T", "KEYS": "key-" + body[:min(len(body), 16)]}}
}

func TestCommitLogBlankFillerAcrossSegments(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		const fileSize = 4096
		cl := newTestCommitLog(t, fsys, dir, fileSize, 2048)
		var ends []int64
		for i := 0; i < 20; i++ {
			res, end, err := cl.PutMessage(coreMsg("T", 0, strings.Repeat("x", 300+i)))
			if err != nil {
				t.Fatal(err)
			}
			// No message straddles a segment.
			if res.PhysicalOffset/fileSize != (end-1)/fileSize {
				t.Fatalf("message %d [%d,%d) straddles a segment", i, res.PhysicalOffset, end)
			}
			if res.QueueOffset != int64(i) {
				t.Fatalf("queue offset %d for message %d", res.QueueOffset, i)
			}
			ends = append(ends, end)
		}
		files := cl.Queue().Files()
		if len(files) < 2 {
			t.Fatalf("%d segments", len(files))
		}
		// Every full segment ends with a blank filler covering its tail,
		// and walking entries reaches exactly its end.
		for _, mf := range files[:len(files)-1] {
			if !mf.IsFull() {
				t.Fatalf("segment %d not full", mf.FileFromOffset())
			}
			b := mf.Bytes()
			p, sawBlank := 0, false
			for p < len(b) {
				req, n, err := CheckAndDecode(b[p:])
				if err != nil {
					t.Fatalf("segment %d at %d: %v", mf.FileFromOffset(), p, err)
				}
				if req.Blank {
					if p+n != len(b) {
						t.Fatalf("blank at %d of %d bytes does not end the segment", p, n)
					}
					sawBlank = true
				} else if req.CommitLogOffset != mf.FileFromOffset()+int64(p) {
					t.Fatalf("PHYSICALOFFSET %d at %d", req.CommitLogOffset, mf.FileFromOffset()+int64(p))
				}
				p += n
			}
			if !sawBlank {
				t.Fatal("no blank filler")
			}
		}
		// Every message reads back verified.
		for i, end := range ends {
			start := int64(0)
			if i > 0 {
				start = ends[i-1]
			}
			s, err := cl.ReadMessage(start)
			if err != nil {
				// After a filler the message starts at the next segment.
				s, err = cl.ReadMessage((start/fileSize + 1) * fileSize)
			}
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			m, _, err := DecodeMessage(s.B, false)
			if err != nil || len(m.Body) != 300+i || s.Offset+int64(len(s.B)) != end {
				t.Fatalf("message %d: %v len %d", i, err, len(m.Body))
			}
			s.Release()
		}
	})
}

func TestCommitLogMaxMessageSize(t *testing.T) {
	f := storage.NewFaultFS(1)
	cl := newTestCommitLog(t, f, "/cl", 1<<16, 1000)
	_, _, err := cl.PutMessage(coreMsg("T", 0, strings.Repeat("x", 1000)))
	if !errors.Is(err, ErrMessageIllegal) {
		t.Fatalf("oversized: %v", err)
	}
	if !strings.Contains(err.Error(), "1000") || !strings.Contains(err.Error(), "maxMessageSize") {
		t.Fatalf("error does not name the size and limit: %v", err)
	}
	if cl.MaxOffset() != 0 {
		t.Fatal("rejected message was written")
	}
}

func TestCommitLogReadsNeverPastWrittenEnd(t *testing.T) {
	f := storage.NewFaultFS(1)
	cl := newTestCommitLog(t, f, "/cl", 1<<16, 4096)
	_, end, err := cl.PutMessage(coreMsg("T", 0, "abc"))
	if err != nil {
		t.Fatal(err)
	}
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

func TestCommitLogAppendEncodedBatch(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys storage.FS, dir string) {
		cl := newTestCommitLog(t, fsys, dir, 8192, 8000)
		// Fill most of the first segment so the batch must roll.
		if _, _, err := cl.PutMessage(coreMsg("T", 0, strings.Repeat("p", 7500))); err != nil {
			t.Fatal(err)
		}
		var batch []byte
		var sizes []int
		for i := 0; i < 5; i++ {
			m := coreMsg("RaftTopic", 1, fmt.Sprintf("entry-%d", i))
			m.QueueOffset = 1000 + int64(i) // left as written
			before := len(batch)
			var err error
			if batch, err = AppendMessage(batch, m); err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(batch)-before)
		}
		pos, end, err := cl.AppendEncoded(batch)
		if err != nil {
			t.Fatal(err)
		}
		if len(pos) != 5 || pos[0].PhysicalOffset != 8192 || end != 8192+int64(len(batch)) {
			t.Fatalf("positions %+v end %d", pos, end)
		}
		for i, p := range pos {
			if int(p.Size) != sizes[i] {
				t.Fatalf("size %d of entry %d", p.Size, i)
			}
			s, err := cl.ReadMessage(p.PhysicalOffset)
			if err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
			m, _, err := DecodeMessage(s.B, false)
			s.Release()
			if err != nil || m.PhysicalOffset != p.PhysicalOffset || m.StoreTimestamp != 1_700_000_000_000 ||
				m.QueueOffset != 1000+int64(i) || string(m.Body) != fmt.Sprintf("entry-%d", i) {
				t.Fatalf("entry %d: %+v %v", i, m, err)
			}
		}
		// The caller's buffer was patched in place: it holds the stored bytes.
		if m, _, err := DecodeMessage(batch, false); err != nil || m.PhysicalOffset != 8192 {
			t.Fatalf("caller's buffer not patched: %v", err)
		}
		// Garbage is refused before anything is written.
		before := cl.MaxOffset()
		if _, _, err := cl.AppendEncoded(bytes.Repeat([]byte{1}, 100)); !errors.Is(err, ErrMessageIllegal) {
			t.Fatalf("garbage batch: %v", err)
		}
		if cl.MaxOffset() != before {
			t.Fatal("refused batch moved the end")
		}
	})
}

func TestCommitLogReadVerifiedRejectsFlippedBits(t *testing.T) {
	f := storage.NewFaultFS(1)
	cl := newTestCommitLog(t, f, "/cl", 1<<16, 4096)
	res, _, err := cl.PutMessage(coreMsg("T", 0, "payload"))
	if err != nil {
		t.Fatal(err)
	}
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
