package client

import (
	"net/netip"
	"testing"

	"github.com/raftmq/raftmq/wire"
)

// FuzzDecodeMessages feeds arbitrary bytes to the pull-body decoder: it
// must never panic, never read past the data, and what it returns must be
// consistent with the bytes it consumed. The checked-in corpus under
// testdata/fuzz/FuzzDecodeMessages holds the seeds of a 30 s run.
func FuzzDecodeMessages(f *testing.F) {
	f.Add(encodeStored(f, storedMessage{topic: "T", body: []byte("hello"), props: "TAGS\x01a\x02UNIQ_KEY\x01X\x02"}))
	f.Add(encodeStored(f, storedMessage{topic: "V2", body: []byte("b"), v2: true,
		born: netip.MustParseAddrPort("[::1]:1"), store: netip.MustParseAddrPort("[::2]:2")}))
	f.Add(encodeStored(f, storedMessage{topic: "Z", body: []byte("zzzzzzzzzzzzzzzzzzzzzzzz"), compress: true}))
	f.Add(append(encodeStored(f, storedMessage{topic: "A", body: []byte("1")}), encodeStored(f, storedMessage{topic: "B", body: []byte("2")})...))
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, err := DecodeMessagesWith(data, DecodeOptions{CheckCRC: true, MaxInflatedSize: 1 << 16})
		total := 0
		for _, m := range msgs {
			if m.StoreSize <= 0 {
				t.Fatalf("decoded a message with TOTALSIZE %d", m.StoreSize)
			}
			total += int(m.StoreSize)
			if m.MsgID == "" || m.OffsetMsgID == "" {
				t.Fatalf("message without ids: %+v", m)
			}
			if len(m.Body) > 1<<16 {
				t.Fatalf("inflated body of %d bytes above the limit", len(m.Body))
			}
		}
		if total > len(data) {
			t.Fatalf("messages claim %d bytes of %d", total, len(data))
		}
		if err == nil && total != len(data) {
			// Only a blank-magic filler may end the data early.
			if len(data)-total < 8 {
				t.Fatalf("clean decode left %d trailing bytes", len(data)-total)
			}
		}
		// Decoding the batch layout must not panic either.
		_, _ = wire.DecodeBatch(data)
	})
}
