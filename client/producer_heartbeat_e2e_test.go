package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
)

// TestProducerListedInItsGroup: a plain producer, as every RocketMQ
// producer, heartbeats its producer group to the brokers of the topics it
// sends to, so GET_PRODUCER_CONNECTION_LIST (admin producerConnection)
// lists it; and again on a new connection, the broker having dropped it
// with the one that closed.
func TestProducerListedInItsGroup(t *testing.T) {
	nsAddr, brokerAddr := startConnCluster(t, "HBP")
	admin := remoting.NewClient(remoting.ClientConfig{}, nil)
	t.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	p, err := client.NewProducer(client.NameServers(nsAddr), client.ProducerGroup("HBPG"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(ctx) })
	send := func() {
		t.Helper()
		if _, err := p.SendSync(ctx, client.NewMessage("HBP", []byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	send()
	var before string
	testutil.WaitFor(t, 5*time.Second, "the producer in its group", func() bool {
		before = connOf(t, admin, brokerAddr, "HBPG", p.ClientID(), false)
		return before != ""
	})
	client.ProducerRemoting(p).CloseConn(brokerAddr)
	send()
	testutil.WaitFor(t, 5*time.Second, "the producer in its group on a new connection", func() bool {
		now := connOf(t, admin, brokerAddr, "HBPG", p.ClientID(), false)
		return now != "" && now != before
	})
}
