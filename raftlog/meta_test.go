package raftlog

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"
)

// metaV1 is a version-1 meta record as deployed logs hold it: segment size
// 16 KiB, first index 3, anchor index 41 at position 20480, no flags.
const metaV1 = "524c4d5400000001000000000000000000004000" +
	"0000000000000003" + "0000000000000029" + "0000000000005000" + "20b5dcc1"

// TestMetaVersions: version-1 records written by existing deployments
// still read; a record without a truncation range is still written as
// version 1, one with it as version 2, and both round-trip.
func TestMetaVersions(t *testing.T) {
	v1, err := hex.DecodeString(metaV1)
	if err != nil {
		t.Fatal(err)
	}
	want := meta{SegmentSize: 16 << 10, FirstIndex: 3, AnchorIndex: 41, AnchorPos: 20480}
	m, err := decodeMeta(v1)
	if err != nil {
		t.Fatalf("decode version 1: %v", err)
	}
	if m != want {
		t.Fatalf("version 1 decoded as %+v, want %+v", m, want)
	}
	if b := want.encode(); !bytes.Equal(b, v1) {
		t.Fatalf("record without ZeroTo encoded as %x, want the version-1 bytes %x", b, v1)
	}
	with := want
	with.ZeroTo, with.ResetPending = 1<<40+7, true
	b := with.encode()
	if len(b) != metaSize2 || b[7] != metaVersion2 {
		t.Fatalf("record with ZeroTo: %d bytes, version %d", len(b), b[7])
	}
	if m, err := decodeMeta(b); err != nil || m != with {
		t.Fatalf("version 2 round trip: %+v, %v", m, err)
	}
	for _, bad := range [][]byte{b[:metaSize1], append(append([]byte(nil), v1...), 0), b[:7]} {
		if _, err := decodeMeta(bad); !errors.Is(err, ErrCorruptMeta) {
			t.Fatalf("decode %x: %v, want ErrCorruptMeta", bad, err)
		}
	}
	b[50] ^= 1
	if _, err := decodeMeta(b); !errors.Is(err, ErrCorruptMeta) {
		t.Fatalf("flipped ZeroTo byte: %v, want ErrCorruptMeta", err)
	}
}
