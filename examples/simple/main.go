// Command simple sends a few tagged messages with SendSync and receives
// them with a clustering push consumer, then exits.
//
//	go run ./examples/simple -n 127.0.0.1:9876 -m 10
package main

import (
	"context"
	"fmt"
	"log"
	"sync"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/examples/internal/exutil"
)

func main() {
	f := exutil.Parse("ExampleSimple", 10, "messages")
	ctx, cancel := context.WithTimeout(context.Background(), f.Timeout)
	defer cancel()
	if err := exutil.EnsureTopic(ctx, f, 4, false); err != nil {
		log.Fatal(err)
	}
	run := exutil.RunID()

	p, err := client.NewProducer(client.NameServers(f.NameServer), client.ProducerGroup("example-simple"))
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())
	for i := range f.Count {
		msg := client.NewMessage(f.Topic, fmt.Appendf(nil, "hello %d", i)).
			WithTags("TagA").
			WithKeys(fmt.Sprintf("%s-%d", run, i)).
			WithProperty("run", run)
		res, err := p.SendSync(ctx, msg)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("sent %d: msgId %s queue %d offset %d\n", i, res.MsgID, res.Queue.QueueID, res.QueueOffset)
	}
	fmt.Printf("sent %d\n", f.Count)

	// A new group per run, from the first offset: it sees every message
	// ever sent to the topic and counts only this run's.
	c, err := client.NewPushConsumer(client.NameServers(f.NameServer), client.ConsumerGroup("example-simple-"+run),
		client.ConsumeFrom(client.ConsumeFromFirstOffset))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Subscribe(f.Topic, "TagA || TagB"); err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]bool{}
	done := make(chan struct{})
	err = c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if m.Property("run") != run || got[m.MsgID] {
				continue
			}
			got[m.MsgID] = true
			fmt.Printf("received %q (tag %s, queue %d, offset %d)\n", m.Body, m.Tags, m.QueueID, m.QueueOffset)
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
		fmt.Printf("received %d\n", f.Count)
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		log.Fatalf("received %d of %d before the timeout", len(got), f.Count)
	}
}
