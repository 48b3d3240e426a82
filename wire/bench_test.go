package wire

import (
	"fmt"
	"testing"
)

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

// BenchmarkEncodeRegisterBrokerBody encodes a broker's compressed
// registration with 20,000 topics of 8 queues, what a broker does on every
// registration round.
func BenchmarkEncodeRegisterBrokerBody(b *testing.B) {
	table := make(map[string]TopicConfig, 20_000)
	for i := range 20_000 {
		name := fmt.Sprintf("OrderEvents-%06d", i)
		table[name] = TopicConfig{TopicName: name, ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6, TopicFilterType: "SINGLE_TAG"}
	}
	body := &RegisterBrokerBody{TopicConfigSerializeWrapper: TopicConfigSerializeWrapper{TopicConfigTable: table}, FilterServerList: []string{}}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		out, err := EncodeRegisterBrokerBody(body, true)
		if err != nil {
			b.Fatal(err)
		}
		n = len(out)
	}
	b.ReportMetric(float64(n), "bytes/body")
}
