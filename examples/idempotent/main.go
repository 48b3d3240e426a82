// Command idempotent sends with the idempotent producer: every message
// carries the producer id and a per-queue sequence number, so a retry
// after an unknown outcome (here forced by a tiny per-attempt timeout
// that makes most first attempts give up before the broker answers) is
// stored once. It then reads the topic back and counts copies.
//
//	go run ./examples/idempotent -n 127.0.0.1:9876 -m 50
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/examples/internal/exutil"
)

func main() {
	f := exutil.Parse("ExampleIdempotent", 50, "messages")
	ctx, cancel := context.WithTimeout(context.Background(), f.Timeout)
	defer cancel()
	if err := exutil.EnsureTopic(ctx, f, 4, false); err != nil {
		log.Fatal(err)
	}
	run := exutil.RunID()

	p, err := client.NewProducer(client.NameServers(f.NameServer), client.ProducerGroup("example-idempotent"),
		client.Idempotent(true),
		// Attempts before the last give up after 1 ms: a replicated write
		// takes longer, so the broker usually stores the message and the
		// retry is a duplicate that it must drop.
		client.AttemptTimeout(time.Millisecond), client.RetryTimesWhenSendFailed(3))
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())
	fmt.Printf("producer id %s\n", p.ProducerID())
	for i := range f.Count {
		if _, err := p.SendSync(ctx, client.NewMessage(f.Topic, fmt.Appendf(nil, "payment %d", i)).WithProperty("run", run)); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("sent %d\n", f.Count)

	c, err := client.NewLitePullConsumer(client.NameServers(f.NameServer), client.ConsumerGroup("example-idempotent-"+run),
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
	copies := map[string]int{}
	// Read until every message arrived, then a little longer so that a
	// stored duplicate would show up too.
	var until time.Time // zero until every message arrived
	for until.IsZero() || time.Now().Before(until) {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		msgs, err := c.Poll(pctx)
		pcancel()
		if err != nil && ctx.Err() != nil {
			log.Fatalf("received %d distinct of %d: %v", len(copies), f.Count, err)
		}
		for _, m := range msgs {
			if m.Property("run") == run {
				copies[m.MsgID]++
			}
		}
		if until.IsZero() && len(copies) == f.Count {
			until = time.Now().Add(time.Second)
		}
	}
	dups := 0
	for _, n := range copies {
		dups += n - 1
	}
	fmt.Printf("received %d distinct, %d duplicates\n", len(copies), dups)
	if dups > 0 {
		log.Fatal("duplicates stored")
	}
}
