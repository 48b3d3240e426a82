package store

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/wire"
)

// TestPatchStoredBatchAcceptsEveryEncoding: the Raft log store patches
// every Messages entry a leader or this member stores, so every layout the
// encoder writes — V1 and V2 (a topic over 127 bytes), IPv4 and IPv6
// hosts, an empty body, no user properties — must patch, each message
// reading back with its physical offset and store time.
func TestPatchStoredBatchAcceptsEveryEncoding(t *testing.T) {
	v6 := netip.MustParseAddrPort("[fe80::1]:10911")
	var msgs []*Message
	for _, topic := range []string{"T", strings.Repeat("v", wire.MaxV1TopicLen), strings.Repeat("w", wire.MaxV1TopicLen+1)} {
		for _, born := range []netip.AddrPort{netip.MustParseAddrPort("10.1.2.3:1"), v6} {
			for _, store := range []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:10911"), v6} {
				m := sampleMessage()
				m.Topic, m.BornHost, m.StoreHost = topic, born, store
				msgs = append(msgs, m)
			}
		}
	}
	bare := sampleMessage()
	bare.Body, bare.Properties = nil, nil
	msgs = append(msgs, bare)
	var batch []byte
	var offs []int
	for _, m := range msgs {
		offs = append(offs, len(batch))
		var err error
		if batch, err = wire.AppendMessage(batch, m); err != nil {
			t.Fatal(err)
		}
	}
	const base, ts = 1 << 30, 1700000000999
	if err := PatchStoredBatch(batch, base, ts); err != nil {
		t.Fatalf("legitimate batch refused: %v", err)
	}
	for i, off := range offs {
		m, _, err := wire.DecodeMessage(batch[off:], true)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if m.PhysicalOffset != base+int64(off) || m.StoreTimestamp != ts || m.Topic != msgs[i].Topic || m.BornHost != msgs[i].BornHost {
			t.Fatalf("message %d patched to %+v", i, m)
		}
	}
}
