// Command ordered sends the steps of a few orders so that each order's
// steps land on one queue (HashSelector over the sharding key) and
// consumes them with an orderly listener, which sees each order's steps in
// the order they were sent.
//
//	go run ./examples/ordered -n 127.0.0.1:9876 -m 5
package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/examples/internal/exutil"
)

var steps = []string{"created", "paid", "shipped", "delivered"}

func main() {
	f := exutil.Parse("ExampleOrdered", 5, "orders (of 4 steps each)")
	ctx, cancel := context.WithTimeout(context.Background(), f.Timeout)
	defer cancel()
	if err := exutil.EnsureTopic(ctx, f, 4, false); err != nil {
		log.Fatal(err)
	}
	run := exutil.RunID()

	p, err := client.NewProducer(client.NameServers(f.NameServer), client.ProducerGroup("example-ordered"))
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())
	// Steps interleave across orders, as they would in a real system.
	for _, step := range steps {
		for o := range f.Count {
			order := fmt.Sprintf("order-%d", o)
			msg := client.NewMessage(f.Topic, []byte(order+" "+step)).WithKeys(order).WithProperty("run", run)
			msg.ShardingKey = order
			res, err := p.SendWithSelector(ctx, msg, client.HashSelector())
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("sent %s %s to queue %d\n", order, step, res.Queue.QueueID)
		}
	}
	total := f.Count * len(steps)
	fmt.Printf("sent %d\n", total)

	c, err := client.NewPushConsumer(client.NameServers(f.NameServer), client.ConsumerGroup("example-ordered-"+run),
		client.ConsumeFrom(client.ConsumeFromFirstOffset))
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Subscribe(f.Topic, "*"); err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	next := map[string]int{} // order → index of the step expected next
	received, outOfOrder := 0, 0
	done := make(chan struct{})
	err = c.RegisterOrderlyListener(func(_ context.Context, oc *client.ConsumeOrderlyContext, msgs []*client.MessageExt) client.OrderlyResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			if m.Property("run") != run {
				continue
			}
			order, step, _ := strings.Cut(string(m.Body), " ")
			if next[order] == len(steps) {
				continue // a redelivery after the last step (at-least-once)
			}
			if steps[next[order]] != step {
				outOfOrder++
				fmt.Printf("OUT OF ORDER: %s %s, expected %s\n", order, step, steps[next[order]])
			} else {
				next[order]++
			}
			received++
			fmt.Printf("received %s %s (queue %d)\n", order, step, oc.Queue.QueueID)
			if received == total {
				close(done)
			}
		}
		return client.OrderlySuccess
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
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		log.Fatalf("received %d of %d before the timeout", received, total)
	}
	mu.Lock()
	defer mu.Unlock()
	if outOfOrder > 0 {
		log.Fatalf("%d steps out of order", outOfOrder)
	}
	fmt.Printf("received %d in order\n", total)
}
