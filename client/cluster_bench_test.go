package client_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
)

// BenchmarkClusterSendSync compares our producer, plain and with
// AutoBatch(64, 256 KiB, 0), with the official Go client
// (github.com/apache/rocketmq-client-go/v2) on the same real in-process
// 3-node raftmq group (Raft over loopback TCP, fsync'd files): 1 KiB
// bodies, SendSync from 8 goroutines per CPU for all, one topic of 8
// queues. allocs/op counts the whole process, brokers included; the
// brokers' share is the same for both clients (the client-only share is
// BenchmarkSendSync's, against a broker that discards).
//
//	RAFTMQ_BENCH_ROUNDS=5 go test ./client -run '^$' -bench ClusterSendSync -benchtime 15000x
func BenchmarkClusterSendSync(b *testing.B) {
	ec := startE2EDiskCluster(b)
	nsAddr := ec.NamesrvAddr()
	ctx := context.Background()
	admin, err := client.NewAdmin(client.NameServers(nsAddr))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: "CB", ReadQueueNums: 8, WriteQueueNums: 8}, "DefaultCluster", ""); err != nil {
		b.Fatal(err)
	}
	testutil.WaitFor(b, 10*time.Second, "route of CB", func() bool { _, err := admin.TopicRoute(ctx, "CB"); return err == nil })
	body := bytes.Repeat([]byte("x"), 1024)
	const parallelism = 8

	ours := func(opts ...client.ProducerOpt) func(b *testing.B) {
		return func(b *testing.B) {
			p, err := client.NewProducer(append([]client.ProducerOpt{client.NameServers(nsAddr)}, opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer p.Close(context.Background())
			if _, err := p.SendSync(ctx, client.NewMessage("CB", body)); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetParallelism(parallelism)
			b.ResetTimer()
			cpu := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := p.SendSync(ctx, client.NewMessage("CB", body)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportThroughput(b, cpu)
		}
	}
	official := func(b *testing.B) {
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
		if _, err := p.SendSync(ctx, primitive.NewMessage("CB", body)); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.SetParallelism(parallelism)
		b.ResetTimer()
		cpu := processCPU()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				res, err := p.SendSync(ctx, primitive.NewMessage("CB", body))
				if err == nil && res.Status != primitive.SendOK {
					err = fmt.Errorf("send status %d", res.Status)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportThroughput(b, cpu)
	}
	// Warm the group up first (fresh segment files, Raft and connection
	// start-up), or the first client measured pays for it.
	warm, err := client.NewProducer(client.NameServers(nsAddr))
	if err != nil {
		b.Fatal(err)
	}
	if err := warm.Start(ctx); err != nil {
		b.Fatal(err)
	}
	for range 2000 {
		if _, err := warm.SendSync(ctx, client.NewMessage("CB", body)); err != nil {
			b.Fatal(err)
		}
	}
	_ = warm.Close(context.Background())
	// Rounds interleave the clients, each round starting with the next
	// one, so that a change of machine load hits them alike
	// (RAFTMQ_BENCH_ROUNDS, default 1).
	rounds := 1
	if n, err := strconv.Atoi(os.Getenv("RAFTMQ_BENCH_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	variants := []struct {
		name string
		f    func(*testing.B)
	}{
		{"raftmq", ours()},
		{"raftmq-autobatch", ours(client.AutoBatch(64, 256<<10, 0))},
		{"official", official},
	}
	for r := range rounds {
		for j := range variants {
			v := variants[(r+j)%len(variants)]
			b.Run(v.name, v.f)
		}
	}
}

// reportThroughput adds msgs/s and the process CPU per message (clients
// and in-process brokers, µs) since cpu was read.
func reportThroughput(b *testing.B, cpu time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/msg")
}
