package client

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/raftmq/raftmq/wire"
)

// FuzzDecodeMessages feeds arbitrary bytes to the pull-body decoder: it
// must never panic, never read past the data, and what it returns must be
// consistent with the bytes it consumed. The checked-in corpus under
// testdata/fuzz/FuzzDecodeMessages holds the seeds of a 30 s run.
func FuzzDecodeMessages(f *testing.F) {
	f.Add(encodeStored(f, storedMessage{topic: "T", body: []byte("hello"), props: "TAGS\x01a\x02UNIQ_KEY\x01X\x02"}), true)
	f.Add(encodeStored(f, storedMessage{topic: "V2", body: []byte("b"), v2: true,
		born: netip.MustParseAddrPort("[::1]:1"), store: netip.MustParseAddrPort("[::2]:2")}), true)
	f.Add(encodeStored(f, storedMessage{topic: "Z", body: []byte("zzzzzzzzzzzzzzzzzzzzzzzz"), compress: true}), true)
	f.Add(append(encodeStored(f, storedMessage{topic: "A", body: []byte("1")}), encodeStored(f, storedMessage{topic: "B", body: []byte("2")})...), true)
	f.Add(encodeStored(f, storedMessage{topic: "L", body: JavaLZ4(f, []byte("llllllllllllllllllllllllllllll4")), sysFlag: SysFlagLZ4}), false)
	f.Add(encodeStored(f, storedMessage{topic: "S", body: JavaZstd(f, []byte("ssssssssssssssssssssssssssssstd")), sysFlag: SysFlagZstd}), false)
	f.Fuzz(func(t *testing.T, data []byte, checkCRC bool) {
		// Without the CRC check a mutated compressed body reaches its codec.
		msgs, err := DecodeMessagesWith(data, DecodeOptions{CheckCRC: checkCRC, MaxInflatedSize: 1 << 16})
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

// FuzzInflateBody feeds arbitrary bodies to each codec (the sysFlag's
// compression type): it must never panic nor return more than the limit,
// and what it returns decodes the same again.
func FuzzInflateBody(f *testing.F) {
	body := []byte("inflate me inflate me inflate me")
	f.Add(uint8(1), JavaLZ4(f, body))
	f.Add(uint8(2), JavaZstd(f, body))
	f.Add(uint8(3), zlibBytes(f, body))
	f.Add(uint8(2), zstdEncodeAll(f, make([]byte, 1<<17)))
	f.Add(uint8(1), append(JavaLZ4(f, body), JavaLZ4(f, body)...))
	f.Fuzz(func(t *testing.T, typ uint8, body []byte) {
		const limit = 1 << 16
		flag := wire.SysFlagCompressed | int32(typ&7)<<8
		out, err := inflateBody(body, flag, limit)
		if err != nil {
			return
		}
		if len(out) > limit {
			t.Fatalf("type %d: inflated %d bytes above the limit", typ&7, len(out))
		}
		again, err := inflateBody(body, flag, limit)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("type %d: second decode differs (err %v)", typ&7, err)
		}
	})
}
