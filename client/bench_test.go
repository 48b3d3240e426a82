package client

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/raftmq/raftmq/remoting"
)

// The send benchmarks run our producer and the official Go client against
// the same in-process fake broker and real name server, 1 KiB bodies, 32
// concurrent senders per CPU. The broker side (same process) is identical
// for both, so the difference in ns/op and allocs/op is the clients'.
//
//	go test ./client -run XXX -bench 'SendSync' -benchtime 20000x

// benchSetup starts a name server and one fake broker serving topic
// Bench with 8 queues; the broker counts requests without keeping them.
func benchSetup(b *testing.B) string {
	b.Helper()
	ns := startNameServer(b)
	a := startFakeBroker(b, "broker-a", &requestLog{discard: true})
	a.register(b, ns, 0, 1, map[string]int{"Bench": 8})
	return ns.Addr().String()
}

// benchProducer starts a producer on the name server at nsAddr, warms its
// route to topic "Bench" with one body-sized send, and closes it when b
// ends.
func benchProducer(b *testing.B, nsAddr string, body []byte, opts ...ProducerOpt) *Producer {
	b.Helper()
	p, err := NewProducer(append([]ProducerOpt{NameServers(nsAddr)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close(context.Background()) })
	if _, err := p.SendSync(context.Background(), NewMessage("Bench", body)); err != nil {
		b.Fatal(err)
	}
	return p
}

func BenchmarkSendSync(b *testing.B) {
	body := bytes.Repeat([]byte("x"), 1024)
	variants := []struct {
		name string
		opts []ProducerOpt
	}{
		{"raftmq-ROCKETMQ", []ProducerOpt{SendHeaderSerialization(remoting.SerializeRocketMQ)}},
		{"raftmq-JSON", []ProducerOpt{SendHeaderSerialization(remoting.SerializeJSON)}},
		// Requests per message show how much AutoBatch merges with a
		// broker that answers at once (the cluster benchmark has real
		// round trips).
		{"raftmq-autobatch", []ProducerOpt{AutoBatch(64, 256<<10, 0)}},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			ns := startNameServer(b)
			log := &requestLog{discard: true}
			a := startFakeBroker(b, "broker-a", log)
			a.register(b, ns, 0, 1, map[string]int{"Bench": 8})
			p := benchProducer(b, ns.Addr().String(), body, v.opts...)
			b.ReportAllocs()
			b.SetParallelism(32)
			b.ResetTimer()
			before := log.requests()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := p.SendSync(context.Background(), NewMessage("Bench", body)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(log.requests()-before)/float64(b.N), "reqs/msg")
		})
	}
	b.Run("official", func(b *testing.B) {
		nsAddr := benchSetup(b)
		p, err := producer.NewDefaultProducer(
			producer.WithNsResolver(primitive.NewPassthroughResolver([]string{nsAddr})),
			producer.WithGroupName("bench"), producer.WithRetry(2), producer.WithSendMsgTimeout(3*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = p.Shutdown() }()
		if _, err := p.SendSync(context.Background(), primitive.NewMessage("Bench", body)); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.SetParallelism(32)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := p.SendSync(context.Background(), primitive.NewMessage("Bench", body)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkEncodeSend measures the client-side work of one send without
// the network: validation, UNIQ_KEY, properties, header and frame encoding.
func BenchmarkEncodeSend(b *testing.B) {
	p, err := NewProducer(NameServers("127.0.0.1:9876"))
	if err != nil {
		b.Fatal(err)
	}
	msg := NewMessage("Bench", bytes.Repeat([]byte("x"), 1024)).WithTags("TagA").WithKeys("k1")
	mq := MessageQueue{Topic: "Bench", BrokerName: "broker-a", QueueID: 3}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r, err := p.prepare(msg)
		if err != nil {
			b.Fatal(err)
		}
		req, err := p.encode(r, mq, nil, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := remoting.EncodeFrame(req); err != nil {
			b.Fatal(err)
		}
	}
}
