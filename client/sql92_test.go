package client

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

func TestBuildSubscriptionSelector(t *testing.T) {
	sd, err := buildSubscription("T", SQL92("a > 1"), 9)
	if err != nil || sd.ExpressionType != "SQL92" || sd.SubString != "a > 1" || sd.SubVersion != 9 || len(sd.TagsSet) != 0 ||
		string(sd.CodeSet) != "[]" || !sd.MatchesTag("anything") {
		t.Fatalf("SQL92 subscription %+v, %v", sd, err)
	}
	for _, sel := range []MessageSelector{Tags("TagA || TagB"), {Expression: "TagA || TagB"}} {
		sd, err := buildSubscription("T", sel, 1)
		if err != nil || sd.ExpressionType != "TAG" || len(sd.TagsSet) != 2 {
			t.Fatalf("tag selector %+v: %+v %v", sel, sd, err)
		}
	}
	// Brokers refuse to filter by an expression longer than 16 KiB
	// (SUBSCRIPTION_PARSE_FAILED on every pull): Subscribe says so.
	long := strings.Repeat("TagA || ", maxSubscriptionLength/8) + "TagB"
	for _, sel := range []MessageSelector{SQL92(""), SQL92("  "), {Type: "CLASS", Expression: "x"}, Tags(long), SQL92(long)} {
		if _, err := buildSubscription("T", sel, 1); !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("selector %+v: %v; want ErrInvalidOption", sel, err)
		}
	}
}

// TestSQL92ConsumerChecksBrokers: Start sends CHECK_CLIENT_CONFIG for a
// SQL92 subscription (and none for tags), fails with the broker's reason
// when it refuses, and otherwise heartbeats and pulls with the SQL92
// subscription.
func TestSQL92ConsumerChecksBrokers(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1, wire.RetryTopic("G"): 1})
	const refusal = "sql92: at 5: expected a value after >="
	b.answer(remoting.RequestCheckClientConfig, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseSubscriptionParseFailed, refusal)
	})
	newConsumer := func() *PushConsumer {
		c := newTestPush(t, ns, "G", ConsumeFrom(ConsumeFromFirstOffset))
		if err := c.RegisterConcurrentListener(func(context.Context, *ConsumeConcurrentlyContext, []*MessageExt) ConsumeResult {
			return ConsumeSuccess
		}); err != nil {
			t.Fatal(err)
		}
		return c
	}

	tags := newConsumer()
	if err := tags.Subscribe("T", "TagA"); err != nil {
		t.Fatal(err)
	}
	startPush(t, tags)
	if n := b.count(remoting.RequestCheckClientConfig); n != 0 {
		t.Fatalf("a tag consumer sent %d CHECK_CLIENT_CONFIG", n)
	}
	_ = tags.Close(context.Background())

	refused := newConsumer()
	if err := refused.SubscribeSelector("T", SQL92("a >= ")); err != nil {
		t.Fatal(err)
	}
	err := refused.Start(context.Background())
	var be *BrokerError
	if !errors.As(err, &be) || be.Code != remoting.ResponseSubscriptionParseFailed || !strings.Contains(err.Error(), refusal) ||
		!strings.Contains(err.Error(), "SQL92") {
		t.Fatalf("Start with a refused expression: %v", err)
	}
	_ = refused.Close(context.Background())
	lite, err := NewLitePullConsumer(fastConsumerOpts(t, ns, "LG")...)
	if err != nil {
		t.Fatal(err)
	}
	if err := lite.SubscribeSelector("T", SQL92("a >= ")); err != nil {
		t.Fatal(err)
	}
	if err := lite.Start(context.Background()); !errors.As(err, &be) || !strings.Contains(err.Error(), refusal) {
		t.Fatalf("lite pull Start with a refused expression: %v", err)
	}
	_ = lite.Close(context.Background())

	b.answer(remoting.RequestCheckClientConfig, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseSuccess, "")
	})
	const expr = "a >= 5 AND TAGS <> 'TagB'"
	ok := newConsumer()
	if err := ok.SubscribeSelector("T", SQL92(expr)); err != nil {
		t.Fatal(err)
	}
	startPush(t, ok)
	checks := b.requests(remoting.RequestCheckClientConfig)
	var body wire.CheckClientRequestBody
	if err := json.Unmarshal(checks[len(checks)-1].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.ClientID != ok.ClientID() || body.Group != "G" || body.SubscriptionData == nil ||
		body.SubscriptionData.ExpressionType != "SQL92" || body.SubscriptionData.SubString != expr || body.SubscriptionData.Topic != "T" {
		t.Fatalf("CHECK_CLIENT_CONFIG body %s", checks[len(checks)-1].Body)
	}
	testutil.WaitFor(t, 5*time.Second, "a pull of T", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, h := range b.pulls {
			if h.Topic == "T" && h.ExpressionType == "SQL92" {
				return true
			}
		}
		return false
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range b.pulls {
		if h.Topic == "T" && h.ExpressionType == "SQL92" &&
			(h.Subscription != expr || h.SysFlag&wire.PullFlagSubscription == 0) {
			t.Fatalf("SQL92 pull header %+v", h)
		}
	}
	hb := b.heartbeat[len(b.heartbeat)-1]
	found := false
	for _, sd := range hb.ConsumerDataSet[0].SubscriptionDataSet {
		if sd.Topic == "T" {
			found = sd.ExpressionType == "SQL92" && sd.SubString == expr
		}
	}
	if !found {
		t.Fatalf("heartbeat %+v lacks the SQL92 subscription", hb)
	}
}
