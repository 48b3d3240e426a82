package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/wire"
)

// sampleMessage is a stored message with every field set.
func sampleMessage() *Message {
	return &Message{
		Topic:                     "TopicTest",
		QueueID:                   3,
		Flag:                      7,
		Body:                      []byte("hello raftmq"),
		Properties:                map[string]string{"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "C0A8000100002A9F0000000000000001", "WAIT": "true"},
		SysFlag:                   wire.SysFlagMultiTags,
		BornTimestamp:             1700000000123,
		BornHost:                  netip.MustParseAddrPort("10.1.2.3:54321"),
		StoreHost:                 netip.MustParseAddrPort("127.0.0.1:10911"),
		ReconsumeTimes:            2,
		PreparedTransactionOffset: 99,
		QueueOffset:               42,
		PhysicalOffset:            123456789,
		StoreTimestamp:            1700000000456,
	}
}

// decodeUnchecked decodes b with its entry CRC resealed first.
func decodeUnchecked(b []byte) (*Message, int, error) {
	c := bytes.Clone(b)
	wire.SealCRC(c)
	return wire.DecodeMessage(c, false)
}

func TestCheckAndDecode(t *testing.T) {
	m := sampleMessage()
	b, _ := wire.AppendMessage(nil, m)
	req, n, err := CheckAndDecode(b)
	if err != nil || n != len(b) {
		t.Fatalf("n %d err %v", n, err)
	}
	if req.Topic != m.Topic || req.QueueID != m.QueueID || req.CommitLogOffset != m.PhysicalOffset ||
		req.MsgSize != int32(len(b)) || req.TagsCode != wire.TagsHashCode("TagA") || req.StoreTimestamp != m.StoreTimestamp ||
		req.ConsumeQueueOffset != m.QueueOffset || req.Keys != "k1 k2" || req.UniqKey != m.UniqKey() ||
		req.SysFlag != m.SysFlag || req.BornTimestamp != m.BornTimestamp || req.PreparedTransactionOffset != 99 || req.Blank {
		t.Fatalf("dispatch request %+v", req)
	}
	// Blank filler.
	blank := make([]byte, 64)
	binary.BigEndian.PutUint32(blank, 64)
	binary.BigEndian.PutUint32(blank[4:], wire.MagicBlank)
	req, n, err = CheckAndDecode(blank)
	if err != nil || !req.Blank || n != 64 {
		t.Fatalf("blank: %+v %d %v", req, n, err)
	}
	// Zeros are the end of data.
	if _, _, err := CheckAndDecode(make([]byte, 200)); !errors.Is(err, ErrEndOfData) {
		t.Fatalf("zeros: %v", err)
	}
	// Any flipped bit fails the CRC (in the lengths, the sizes) except in
	// QUEUEOFFSET, which the CRC leaves out on purpose (see wire.EntryCRC).
	for pos := range b {
		if pos >= wire.OffQueueOffset && pos < wire.OffQueueOffset+8 {
			continue
		}
		c := bytes.Clone(b)
		c[pos] ^= 0x10
		if _, _, err := CheckAndDecode(c); !errors.Is(err, ErrCorruptMessage) {
			t.Errorf("flip at %d: %v", pos, err)
		}
		if _, _, err := wire.DecodeMessage(c, false); !errors.Is(err, ErrCorruptMessage) {
			t.Errorf("decode flip at %d: %v", pos, err)
		}
	}
	// Truncated input.
	if _, _, err := CheckAndDecode(b[:len(b)-1]); !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("truncated: %v", err)
	}
}

// FuzzCheckAndDecode: the dispatch decoder accepts whatever the full
// decoder accepts, with the same size.
func FuzzCheckAndDecode(f *testing.F) {
	m := sampleMessage()
	b, _ := wire.AppendMessage(nil, m)
	f.Add(b)
	m.Topic = strings.Repeat("v", 200)
	m.StoreHost = netip.MustParseAddrPort("[::1]:1")
	b2, _ := wire.AppendMessage(nil, m)
	f.Add(b2)
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, n, err := wire.DecodeMessage(data, false)
		req, n2, err2 := CheckAndDecode(data)
		if err == nil && (err2 != nil || req.Blank || n != n2) {
			t.Fatalf("decoders disagree: %v vs %v (blank %v, sizes %d %d)", err, err2, req.Blank, n, n2)
		}
		if err2 != nil && !errors.Is(err2, ErrCorruptMessage) && !errors.Is(err2, ErrEndOfData) {
			t.Fatalf("unexpected error class: %v", err2)
		}
	})
}

// propertyCases are properties strings in and out of stored order.
var propertyCases = []string{
	"",
	"UNIQ_KEY\x017F0000010C9418B4AAC2A1C4F3E80001\x02",
	"UNIQ_KEY\x01u\x02WAIT\x01true\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02",
	"KEYS\x01k\x02TAGS\x01t\x02UNIQ_KEY\x01u\x02",
	"KEYS\x01k\x02TAGS\x01t\x02UNIQ_KEY\x01u",  // no trailing separator
	"A\x011\x02A\x012\x02",                     // duplicate: the last wins
	"B\x011\x02A\x01x\x02B\x012\x02A\x01y\x02", // unsorted duplicates
	"A\x01\x02\x01v\x02",                       // empty value, empty name
	"noSeparator\x02A\x011\x02\x02\x02",        // malformed and empty pairs
	"__CRC32#\x010000000001\x02A\x011\x02",     // a client's CRC property is dropped
	"A\x011\x02__CRC32#\x011\x02",              // also when sorted
	"A\x01a\x01b\x02",                          // \x01 in the value
	"\x02",                                     // one empty pair
	"DELAY\x013\x02",
	strings.Repeat("k\x01v\x02", 3) + "j\x01w\x02", // more duplicates than pairs
}

// TestCommitLogPutMessagesEncodedProperties: the single-node append path
// stores a message carrying EncodedProperties byte for byte like the same
// message carrying the map (two commit logs fed the same batch).
func TestCommitLogPutMessagesEncodedProperties(t *testing.T) {
	byMap := newTestCommitLog(t, OSFS(), t.TempDir(), 1<<20, 64<<10)
	byEnc := newTestCommitLog(t, OSFS(), t.TempDir(), 1<<20, 64<<10)
	var mapBatch, encBatch []*Message
	for _, s := range propertyCases {
		m := sampleMessage()
		m.Properties = wire.ParseProperties(s)
		mapBatch = append(mapBatch, m)
		e := sampleMessage()
		e.Properties, e.EncodedProperties = nil, wire.CanonicalProperties(s)
		encBatch = append(encBatch, e)
	}
	want, _, err := byMap.PutMessages(mapBatch)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := byEnc.PutMessages(encBatch)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i].PhysicalOffset != want[i].PhysicalOffset || got[i].Size != want[i].Size {
			t.Fatalf("%q: appended at %d (%d bytes), map path %d (%d bytes)", propertyCases[i], got[i].PhysicalOffset, got[i].Size, want[i].PhysicalOffset, want[i].Size)
		}
		a, err := byMap.ReadMessage(want[i].PhysicalOffset)
		if err != nil {
			t.Fatal(err)
		}
		b, err := byEnc.ReadMessage(got[i].PhysicalOffset)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.B, b.B) {
			t.Fatalf("%q: stored bytes differ\n got %q\nwant %q", propertyCases[i], b.B, a.B)
		}
		a.Release()
		b.Release()
	}
}
