package wire

import "testing"

func BenchmarkAppendMessage(b *testing.B) {
	m := sampleMessage()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = AppendMessage(buf[:0], m)
	}
}

func BenchmarkDecodeMessage(b *testing.B) {
	enc, _ := AppendMessage(nil, sampleMessage())
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := DecodeMessage(enc, false); err != nil {
			b.Fatal(err)
		}
	}
}
