// Command requestreply runs a request-reply exchange: a push consumer
// answers each request with Producer.Reply, and a producer sends requests
// with Producer.Request and waits for each reply, then exits.
//
//	go run ./examples/requestreply -n 127.0.0.1:9876 -m 10
package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/examples/internal/exutil"
)

func main() {
	f := exutil.Parse("ExampleRequestReply", 10, "messages")
	ctx, cancel := context.WithTimeout(context.Background(), f.Timeout)
	defer cancel()
	if err := exutil.EnsureTopic(ctx, f, 4, false); err != nil {
		log.Fatal(err)
	}
	run := exutil.RunID()

	// The replier: a push consumer whose listener answers through a
	// producer. Requests of earlier runs (still in the topic for a group
	// that starts from the first offset) are skipped.
	replier, err := client.NewProducer(client.NameServers(f.NameServer), client.ProducerGroup("example-replier"))
	if err != nil {
		log.Fatal(err)
	}
	if err := replier.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer replier.Close(context.Background())
	c, err := client.NewPushConsumer(client.NameServers(f.NameServer), client.ConsumerGroup("example-replier-"+run),
		client.ConsumeFrom(client.ConsumeFromFirstOffset))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Subscribe(f.Topic, "*"); err != nil {
		log.Fatal(err)
	}
	// Replies are sent under the run's context, not the listener's, which
	// the consumer's Close cancels: the requester has its reply as soon as
	// the broker pushes it, before the broker stores it and answers
	// Reply, so the last Reply is often still waiting when the run ends.
	err = c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			if m.Property("run") != run {
				continue
			}
			if _, err := replier.Reply(ctx, m, []byte(strings.ToUpper(string(m.Body)))); err != nil {
				log.Printf("reply: %v", err)
				return client.ConsumeRetryLater
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

	// The requester.
	p, err := client.NewProducer(client.NameServers(f.NameServer), client.ProducerGroup("example-requester"))
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())
	for i := range f.Count {
		start := time.Now()
		req := client.NewMessage(f.Topic, fmt.Appendf(nil, "request %d", i)).WithProperty("run", run)
		reply, err := p.Request(ctx, req, 10*time.Second)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%q -> %q in %v\n", req.Body, reply.Body, time.Since(start).Round(time.Microsecond))
	}
	fmt.Printf("replied %d\n", f.Count)
	// Close the replier's consumer while the requester is still connected:
	// Close waits for the listener calls in progress, and a Reply in one of
	// them needs the requester to take its push.
	if err := c.Close(ctx); err != nil {
		log.Fatal(err)
	}
}
