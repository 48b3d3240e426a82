package namesrv

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Benchmarks: go test -run '^$' -bench . -benchtime 2s ./namesrv

func benchServer(b *testing.B) (*NameServer, *remoting.Client) {
	b.Helper()
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort = "127.0.0.1", 0
	cfg.KVConfigPath = filepath.Join(b.TempDir(), "kv.json")
	n, err := New(cfg, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	if err := n.Start(); err != nil {
		b.Fatal(err)
	}
	c := remoting.NewClient(remoting.ClientConfig{DefaultTimeout: 5 * time.Second}, zap.NewNop())
	b.Cleanup(func() {
		_ = c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = n.Shutdown(ctx)
	})
	return n, c
}

func manyTopics(n int) wire.TopicConfigSerializeWrapper {
	w := topics(1)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("Topic%04d", i)
		w.TopicConfigTable[name] = tc(name, 8, 8, 6)
	}
	return w
}

func registerReq(b *testing.B, name string, id int64, addr string, w wire.TopicConfigSerializeWrapper) *remoting.RemotingCommand {
	body, err := wire.EncodeRegisterBrokerBody(&wire.RegisterBrokerBody{TopicConfigSerializeWrapper: w}, false)
	if err != nil {
		b.Fatal(err)
	}
	return remoting.NewRequest(remoting.RequestRegisterBroker, &wire.RegisterBrokerRequestHeader{
		BrokerName: name, BrokerAddr: addr, ClusterName: "C", BrokerID: id}, body)
}

// BenchmarkRouteLookupLoopback measures GET_ROUTEINFO_BY_TOPIC round trips
// over a real loopback socket, sequential and with parallel callers.
func BenchmarkRouteLookupLoopback(b *testing.B) {
	n, c := benchServer(b)
	addr := n.Addr().String()
	for i, bn := range []string{"broker-a", "broker-b"} {
		for id := int64(0); id < 3; id++ {
			resp, err := c.InvokeSync(context.Background(), addr, registerReq(b, bn, id, fmt.Sprintf("127.0.0.1:%d", 10911+10*i+int(id)), manyTopics(100)))
			if err != nil || resp.Code != remoting.ResponseSuccess {
				b.Fatalf("register: %v %v", err, resp)
			}
		}
	}
	lookup := func(c *remoting.Client) {
		req := remoting.NewRequest(remoting.RequestGetRouteInfoByTopic, &wire.GetRouteInfoRequestHeader{Topic: "Topic0042"}, nil)
		resp, err := c.InvokeSync(context.Background(), addr, req)
		if err != nil || resp.Code != remoting.ResponseSuccess {
			b.Fatalf("lookup: %v %v", err, resp)
		}
	}
	b.Run("sequential", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			lookup(c)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				lookup(c)
			}
		})
	})
}

// BenchmarkRegisterBroker measures a full 100-topic registration whose data
// version changes every time (worst case: queue data rebuilt).
func BenchmarkRegisterBroker(b *testing.B) {
	n, c := benchServer(b)
	addr := n.Addr().String()
	w := manyTopics(100)
	for i := 0; i < b.N; i++ {
		w.DataVersion.Counter = int64(i + 1)
		resp, err := c.InvokeSync(context.Background(), addr, registerReq(b, "broker-a", 0, "127.0.0.1:10911", w))
		if err != nil || resp.Code != remoting.ResponseSuccess {
			b.Fatalf("register: %v %v", err, resp)
		}
	}
}

// BenchmarkPickupAndEncode measures building and encoding one route in
// process, the name server's share of a lookup.
func BenchmarkPickupAndEncode(b *testing.B) {
	r := NewRouteInfoManager(time.Minute, nil)
	for i, bn := range []string{"broker-a", "broker-b"} {
		for id := int64(0); id < 3; id++ {
			r.RegisterBroker(reg("C", bn, id, fmt.Sprintf("127.0.0.1:%d", 10911+10*i+int(id)), manyTopics(1000)))
		}
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		rd := r.PickupTopicRouteData("Topic0042")
		_ = wire.EncodeTopicRouteData(rd, false)
	}
}
