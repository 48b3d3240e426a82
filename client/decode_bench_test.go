package client

import (
	"net/netip"
	"testing"
)

func BenchmarkDecodeMessages(b *testing.B) {
	one := encodeStored(b, storedMessage{topic: "TopicTest", body: make([]byte, 256),
		props: "TAGS\x01TagA\x02UNIQ_KEY\x017F0000010C9418B4AAC2A1C4F3E80001\x02", store: netip.MustParseAddrPort("127.0.0.1:10911")})
	var body []byte
	for range 32 {
		body = append(body, one...)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeMessages(body); err != nil {
			b.Fatal(err)
		}
	}
}
