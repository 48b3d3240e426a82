package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/raftlog/raftlogtest"
)

func TestFrameRoundTrip(t *testing.T) {
	for i := uint64(1); i <= 200; i++ {
		in := raftlogtest.Entry(i, 3+i%5)
		b := AppendFrame(nil, in)
		if len(b) != EncodedSize(in) {
			t.Fatalf("index %d: %d bytes, EncodedSize %d", i, len(b), EncodedSize(in))
		}
		var out raft.Log
		n, err := DecodeFrame(b, &out)
		if err != nil || n != len(b) {
			t.Fatalf("index %d: DecodeFrame = %d, %v", i, n, err)
		}
		if err := raftlogtest.Equal(&out, in); err != nil {
			t.Fatal(err)
		}
		// EncodeFrame into an exact buffer gives the same bytes.
		dst := make([]byte, EncodedSize(in))
		if err := EncodeFrame(dst, in); err != nil || !bytes.Equal(dst, b) {
			t.Fatalf("EncodeFrame differs: %v", err)
		}
	}
	if err := EncodeFrame(make([]byte, 3), raftlogtest.Entry(1, 1)); err == nil {
		t.Fatal("EncodeFrame into a short buffer succeeded")
	}
}

// TestFrameLayout pins the documented byte layout: the integration with the
// CommitLog scanner and the PHYSICALOFFSET rule depend on it.
func TestFrameLayout(t *testing.T) {
	l := &raft.Log{Index: 0x0102030405060708, Term: 9, Type: raft.LogCommand,
		Extensions: []byte("xy"), Data: []byte("hello"), AppendedAt: time.Unix(0, 12345)}
	b := AppendFrame(nil, l)
	be := binary.BigEndian
	if got := be.Uint32(b[0:]); got != uint32(FrameHeaderSize+2+5+4) || int(got) != len(b) {
		t.Fatalf("TOTALSIZE %d, len %d", got, len(b))
	}
	if be.Uint32(b[4:]) != FrameMagic || b[8] != FrameVersion || b[9] != byte(raft.LogCommand) {
		t.Fatalf("magic/version/type wrong: % x", b[:12])
	}
	if be.Uint32(b[12:]) != 2 || be.Uint64(b[16:]) != l.Index || be.Uint64(b[24:]) != 9 ||
		be.Uint64(b[32:]) != 12345 || be.Uint32(b[40:]) != 5 {
		t.Fatalf("header fields wrong: % x", b[:FrameHeaderSize])
	}
	h, err := CheckFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	if off := h.DataOffset(); string(b[off:off+5]) != "hello" || string(b[FrameHeaderSize:FrameHeaderSize+2]) != "xy" {
		t.Fatalf("data not at DataOffset %d", off)
	}
	for _, m := range []uint32{0xDAA320A7, 0xDAA320AB, BlankMagic} {
		if m == FrameMagic {
			t.Fatalf("frame magic collides with %#x", m)
		}
	}
}

func TestFrameZeroTime(t *testing.T) {
	b := AppendFrame(nil, &raft.Log{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte{1}})
	if binary.BigEndian.Uint64(b[offAppendedAt:]) != 0 {
		t.Fatal("zero AppendedAt not encoded as 0")
	}
	var l raft.Log
	if _, err := DecodeFrame(b, &l); err != nil || !l.AppendedAt.IsZero() {
		t.Fatalf("decoded %v, %v; want the zero time", l.AppendedAt, err)
	}
}

// TestFrameCorruptionDetected flips every bit of a frame and truncates it at
// every length: each must be rejected (or, for the bits of fields that only
// the CRC protects, caught by the CRC), never panic.
func TestFrameCorruptionDetected(t *testing.T) {
	in := raftlogtest.Entry(5, 2)
	b := AppendFrame(nil, in)
	for i := range b {
		for bit := 0; bit < 8; bit++ {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			var l raft.Log
			if _, err := DecodeFrame(c, &l); !errors.Is(err, ErrCorruptFrame) {
				t.Fatalf("flip byte %d bit %d: err %v", i, bit, err)
			}
		}
	}
	for n := 0; n < len(b); n++ {
		var l raft.Log
		if _, err := DecodeFrame(b[:n], &l); !errors.Is(err, ErrCorruptFrame) {
			t.Fatalf("truncated to %d: err %v", n, err)
		}
	}
	// Lengths that overflow 32-bit sums must not wrap around.
	c := bytes.Clone(b)
	binary.BigEndian.PutUint32(c[offExtLen:], 0xFFFFFFFF)
	binary.BigEndian.PutUint32(c[offDataLen:], 0xFFFFFFFF)
	if _, err := DecodeFrameHeader(c); !errors.Is(err, ErrCorruptFrame) {
		t.Fatalf("huge lengths: %v", err)
	}
}

func TestScanEntry(t *testing.T) {
	seg := make([]byte, 4096)
	f1 := AppendFrame(nil, raftlogtest.Entry(1, 1))
	f2 := AppendFrame(nil, raftlogtest.Entry(2, 1))
	copy(seg, f1)
	copy(seg[len(f1):], f2)
	p := 0
	for _, want := range []uint64{1, 2} {
		k, h, n, err := ScanEntry(seg[p:])
		if err != nil || k != KindFrame || h.Index != want {
			t.Fatalf("at %d: %v %v %v", p, k, h.Index, err)
		}
		p += n
	}
	if _, _, _, err := ScanEntry(seg[p:]); !errors.Is(err, ErrEndOfData) {
		t.Fatalf("zeros: %v", err)
	}
	putBlank(seg[p:])
	if k, _, n, err := ScanEntry(seg[p:]); err != nil || k != KindBlank || n != len(seg)-p {
		t.Fatalf("blank: %v %d %v", k, n, err)
	}
	// A blank that does not reach the segment end is corrupt.
	if _, _, _, err := ScanEntry(seg[p : len(seg)-1]); !errors.Is(err, ErrCorruptFrame) {
		t.Fatalf("short blank: %v", err)
	}
	if _, _, _, err := ScanEntry(seg[len(seg)-3:]); !errors.Is(err, ErrCorruptFrame) {
		t.Fatalf("3-byte tail: %v", err)
	}
}

// FuzzDecodeFrame feeds arbitrary bytes to the decoder and the scanner:
// they must never panic or read out of bounds, and whatever DecodeFrame
// accepts must re-encode to exactly the bytes it consumed.
func FuzzDecodeFrame(f *testing.F) {
	for i := uint64(1); i <= 12; i++ {
		f.Add(AppendFrame(nil, raftlogtest.Entry(i, i)))
	}
	blank := make([]byte, 64)
	putBlank(blank)
	f.Add(blank)
	f.Add(make([]byte, 48))
	two := AppendFrame(AppendFrame(nil, raftlogtest.Entry(7, 1)), raftlogtest.Entry(8, 1))
	f.Add(two)
	f.Fuzz(func(t *testing.T, b []byte) {
		ScanEntry(b)
		DecodeFrameHeader(b)
		var l raft.Log
		n, err := DecodeFrame(b, &l)
		if err != nil {
			if !errors.Is(err, ErrCorruptFrame) {
				t.Fatalf("error %v does not wrap ErrCorruptFrame", err)
			}
			return
		}
		if n > len(b) {
			t.Fatalf("consumed %d of %d bytes", n, len(b))
		}
		if re := AppendFrame(nil, &l); !bytes.Equal(re, b[:n]) {
			t.Fatalf("re-encoding differs:\n in % x\nout % x", b[:n], re)
		}
		if k, h, m, err := ScanEntry(b); err != nil || k != KindFrame || m != n || h.Index != l.Index {
			t.Fatalf("ScanEntry disagrees with DecodeFrame: %v %d %v", k, m, err)
		}
	})
}
