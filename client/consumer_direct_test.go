package client

import (
	"context"
	"net/netip"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestConsumeDirectlyTopic: a message relayed by CONSUME_MESSAGE_DIRECTLY
// reaches the listener under its original topic (RETRY_TOPIC) only when
// it is in the group's retry or dead-letter topic, as
// resetRetryAndNamespace does. A producer sets any properties it likes on
// a message of a topic it may publish to: one stored elsewhere keeps its
// own topic, RETRY_TOPIC or not.
func TestConsumeDirectlyTopic(t *testing.T) {
	cfg := defaultConsumerConfig()
	cfg.group = "CG"
	var got []string
	c := newConsumerCore(cfg, "test", queueHooks{direct: func(_ context.Context, m *MessageExt, mq MessageQueue) wire.ConsumeMessageDirectlyResult {
		got = append(got, m.Topic+" "+mq.Topic)
		return wire.ConsumeMessageDirectlyResult{ConsumeResult: wire.CMResultSuccess}
	}})
	for _, tc := range []struct{ stored, want string }{
		{"Orders", "Orders"},
		{wire.RetryTopic("CG"), "Payments"},
		{wire.DLQGroupTopicPrefix + "CG", "Payments"},
		{wire.RetryTopic("OTHER"), wire.RetryTopic("OTHER")},
	} {
		m := &wire.Message{Topic: tc.stored, Body: []byte("b"), BornHost: netip.MustParseAddrPort("127.0.0.1:1"),
			StoreHost: netip.MustParseAddrPort("127.0.0.1:2"), Properties: map[string]string{wire.PropertyRetryTopic: "Payments"}}
		m.EncodedProperties = wire.StoredProperties(m.Properties)
		body, err := wire.AppendMessage(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		req := remoting.NewRequest(remoting.RequestConsumeMessageDirectly,
			&wire.ConsumeMessageDirectlyResultRequestHeader{ConsumerGroup: "CG", ClientID: c.clientID, BrokerName: "b"}, body)
		got = got[:0]
		resp, err := c.consumeDirectlyHandler(context.Background(), nil, req)
		if err != nil || resp.Code != remoting.ResponseSuccess {
			t.Fatalf("stored in %s: %v %v", tc.stored, resp, err)
		}
		if want := tc.want + " " + tc.want; len(got) != 1 || got[0] != want {
			t.Errorf("stored in %s with RETRY_TOPIC=Payments: listener saw %q, want %q", tc.stored, got, want)
		}
	}
}
