// Package exutil holds what every example shares: the common flags and
// creating the example's topic through the admin client. Examples are
// programs, so failures end them with log.Fatal; library code never does.
package exutil

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/client"
)

// Flags are the options every example accepts.
type Flags struct {
	NameServer string        // -n: name server address(es), ';'-separated
	Cluster    string        // -c: cluster the topic is created on
	Topic      string        // -t: topic
	Count      int           // -m: how many to send (counts names what)
	Timeout    time.Duration // -timeout: bound on the whole run
}

// Parse registers the common flags (with the example's default topic and
// count; counts names what -m counts, "messages" for most), parses the
// command line and returns them. An -m below 1 is a usage error: there
// would be nothing to wait for.
func Parse(topic string, count int, counts string) *Flags {
	f := &Flags{}
	flag.StringVar(&f.NameServer, "n", "127.0.0.1:9876", "name server address (raftmq dev listens on 127.0.0.1:9876)")
	flag.StringVar(&f.Cluster, "c", "DefaultCluster", "cluster to create the topic on")
	flag.StringVar(&f.Topic, "t", topic, "topic")
	flag.IntVar(&f.Count, "m", count, counts+" to send")
	flag.DurationVar(&f.Timeout, "timeout", time.Minute, "give up after this long")
	flag.Parse()
	if f.Count < 1 {
		fmt.Fprintf(os.Stderr, "-m must be at least 1, got %d\n", f.Count)
		flag.Usage()
		os.Exit(2)
	}
	return f
}

// RunID tells this run's messages apart from earlier runs' on a dev
// cluster that keeps its data: examples tag what they send with it and
// consume with a group named after it.
func RunID() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

// EnsureTopic creates topic with queues read/write queues on every master
// of the cluster (an update when it exists) and waits until the name
// server routes it, so consumers can start at once.
func EnsureTopic(ctx context.Context, f *Flags, queues int, order bool) error {
	admin, err := client.NewAdmin(client.NameServers(f.NameServer))
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	spec := client.TopicSpec{Topic: f.Topic, ReadQueueNums: queues, WriteQueueNums: queues, Order: order}
	if _, err := admin.CreateTopic(ctx, spec, f.Cluster, ""); err != nil {
		return fmt.Errorf("create topic %s: %w", f.Topic, err)
	}
	for {
		if _, err := admin.TopicRoute(ctx, f.Topic); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s has no route yet: %w", f.Topic, ctx.Err())
		case <-time.After(50 * time.Millisecond): // the broker registers the topic with its next heartbeat
		}
	}
}
