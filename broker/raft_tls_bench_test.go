package broker

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
)

// BenchmarkRaftTransportRPC measures one AppendEntries round trip (1 KiB
// entry) over loopback TCP through the plain NetworkTransport, through
// memberTransport (its membership check and extra goroutine hop), and
// through memberTransport on mutual TLS; the consumer answers at once.
func BenchmarkRaftTransportRPC(b *testing.B) {
	ca := testutil.NewTestCA(b, "bench-ca")
	cert := ca.Issue("n0")
	mtls := RaftTLSConfig{CertPath: cert.CertPath, KeyPath: cert.KeyPath, CAPath: ca.CertPath}
	for _, v := range []struct {
		name          string
		filtered, tls bool
	}{{"plain", false, false}, {"member-filter", true, false}, {"mtls+member-filter", true, true}} {
		filtered := v.filtered
		var tlsCfg RaftTLSConfig
		if v.tls {
			tlsCfg = mtls
		}
		b.Run(v.name, func(b *testing.B) {
			stream := func() raft.StreamLayer {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				s, err := newRaftStream(ln, tlsCfg)
				if err != nil {
					b.Fatal(err)
				}
				return s
			}
			nt := raft.NewNetworkTransport(stream(), 2, time.Second, nil)
			var trans raft.Transport = nt
			if filtered {
				mt := newMemberTransport(nt, zap.NewNop())
				conf := raft.Configuration{Servers: []raft.Server{{ID: "n0", Address: "127.0.0.1:1"}, {ID: "n1", Address: "127.0.0.1:2"}}}
				f := func() raft.Configuration { return conf }
				mt.members.Store(&f)
				trans = mt
			}
			defer func() { _ = closeTransport(trans) }()
			done := make(chan struct{})
			defer close(done)
			go func() {
				for {
					select {
					case rpc := <-trans.Consumer():
						rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
					case <-done:
						return
					}
				}
			}()
			client := raft.NewNetworkTransport(stream(), 2, time.Second, nil)
			defer func() { _ = closeTransport(client) }()
			req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax,
				ID: []byte("n1"), Addr: []byte("127.0.0.1:2")}, Term: 1, PrevLogEntry: 1, LeaderCommitIndex: 1,
				Entries: []*raft.Log{{Index: 2, Term: 1, Data: make([]byte, 1024)}}}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var resp raft.AppendEntriesResponse
				if err := client.AppendEntries("n0", trans.LocalAddr(), req, &resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
