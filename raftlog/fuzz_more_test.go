package raftlog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

// FuzzDecodeMeta: the meta file decoder never panics, fails with
// ErrCorruptMeta on what it refuses, and what it accepts re-encodes to a
// record that decodes to the same meta.
func FuzzDecodeMeta(f *testing.F) {
	f.Add(meta{SegmentSize: 1 << 20, FirstIndex: 5, AnchorIndex: 9, AnchorPos: 4096}.encode())
	f.Add(meta{SegmentSize: 1 << 30, ResetPending: true, ZeroTo: 8192}.encode())
	f.Add([]byte("RLMT"))
	f.Add(make([]byte, metaSize2))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptMeta) {
				t.Fatalf("error %v does not wrap ErrCorruptMeta", err)
			}
			return
		}
		if m.SegmentSize <= 0 || m.AnchorPos < 0 || m.ZeroTo < 0 {
			t.Fatalf("accepted out-of-range meta %+v", m)
		}
		if again, err := decodeMeta(m.encode()); err != nil || again != m {
			t.Fatalf("%+v does not round-trip: %+v, %v", m, again, err)
		}
	})
}

// FuzzReadSnapshotPosition: the record at the head of a snapshot either
// reads (consuming exactly its own bytes, so the tables after it start
// where they should) and re-writes to the same bytes, or fails with
// ErrCorruptFrame or a read error.
func FuzzReadSnapshotPosition(f *testing.F) {
	var w bytes.Buffer
	_ = WriteSnapshotPosition(&w, SnapshotPosition{Index: 7, Term: 2, EndPos: 4096})
	f.Add(append(w.Bytes(), `{"topics":{}}`...))
	f.Add(w.Bytes()[:SnapshotPositionSize-1])
	f.Add(make([]byte, SnapshotPositionSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		p, err := ReadSnapshotPosition(r)
		if err != nil {
			if len(b) >= SnapshotPositionSize && !errors.Is(err, ErrCorruptFrame) {
				t.Fatalf("error %v on a whole record does not wrap ErrCorruptFrame", err)
			}
			return
		}
		if r.Len() != len(b)-SnapshotPositionSize {
			t.Fatalf("read %d bytes, want %d", len(b)-r.Len(), SnapshotPositionSize)
		}
		if p.Index == 0 || p.EndPos < 0 {
			t.Fatalf("accepted %+v", p)
		}
		var out bytes.Buffer
		if err := WriteSnapshotPosition(&out, p); err != nil || !bytes.Equal(out.Bytes(), b[:SnapshotPositionSize]) {
			t.Fatalf("%+v re-writes as % x, read from % x (%v)", p, out.Bytes(), b[:SnapshotPositionSize], err)
		}
	})
}

// FuzzParsePeers: a dLegerPeers value either parses into members with
// distinct ids and addresses that render back to a value parsing the
// same, or fails with ErrInvalidConfig.
func FuzzParsePeers(f *testing.F) {
	f.Add("n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913")
	f.Add(" n0-[::1]:1 ; ;n1-h-2:65535;")
	f.Add("n0-127.0.0.1:0")
	f.Add("n0-h:1;n0-h:2")
	f.Add("-h:1")
	f.Fuzz(func(t *testing.T, s string) {
		peers, err := ParsePeers(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		parts := make([]string, len(peers))
		for i, p := range peers {
			if p.ID == "" || p.Addr == "" {
				t.Fatalf("empty member %+v from %q", p, s)
			}
			parts[i] = p.ID + "-" + p.Addr
		}
		back, err := ParsePeers(strings.Join(parts, ";"))
		if err != nil || !slices.Equal(back, peers) {
			t.Fatalf("%q → %+v → %+v, %v", s, peers, back, err)
		}
	})
}

// FuzzOpenDamagedLog: a log directory as found at startup with any bytes
// written over any of its files (segment, index, meta) either fails Open
// with an error or opens to a log that serves every entry it claims, each
// the entry that was stored, and keeps taking entries after its last one;
// reopening finds the same log. Damage never invents or rewrites an entry.
func FuzzOpenDamagedLog(f *testing.F) {
	const n = 60
	base := storage.NewFaultFS(3)
	o := testOptions(base)
	o.SegmentSize = 8 << 10
	s := mustOpen(f, "/log", o)
	for i := uint64(1); i <= n; i += 6 {
		storeAll(f, s, raftlogtest.Entries(i, min(i+5, n), 1))
	}
	crashed := base.Crash(storage.CrashOptions{})
	s.Close()
	type file struct {
		name string
		data []byte
	}
	var files []file
	var walk func(dir string)
	walk = func(dir string) {
		ents, err := crashed.ReadDir(dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			if e.IsDir() {
				walk(p)
				continue
			}
			fi, err := crashed.Stat(p)
			if err != nil {
				f.Fatal(err)
			}
			fl, err := crashed.OpenFile(p, os.O_RDONLY, 0)
			if err != nil {
				f.Fatal(err)
			}
			b := make([]byte, fi.Size())
			if _, err := fl.ReadAt(b, 0); err != nil {
				f.Fatal(err)
			}
			fl.Close()
			files = append(files, file{p, b})
		}
	}
	walk("/log")
	if len(files) < 3 {
		f.Fatalf("log of %d files", len(files))
	}
	for i := range files {
		f.Add(uint8(i), uint16(0), []byte{0})
		f.Add(uint8(i), uint16(len(files[i].data)/3), []byte{0xff, 0xff, 0xff, 0xff})
	}
	f.Add(uint8(0), uint16(100), bytes.Repeat([]byte{0}, 64))
	f.Add(uint8(0), uint16(0), []byte{})
	f.Fuzz(func(t *testing.T, which uint8, at uint16, patch []byte) {
		fsys := storage.NewFaultFS(1)
		for i, fl := range files {
			b := fl.data
			if i == int(which)%len(files) && len(b) > 0 {
				b = bytes.Clone(b)
				copy(b[int(at)%len(b):], patch)
			}
			if err := storage.MkdirAllDurable(fsys, filepath.Dir(fl.name)); err != nil {
				t.Fatal(err)
			}
			w, err := fsys.OpenFile(fl.name, os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.WriteAt(b, 0); err != nil {
				t.Fatal(err)
			}
			w.Close()
		}
		o := o
		o.FS = fsys
		s, err := Open("/log", o)
		if err != nil {
			if len(patch) == 0 {
				t.Fatalf("undamaged log does not open: %v", err)
			}
			return
		}
		check := func(s *LogStore, most uint64) (uint64, uint64) {
			t.Helper()
			first, err1 := s.FirstIndex()
			last, err2 := s.LastIndex()
			if err1 != nil || err2 != nil || last > most || (first == 0) != (last == 0) || first > last {
				t.Fatalf("opened to [%d, %d] (%v, %v) from %d entries", first, last, err1, err2, most)
			}
			for i := first; i <= last && first > 0; i++ {
				var l raft.Log
				if err := s.GetLog(i, &l); err != nil {
					t.Fatalf("entry %d of [%d, %d]: %v", i, first, last, err)
				}
				if err := raftlogtest.Equal(&l, raftlogtest.Entry(i, 1)); err != nil {
					t.Fatalf("entry %d reads back changed: %v", i, err)
				}
			}
			return first, last
		}
		first, last := check(s, n)
		if len(patch) == 0 && (first != 1 || last != n) {
			t.Fatalf("undamaged log opened to [%d, %d]", first, last)
		}
		next := last + 1
		if err := s.StoreLogs([]*raft.Log{raftlogtest.Entry(next, 1)}); err != nil {
			s.Close()
			return // a store refusing to append past damage it found is fine
		}
		s.Close()
		s, err = Open("/log", o)
		if err != nil {
			t.Fatalf("reopen after appending %d: %v", next, err)
		}
		defer s.Close()
		if first == 0 {
			first = next
		}
		if f2, l2 := check(s, next); f2 != first || l2 != next {
			t.Fatalf("reopened to [%d, %d], want [%d, %d]", f2, l2, first, next)
		}
	})
}
