package raftlog

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
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
