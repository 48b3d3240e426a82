package client

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/wire"
)

// The consume benchmarks preload b.N 1 KiB messages over 4 queues of the
// in-process fake queue broker and time a push consumer (ours, then the
// official Go client's) from Start until the listener has seen them all.
// The broker side is identical for both.
//
//	go test ./client -run XXX -bench 'PushConsume' -benchtime 20000x

func consumeBenchSetup(b *testing.B) (nsAddr string) {
	b.Helper()
	ns := startNameServer(b)
	qb := startQBroker(b, "broker-a")
	qb.register(b, ns, 0, map[string]int{"Bench": 4, wire.RetryTopic("BG"): 1, "%RETRY%BGO": 1})
	body := bytes.Repeat([]byte("x"), 1024)
	for i := range b.N {
		qb.putAt("Bench", i%4, body, nil, 0, 0)
	}
	return ns.Addr().String()
}

func BenchmarkPushConsume(b *testing.B) {
	b.Run("raftmq", func(b *testing.B) {
		nsAddr := consumeBenchSetup(b)
		var n atomic.Int64
		done := make(chan struct{})
		c, err := NewPushConsumer(NameServers(nsAddr), ConsumerGroup("BG"), ConsumeFrom(ConsumeFromFirstOffset), WithLogger(zap.NewNop()))
		if err != nil {
			b.Fatal(err)
		}
		_ = c.Subscribe("Bench", "*")
		_ = c.RegisterConcurrentListener(func(_ context.Context, _ *ConsumeConcurrentlyContext, msgs []*MessageExt) ConsumeResult {
			if n.Add(int64(len(msgs))) == int64(b.N) {
				close(done)
			}
			return ConsumeSuccess
		})
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		if err := c.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		<-done
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		b.StopTimer()
		_ = c.Close(context.Background())
	})
	b.Run("official", func(b *testing.B) {
		nsAddr := consumeBenchSetup(b)
		var n atomic.Int64
		done := make(chan struct{})
		c, err := consumer.NewPushConsumer(consumer.WithGroupName("BGO"), consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{nsAddr})),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Subscribe("Bench", consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			if n.Add(int64(len(msgs))) == int64(b.N) {
				close(done)
			}
			return consumer.ConsumeSuccess, nil
		}); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		start := time.Now()
		if err := c.Start(); err != nil {
			b.Fatal(err)
		}
		<-done
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		b.StopTimer()
		_ = c.Shutdown()
	})
}
