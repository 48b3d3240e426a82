package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
	"go.uber.org/zap"
)

// FuzzDecodeCheckpoint: the checkpoint file decoder never panics, refuses
// with ErrCorruptFile, and accepts only what encodes back to the same
// bytes (the magic and CRC pin every byte).
func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(Checkpoint{PhysicMsgTimestamp: 1, LogicsMsgTimestamp: 2, IndexMsgTimestamp: 3, PhysicOffset: 4, LogicsOffset: 5}.encode())
	f.Add(Checkpoint{LogicsOffset: -1}.encode())
	f.Add([]byte(checkpointMagic))
	f.Add(make([]byte, checkpointSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCheckpoint(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptFile) {
				t.Fatalf("error %v does not wrap ErrCorruptFile", err)
			}
			return
		}
		if !bytes.Equal(c.encode(), b) {
			t.Fatalf("%+v encodes as % x, read from % x", c, c.encode(), b)
		}
	})
}

// FuzzIndexFileQuery opens an index file whose bytes are arbitrary (a
// damaged file on disk) and queries it: opening either refuses it with
// ErrCorruptFile or the file answers every query without reading outside
// its mapping, returning no more offsets than asked for or than it holds,
// and keeps taking keys until it is full.
func FuzzIndexFileQuery(f *testing.F) {
	const slots, items = 4, 8
	size := IndexFileSize(slots, items)
	good := &memIndexStorage{b: make([]byte, size)}
	gf, _ := newIndexFile("seed", good, slots, items, 0, 0)
	for i, k := range []string{"T#a", "T#b", "T#a", "T#c"} {
		_ = gf.PutKey(k, int64(100*i), 1700000000000+int64(i)*1000)
	}
	f.Add(bytes.Clone(good.b), "T#a")
	full := &memIndexStorage{b: make([]byte, size)}
	ff, _ := newIndexFile("full", full, slots, items, 0, 0)
	for i := 0; ff.PutKey("T#a", int64(i), 1700000000000) == nil; i++ {
	}
	f.Add(bytes.Clone(full.b), "T#a")
	f.Add(make([]byte, size), "")
	f.Fuzz(func(t *testing.T, b []byte, key string) {
		st := &memIndexStorage{b: make([]byte, size)}
		copy(st.b, b)
		idx, err := newIndexFile("fuzz", st, slots, items, 0, 0)
		if err != nil {
			if !errors.Is(err, ErrCorruptFile) {
				t.Fatalf("error %v does not wrap ErrCorruptFile", err)
			}
			return
		}
		for _, k := range []string{key, "T#a", "T#b"} {
			got := idx.SelectPhyOffsets(nil, k, 3, 0, 1<<62)
			if len(got) > 3 || len(got) > max(idx.IndexCount()-1, 0) {
				t.Fatalf("%d offsets for %q from a file of %d items", len(got), k, idx.IndexCount())
			}
		}
		for i := 0; i < items+1; i++ {
			if err := idx.PutKey(key, int64(i), 1700000000000); err != nil {
				break
			}
		}
		if !idx.IsWriteFull() {
			t.Fatalf("file takes no more keys at %d of %d items", idx.IndexCount(), items)
		}
		_ = idx.SelectPhyOffsets(nil, key, items, 0, 1<<62)
	})
}

// FuzzPatchStoredBatch: the Raft log store patches every Messages entry it
// stores, including entries a leader sent: any data either patches, every
// message then reading back with its new physical offset, or fails with
// ErrCorruptMessage, never reading or writing past a message.
func FuzzPatchStoredBatch(f *testing.F) {
	m := sampleMessage()
	one, _ := wire.AppendMessage(nil, m)
	m.BornHost = m.StoreHost
	m.Topic = strings.Repeat("v", 200)
	two, _ := wire.AppendMessage(bytes.Clone(one), m)
	f.Add(one)
	f.Add(two)
	f.Add(binary.BigEndian.AppendUint32(nil, 12))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := bytes.Clone(data)
		const base, ts = 1 << 20, 1700000000999
		if err := PatchStoredBatch(b, base, ts); err != nil {
			if !errors.Is(err, ErrCorruptMessage) {
				t.Fatalf("error %v does not wrap ErrCorruptMessage", err)
			}
			return
		}
		again := bytes.Clone(b)
		if err := PatchStoredBatch(again, base, ts); err != nil || !bytes.Equal(again, b) {
			t.Fatalf("patch is not idempotent: %v", err)
		}
		for off := 0; off < len(data); {
			msg, n, err := wire.DecodeMessage(b[off:], false)
			if err != nil {
				// Not this package's encoding (no entry CRC): the layout
				// still holds, with the fields patched in place.
				l, err := wire.CheckEntry(b[off:], false)
				if err != nil {
					t.Fatalf("patched entry at %d no longer checks: %v", off, err)
				}
				n = l.Size
			} else if msg.PhysicalOffset != base+int64(off) || msg.StoreTimestamp != ts {
				t.Fatalf("message at %d patched to offset %d, time %d", off, msg.PhysicalOffset, msg.StoreTimestamp)
			}
			off += n
		}
	})
}

// FuzzParseDeleteWhen: deleteWhen either names hours 0..23 that render
// back to a value parsing the same, or fails with ErrInvalidConfig.
func FuzzParseDeleteWhen(f *testing.F) {
	for _, s := range []string{"04", "04;05", " 23 ; 0 ;", "24", "", ";", "-1", "+4", "4;x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hours, err := parseDeleteWhen(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		var parts []string
		for _, h := range slices.Sorted(maps.Keys(hours)) {
			if h < 0 || h > 23 {
				t.Fatalf("%q gives hour %d", s, h)
			}
			parts = append(parts, strconv.Itoa(h))
		}
		if back, err := parseDeleteWhen(strings.Join(parts, ";")); err != nil || !maps.Equal(back, hours) {
			t.Fatalf("%q → %v → %v, %v", s, hours, back, err)
		}
	})
}

// FuzzConsumeQueueRecover: a ConsumeQueue's files as found at startup,
// whatever they hold, open to a queue whose units in [MinOffset,
// MaxOffset) are all valid, whose non-blank units never go back in the
// CommitLog, and whose MaxPhysicOffset is the end of its newest real unit;
// reopening recovers the same queue, and the queue takes the next unit and
// a dirty-tail cut.
func FuzzConsumeQueueRecover(f *testing.F) {
	const units = 4
	const fileBytes = units * CQUnitSize
	var good []byte
	for n := int64(0); n < 6; n++ {
		good = append(good, make([]byte, CQUnitSize)...)
		unitN(n).encode(good[len(good)-CQUnitSize:])
	}
	f.Add(good, uint8(0))
	blank := make([]byte, 2*CQUnitSize)
	blankCQUnit.encode(blank)
	unitN(9).encode(blank[CQUnitSize:])
	f.Add(blank, uint8(3))
	back := bytes.Clone(good)
	unitN(1).encode(back[3*CQUnitSize:])
	f.Add(back, uint8(1))
	f.Add([]byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, first uint8) {
		if len(data) > 3*fileBytes {
			data = data[:3*fileBytes]
		}
		fsys := storage.NewFaultFS(1)
		const dir = "/cq/T/0"
		if err := storage.MkdirAllDurable(fsys, dir); err != nil {
			t.Fatal(err)
		}
		for i := 0; i*fileBytes < len(data) || (i == 0 && len(data) == 0 && first > 0); i++ {
			chunk := make([]byte, fileBytes)
			copy(chunk, data[min(i*fileBytes, len(data)):])
			name := filepath.Join(dir, storage.FileName((int64(first)+int64(i))*fileBytes))
			fl, err := fsys.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fl.WriteAt(chunk, 0); err != nil {
				t.Fatal(err)
			}
			fl.Close()
		}
		cq, err := openConsumeQueue(fsys, dir, "T", 0, units, zap.NewNop())
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		check := func(cq *ConsumeQueue) (lastReal CQUnit, haveReal bool) {
			t.Helper()
			minL, maxL := cq.MinOffset(), cq.MaxOffset()
			if minL > maxL {
				t.Fatalf("min offset %d past max %d", minL, maxL)
			}
			for o := cq.mfq.MinOffset() / CQUnitSize; o < minL; o++ {
				if u, err := cq.unitAt(o); err != nil || !u.IsBlank() {
					t.Fatalf("unit %d before the minimum %d is %+v, %v; want a blank", o, minL, u, err)
				}
			}
			prevEnd := int64(-1)
			for o := minL; o < maxL; o++ {
				u, err := cq.Get(o)
				if err != nil {
					t.Fatalf("unit %d of [%d, %d): %v", o, minL, maxL, err)
				}
				if !u.valid() {
					t.Fatalf("invalid unit %+v at %d kept by recovery", u, o)
				}
				if u.IsBlank() {
					continue
				}
				if u.PhyOffset < prevEnd {
					t.Fatalf("unit %+v at %d goes back before %d", u, o, prevEnd)
				}
				prevEnd, lastReal, haveReal = u.end(), u, true
			}
			want := int64(0)
			if haveReal {
				want = lastReal.end()
			}
			if got := cq.MaxPhysicOffset(); got != want || got < 0 {
				t.Fatalf("max physic offset %d, newest unit %+v ends at %d", got, lastReal, want)
			}
			if minL < maxL {
				b, err := cq.Read(minL, units+1)
				if err != nil {
					t.Fatalf("read at min %d: %v", minL, err)
				}
				if b.Len() < 1 || b.Len() > units || int64(b.Len()) > maxL-minL {
					t.Fatalf("read %d units from [%d, %d)", b.Len(), minL, maxL)
				}
				b.Release()
			}
			return lastReal, haveReal
		}
		lastReal, haveReal := check(cq)
		minL, maxL, maxPhy := cq.MinOffset(), cq.MaxOffset(), cq.MaxPhysicOffset()
		if minL < maxL {
			if u, err := cq.Get(minL); err != nil || u.IsBlank() {
				t.Fatalf("recovered minimum %d holds %+v, %v; want the first real unit", minL, u, err)
			}
		}
		if err := cq.Close(); err != nil {
			t.Fatal(err)
		}
		cq, err = openConsumeQueue(fsys, dir, "T", 0, units, zap.NewNop())
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer cq.Close()
		if cq.MinOffset() != minL || cq.MaxOffset() != maxL || cq.MaxPhysicOffset() != maxPhy {
			t.Fatalf("reopen recovered [%d, %d) phy %d, first open [%d, %d) phy %d",
				cq.MinOffset(), cq.MaxOffset(), cq.MaxPhysicOffset(), minL, maxL, maxPhy)
		}
		check(cq)
		if haveReal {
			if err := cq.TruncateDirty(lastReal.PhyOffset); err != nil {
				t.Fatalf("truncate at the newest unit: %v", err)
			}
			if cq.MaxOffset() >= maxL {
				t.Fatalf("truncate at %d kept max offset %d", lastReal.PhyOffset, cq.MaxOffset())
			}
			check(cq)
		}
		next := CQUnit{PhyOffset: cq.MaxPhysicOffset(), Size: 100, TagsCode: 1}
		off, dup, err := cq.Append(next)
		if err != nil || dup || off != cq.MaxOffset()-1 {
			t.Fatalf("append %+v: offset %d dup %v err %v (max now %d)", next, off, dup, err, cq.MaxOffset())
		}
		check(cq)
	})
}
