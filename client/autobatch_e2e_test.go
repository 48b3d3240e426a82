package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
)

// TestEndToEndAutoBatch: concurrent SendSync with AutoBatch against a real
// 3-node group. Every result's offset msgId reads back (VIEW_MESSAGE_BY_ID)
// as that caller's message at that caller's queue offset, and each queue's
// offsets are dense: the per-message split of batch answers matches what
// the broker stored.
func TestEndToEndAutoBatch(t *testing.T) {
	ec := sharedE2ECluster(t)
	nsAddr := ec.NamesrvAddr()
	ctx := context.Background()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	admin, err := client.NewAdmin(client.NameServers(nsAddr), client.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: "AB", ReadQueueNums: 2, WriteQueueNums: 2}, "DefaultCluster", ""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "route of AB", func() bool { _, err := admin.TopicRoute(ctx, "AB"); return err == nil })
	p, err := client.NewProducer(client.NameServers(nsAddr), client.WithLogger(log), client.AutoBatch(16, 64<<10, 0), client.AutoBatchInflight(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())

	const goroutines, each = 12, 15
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		results = map[string]*client.SendResult{} // body → result
	)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				body := fmt.Sprintf("g%d-%d", g, i)
				res, err := p.SendSync(ctx, client.NewMessage("AB", []byte(body)).WithKeys(body))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				results[body] = res
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	offsets := map[client.MessageQueue]map[int64]bool{}
	ids := map[string]bool{}
	for body, res := range results {
		if ids[res.MsgID] {
			t.Fatalf("msgId %s twice", res.MsgID)
		}
		ids[res.MsgID] = true
		if offsets[res.Queue] == nil {
			offsets[res.Queue] = map[int64]bool{}
		}
		if offsets[res.Queue][res.QueueOffset] {
			t.Fatalf("%v offset %d twice", res.Queue, res.QueueOffset)
		}
		offsets[res.Queue][res.QueueOffset] = true
		m, err := admin.ViewMessage(ctx, res.OffsetMsgID)
		if err != nil {
			t.Fatalf("view %s (%s): %v", res.OffsetMsgID, body, err)
		}
		if string(m.Body) != body || m.MsgID != res.MsgID || m.QueueOffset != res.QueueOffset || m.QueueID != int32(res.Queue.QueueID) {
			t.Fatalf("result %v of %q; stored there: %q msgId %s queue %d offset %d", res, body, m.Body, m.MsgID, m.QueueID, m.QueueOffset)
		}
	}
	for mq, offs := range offsets {
		for o := range int64(len(offs)) {
			if !offs[o] {
				t.Fatalf("%v: offsets not dense, %d missing of %d", mq, o, len(offs))
			}
		}
	}
}
