// Command batch sends messages in batches (one SEND_BATCH_MESSAGE request
// each; a batch lands on one queue) and reads them back with a lite pull
// consumer.
//
//	go run ./examples/batch -n 127.0.0.1:9876 -m 30 -size 10
package main

import (
	"context"
	"flag"
	"fmt"
	"log"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/examples/internal/exutil"
)

func main() {
	size := flag.Int("size", 10, "messages per batch")
	f := exutil.Parse("ExampleBatch", 30, "messages")
	ctx, cancel := context.WithTimeout(context.Background(), f.Timeout)
	defer cancel()
	if err := exutil.EnsureTopic(ctx, f, 4, false); err != nil {
		log.Fatal(err)
	}
	run := exutil.RunID()

	p, err := client.NewProducer(client.NameServers(f.NameServer), client.ProducerGroup("example-batch"))
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())
	for start := 0; start < f.Count; start += *size {
		var batch []*client.Message
		for i := start; i < min(start+*size, f.Count); i++ {
			batch = append(batch, client.NewMessage(f.Topic, fmt.Appendf(nil, "item %d", i)).
				WithKeys(fmt.Sprintf("%s-%d", run, i)).WithProperty("run", run))
		}
		res, err := p.SendBatch(ctx, batch)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("sent a batch of %d to queue %d at offset %d\n", len(batch), res.Queue.QueueID, res.QueueOffset)
	}
	fmt.Printf("sent %d\n", f.Count)

	// A lite pull consumer subscribed to the topic: Poll returns what the
	// background pulls fetched.
	c, err := client.NewLitePullConsumer(client.NameServers(f.NameServer), client.ConsumerGroup("example-batch-"+run),
		client.ConsumeFrom(client.ConsumeFromFirstOffset))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Subscribe(f.Topic, "*"); err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer c.Close(context.Background())
	got := map[string]bool{}
	for len(got) < f.Count {
		msgs, err := c.Poll(ctx)
		if err != nil {
			log.Fatalf("received %d of %d: %v", len(got), f.Count, err)
		}
		for _, m := range msgs {
			if m.Property("run") == run {
				got[m.MsgID] = true
			}
		}
	}
	if err := c.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("received %d\n", len(got))
}
