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
