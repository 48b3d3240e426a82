package client_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
)

// BenchmarkClusterSendSync compares our producer with the official Go
// client (github.com/apache/rocketmq-client-go/v2) on the same real
// in-process 3-node raftmq group (Raft over loopback TCP, fsync'd files):
// 1 KiB bodies, SendSync from 8 goroutines per CPU for both, one topic of
// 8 queues. allocs/op counts the whole process, brokers included; the
// brokers' share is the same for both clients (the client-only share is
// BenchmarkSendSync's, against a broker that discards).
//
//	go test ./client -run '^$' -bench ClusterSendSync -benchtime 20000x
func BenchmarkClusterSendSync(b *testing.B) {
	ec := startE2ECluster(b)
	nsAddr := ec.ns.Addr().String()
	ctx := context.Background()
	admin, err := client.NewAdmin(client.NameServers(nsAddr))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: "CB", ReadQueueNums: 8, WriteQueueNums: 8}, "DefaultCluster", ""); err != nil {
		b.Fatal(err)
	}
	testutil.WaitFor(b, 10*time.Second, "route of CB", func() bool { _, err := admin.TopicRoute(ctx, "CB"); return err == nil })
	body := bytes.Repeat([]byte("x"), 1024)
	const parallelism = 8

	b.Run("raftmq", func(b *testing.B) {
		p, err := client.NewProducer(client.NameServers(nsAddr))
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Start(); err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		if _, err := p.SendSync(ctx, client.NewMessage("CB", body)); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.SetParallelism(parallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := p.SendSync(ctx, client.NewMessage("CB", body)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("official", func(b *testing.B) {
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
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}
