// Command transaction sends transactional messages: each one is stored as
// a half message, the local transaction runs (here: even orders commit,
// odd ones roll back), and only the committed ones reach consumers. A
// broker that does not learn the outcome asks the producer group back
// (CheckLocalTransaction), which answers from the same local state.
//
//	go run ./examples/transaction -n 127.0.0.1:9876 -m 10
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/examples/internal/exutil"
)

// orders is the local transaction's state: order id → committed.
type orders struct {
	mu        sync.Mutex
	committed map[string]bool
}

// ExecuteLocalTransaction "books" the order: even ids succeed.
func (o *orders) ExecuteLocalTransaction(_ context.Context, m *client.Message) client.LocalTransactionState {
	id := m.Property("order")
	n, _ := strconv.Atoi(id)
	o.mu.Lock()
	o.committed[id] = n%2 == 0
	o.mu.Unlock()
	return o.state(id)
}

// CheckLocalTransaction answers a broker's check-back from the same state.
func (o *orders) CheckLocalTransaction(_ context.Context, m *client.MessageExt) client.LocalTransactionState {
	return o.state(m.Property("order"))
}

func (o *orders) state(id string) client.LocalTransactionState {
	o.mu.Lock()
	defer o.mu.Unlock()
	ok, known := o.committed[id]
	switch {
	case !known:
		return client.TransactionUnknown
	case ok:
		return client.TransactionCommit
	}
	return client.TransactionRollback
}

func main() {
	f := exutil.Parse("ExampleTransaction", 10, "messages")
	ctx, cancel := context.WithTimeout(context.Background(), f.Timeout)
	defer cancel()
	if err := exutil.EnsureTopic(ctx, f, 4, false); err != nil {
		log.Fatal(err)
	}
	run := exutil.RunID()

	book := &orders{committed: map[string]bool{}}
	p, err := client.NewTransactionProducer(book, client.NameServers(f.NameServer), client.ProducerGroup("example-transaction"))
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())
	commits := 0
	for i := range f.Count {
		msg := client.NewMessage(f.Topic, fmt.Appendf(nil, "order %d", i)).WithProperty("run", run).WithProperty("order", strconv.Itoa(i))
		res, err := p.SendMessageInTransaction(ctx, msg)
		if err != nil {
			log.Fatal(err)
		}
		switch {
		case errors.Is(res.EndErr, client.ErrTransactionOutcomeUnknown):
			log.Printf("order %d: the outcome may not have been recorded (%v); the broker's check-back asks if not", i, res.EndErr)
		case res.EndErr != nil:
			log.Printf("order %d: the broker refused the outcome (%v)", i, res.EndErr)
		}
		if res.State == client.TransactionCommit {
			commits++
		}
	}
	fmt.Printf("sent %d: %d committed, %d rolled back\n", f.Count, commits, f.Count-commits)

	c, err := client.NewLitePullConsumer(client.NameServers(f.NameServer), client.ConsumerGroup("example-transaction-"+run),
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
	rolledBack := 0
	// Read until every commit arrived, then a little longer so that a
	// rolled-back message would show up too.
	var until time.Time
	for until.IsZero() || time.Now().Before(until) {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		msgs, err := c.Poll(pctx)
		pcancel()
		if err != nil && ctx.Err() != nil {
			log.Fatalf("received %d of %d commits: %v", len(got), commits, err)
		}
		for _, m := range msgs {
			if m.Property("run") != run {
				continue
			}
			if n, _ := strconv.Atoi(m.Property("order")); n%2 != 0 {
				rolledBack++
			}
			got[m.Property("order")] = true
		}
		if until.IsZero() && len(got) >= commits {
			until = time.Now().Add(time.Second)
		}
	}
	fmt.Printf("received %d committed, %d rolled back\n", len(got)-rolledBack, rolledBack)
	if rolledBack > 0 {
		log.Fatal("a rolled-back message was delivered")
	}
}
