package ha

import (
	"bytes"
	"testing"
)

// FuzzDecodeNodeMeta feeds arbitrary bytes to the decoder of gossiped
// metadata, which any pool member (or anyone who can reach the gossip port
// when no label/encryption is set) controls. It must never panic, and
// whatever it accepts must survive a round trip: re-encoding succeeds
// within the size limit, decodes to the same value, and for layout v1
// reproduces the input exactly (the decoder accepts canonical bytes only).
func FuzzDecodeNodeMeta(f *testing.F) {
	for _, m := range []NodeMeta{sampleBrokerMeta(), {Kind: KindNameServer, RemotingAddr: "127.0.0.1:9876", BrokerID: -1}} {
		b, err := m.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeNodeMeta(b)
		if err != nil {
			return
		}
		enc, err := m.Encode()
		if err != nil {
			t.Fatalf("decoded %+v does not re-encode: %v", m, err)
		}
		again, err := DecodeNodeMeta(enc)
		if err != nil || again != m {
			t.Fatalf("re-decode: %+v, %v; want %+v", again, err, m)
		}
		if b[0] == metaVersion && !bytes.Equal(enc, b) {
			t.Fatalf("v1 input %x re-encodes as %x", b, enc)
		}
	})
}
