// Command broadcast runs two consumers of one group in broadcasting mode
// (as two instances of a service would) and shows that each gets every
// message. Broadcasting offsets live in local files under -offsets.
//
//	go run ./examples/broadcast -n 127.0.0.1:9876 -m 10
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sync"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/examples/internal/exutil"
)

func main() {
	offsets := flag.String("offsets", "", "directory for the broadcasting offset files (default: a temporary directory)")
	f := exutil.Parse("ExampleBroadcast", 10, "messages")
	ctx, cancel := context.WithTimeout(context.Background(), f.Timeout)
	defer cancel()
	if err := exutil.EnsureTopic(ctx, f, 4, false); err != nil {
		log.Fatal(err)
	}
	run := exutil.RunID()
	dir := *offsets
	if dir == "" {
		tmp, err := os.MkdirTemp("", "raftmq-broadcast-")
		if err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}

	// Two instances of one group; InstanceName keeps their client ids
	// (and offset files) apart within one process.
	var (
		mu  sync.Mutex
		got = map[string]map[string]bool{} // instance → msgIds
		wg  sync.WaitGroup
	)
	for _, name := range []string{"instance-a", "instance-b"} {
		got[name] = map[string]bool{}
		c, err := client.NewPushConsumer(client.NameServers(f.NameServer), client.InstanceName(name),
			client.ConsumerGroup("example-broadcast-"+run), client.ConsumerModel(client.Broadcasting),
			client.OffsetDir(dir), client.ConsumeFrom(client.ConsumeFromFirstOffset))
		if err != nil {
			log.Fatal(err)
		}
		if err := c.Subscribe(f.Topic, "*"); err != nil {
			log.Fatal(err)
		}
		wg.Add(1)
		err = c.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				if m.Property("run") != run || got[name][m.MsgID] {
					continue
				}
				got[name][m.MsgID] = true
				if len(got[name]) == f.Count {
					fmt.Printf("%s received %d\n", name, f.Count)
					wg.Done()
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
	}

	p, err := client.NewProducer(client.NameServers(f.NameServer), client.ProducerGroup("example-broadcast"))
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())
	for i := range f.Count {
		if _, err := p.SendSync(ctx, client.NewMessage(f.Topic, fmt.Appendf(nil, "notice %d", i)).WithProperty("run", run)); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("sent %d\n", f.Count)

	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	select {
	case <-all:
		fmt.Printf("every instance received all %d\n", f.Count)
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		log.Fatalf("timed out: instance-a has %d, instance-b %d of %d", len(got["instance-a"]), len(got["instance-b"]), f.Count)
	}
}
