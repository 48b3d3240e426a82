// Command timer sends messages due at chosen times (timer messages:
// WithDeliverAt and WithDeliverAfter) and receives each once it is due,
// printing how late it arrived, then exits.
//
//	go run ./examples/timer -n 127.0.0.1:9876 -m 5
package main

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/examples/internal/exutil"
)

func main() {
	f := exutil.Parse("ExampleTimer", 5, "messages")
	ctx, cancel := context.WithTimeout(context.Background(), f.Timeout)
	defer cancel()
	if err := exutil.EnsureTopic(ctx, f, 4, false); err != nil {
		log.Fatal(err)
	}
	run := exutil.RunID()

	p, err := client.NewProducer(client.NameServers(f.NameServer), client.ProducerGroup("example-timer"))
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())
	due := map[string]time.Time{}
	start := time.Now()
	for i := range f.Count {
		body := fmt.Sprintf("timer %d", i)
		msg := client.NewMessage(f.Topic, []byte(body)).WithProperty("run", run)
		// Even messages at a time, odd ones after a delay: 1 s, 1.5 s, 2 s, …
		at := start.Add(time.Second + time.Duration(i)*500*time.Millisecond)
		if i%2 == 0 {
			msg.WithDeliverAt(at)
		} else {
			msg.WithDeliverAfter(time.Until(at))
		}
		if _, err := p.SendSync(ctx, msg); err != nil {
			log.Fatal(err)
		}
		due[body] = at
	}
	fmt.Printf("sent %d\n", f.Count)

	c, err := client.NewPushConsumer(client.NameServers(f.NameServer), client.ConsumerGroup("example-timer-"+run),
		client.ConsumeFrom(client.ConsumeFromFirstOffset))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Subscribe(f.Topic, "*"); err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]bool{}
	early := 0
	done := make(chan struct{})
	err = c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			body := string(m.Body)
			if m.Property("run") != run || got[body] {
				continue
			}
			got[body] = true
			// TIMER_OUT_MS is the due time the broker kept for the message.
			out, _ := strconv.ParseInt(m.Property("TIMER_OUT_MS"), 10, 64)
			if now.Before(time.UnixMilli(out)) {
				early++
			}
			fmt.Printf("received %q %v after its due time\n", body, now.Sub(due[body]).Round(time.Millisecond))
			if len(got) == f.Count {
				close(done)
			}
		}
		return client.ConsumeSuccess
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())
	select {
	case <-done:
		fmt.Printf("received %d, %d before their time\n", f.Count, early)
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		log.Fatalf("received %d of %d before the timeout", len(got), f.Count)
	}
}
