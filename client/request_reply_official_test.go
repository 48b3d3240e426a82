package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
)

// TestRequestReplyOfficialClient runs request-reply across the unmodified
// official RocketMQ Go client and the SDK, both ways, on two groups:
// official Producer.Request answered by the SDK's Reply, and SDK Request
// answered by an official consumer's CreateReplyMessage sent by an
// official producer (SEND_REPLY_MESSAGE with long header names, to either
// group's reply-topic queue).
func TestRequestReplyOfficialClient(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	const toSDK, toOfficial = "RROffA", "RROffB"
	ec, admin := startReplyCluster(t, toSDK)
	ns := ec.NamesrvAddr()
	ctx := context.Background()
	if _, err := admin.CreateTopic(ctx, client.TopicSpec{Topic: toOfficial, ReadQueueNums: 2, WriteQueueNums: 2}, "", ec.Member(0, 0).Addr()); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "route of "+toOfficial, func() bool { _, err := admin.TopicRoute(ctx, toOfficial); return err == nil })

	// The listeners report through listenerErrs, checked once the requests
	// are answered: the official consumer's goroutines outlive its
	// Shutdown, and a redelivered request answered after the test would
	// otherwise fail a finished test.
	var listenerErrs errorList

	// SDK replier for requests on toSDK.
	replier := startProducer(t, ns, client.ProducerGroup("RROffReplier"))
	c, err := client.NewPushConsumer(client.NameServers(ns), client.ConsumerGroup("RROffSDK"), client.ConsumeFrom(client.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Subscribe(toSDK, "*")
	_ = c.RegisterConcurrentListener(func(ctx context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			if _, err := replier.Reply(ctx, m, []byte("sdk:"+string(m.Body))); err != nil && ctx.Err() == nil { // not cut short by Close
				listenerErrs.add(fmt.Errorf("reply: %w", err))
			}
		}
		return client.ConsumeSuccess
	})
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)

	// Official replier for requests on toOfficial.
	op, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{ns}), producer.WithGroupName("RROffOfficialReplier"),
		producer.WithInstanceName(testutil.OfficialInstance("rroff-replier")), producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = op.Shutdown() }()
	oc, err := rocketmq.NewPushConsumer(consumer.WithNameServer(primitive.NamesrvAddr{ns}), consumer.WithGroupName("RROffOfficial"),
		consumer.WithInstance(testutil.OfficialInstance("rroff-consumer")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	err = oc.Subscribe(toOfficial, consumer.MessageSelector{}, func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			reply, err := consumer.CreateReplyMessage(m, nil)
			if err != nil {
				listenerErrs.add(fmt.Errorf("official CreateReplyMessage: %w", err))
				continue
			}
			// CreateReplyMessage parses body as properties instead of
			// setting it (a bug of the official client): set it here.
			reply.Body = []byte("official:" + string(m.Body))
			if _, err := op.SendSync(ctx, reply); err != nil {
				listenerErrs.add(fmt.Errorf("official reply send: %w", err))
			}
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := oc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = oc.Shutdown() }()

	// Official requester, SDK replier.
	or, err := rocketmq.NewProducer(producer.WithNameServer(primitive.NamesrvAddr{ns}), producer.WithGroupName("RROffRequester"),
		producer.WithInstanceName(testutil.OfficialInstance("rroff-requester")), producer.WithRetry(2), producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := or.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = or.Shutdown() }()
	for i := range 5 {
		body := fmt.Sprintf("o%d", i)
		reply, err := or.Request(ctx, 10*time.Second, primitive.NewMessage(toSDK, []byte(body)))
		if err != nil {
			t.Fatalf("official Request %s: %v", body, err)
		}
		if reply == nil || string(reply.Body) != "sdk:"+body {
			t.Fatalf("official Request %s: reply %v", body, reply)
		}
	}

	// SDK requester, official replier.
	sr := startProducer(t, ns, client.ProducerGroup("RROffSDKRequester"))
	for i := range 5 {
		body := fmt.Sprintf("s%d", i)
		reply, err := sr.Request(ctx, client.NewMessage(toOfficial, []byte(body)), 10*time.Second)
		if err != nil {
			t.Fatalf("SDK Request %s: %v", body, err)
		}
		if string(reply.Body) != "official:"+body {
			t.Fatalf("SDK Request %s: reply %q", body, reply.Body)
		}
	}
	if err := listenerErrs.get(); err != nil {
		t.Fatal(err)
	}
}

// errorList collects errors from goroutines that may outlive a test.
type errorList struct {
	mu   sync.Mutex
	errs []error
}

func (l *errorList) add(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func (l *errorList) get() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}
