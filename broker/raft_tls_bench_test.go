package broker

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/testutil"
)

// BenchmarkRaftTransportRPC measures one AppendEntries round trip (1 KiB
// entry) over loopback through the plain stream layer and through mutual
// TLS; the consumer answers at once.
func BenchmarkRaftTransportRPC(b *testing.B) {
	ca := testutil.NewTestCA(b, "bench-ca")
	cert := ca.Issue("n0")
	mtls := RaftTLSConfig{CertPath: cert.CertPath, KeyPath: cert.KeyPath, CAPath: ca.CertPath}
	for _, v := range []struct {
		name string
		tls  bool
	}{{"plain", false}, {"mtls", true}} {
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
				s, _, err := newRaftStream(ln, tlsCfg, "broker-a")
				if err != nil {
					b.Fatal(err)
				}
				return s
			}
			trans := raft.NewNetworkTransport(stream(), 2, time.Second, nil)
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
