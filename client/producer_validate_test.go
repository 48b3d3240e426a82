package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestProducerBatchRefusesDelayedAtOnce: a batch holding a delayed or
// timer message is refused before anything is sent, however the delay was
// asked for (a DELAY property set directly, as Java's setDelayTimeLevel
// does, counts as MessageBatch.generateFromList counts it): brokers refuse
// such a batch, so the caller learns at once which message to send alone.
func TestProducerBatchRefusesDelayedAtOnce(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns)
	for name, m := range map[string]*Message{
		"DELAY property":      NewMessage("T", []byte("x")).WithProperty(wire.PropertyDelayTimeLevel, "3"),
		"DeliverAfter":        NewMessage("T", []byte("x")).WithDeliverAfter(time.Minute),
		"DeliverAt":           NewMessage("T", []byte("x")).WithDeliverAt(time.Now().Add(time.Hour)),
		"TIMER_DELAY_SEC set": NewMessage("T", []byte("x")).WithProperty(wire.PropertyTimerDelaySec, "60"),
	} {
		_, err := p.SendBatch(context.Background(), []*Message{NewMessage("T", []byte("plain")), m})
		if !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("batch with a message with %s: %v, want ErrInvalidMessage", name, err)
		}
	}
	if n := log.requests(); n != 0 {
		t.Fatalf("%d requests reached the broker", n)
	}
	// A level of 0 or below asks for no delay (brokers delay only a level
	// above 0, and Java's generateFromList refuses only those): such a
	// batch goes.
	for _, level := range []string{"0", "-1", "00"} {
		if _, err := p.SendBatch(context.Background(), []*Message{NewMessage("T", []byte("x")).WithProperty(wire.PropertyDelayTimeLevel, level)}); err != nil {
			t.Fatalf("batch with DELAY=%s: %v", level, err)
		}
	}
}

// TestProducerRequestNilMessage: Request refuses a nil message with
// ErrInvalidMessage, as every send does, rather than panicking.
func TestProducerRequestNilMessage(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns)
	if _, err := p.Request(context.Background(), nil, time.Second); !errors.Is(err, ErrInvalidMessage) {
		t.Fatalf("Request(nil): %v, want ErrInvalidMessage", err)
	}
}

// TestProducerRefusesSystemTopicsAtOnce: a send to a topic no client may
// send to (TopicValidator's NOT_ALLOWED_SEND_TOPIC_SET, and raftmq's timer
// topic) is refused before anything is sent, as RocketMQ's clients refuse
// it, rather than answered NO_PERMISSION by every group in turn.
func TestProducerRefusesSystemTopicsAtOnce(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	forbidden := []string{wire.TopicSchedule, wire.TopicTimer, wire.TopicTransHalf, wire.TopicTransOpHalf,
		wire.TopicTransCheckMaxTime, wire.TopicSelfTest, wire.TopicOffsetMovedEvent}
	topics := map[string]int{}
	for _, topic := range forbidden {
		topics[topic] = 1
	}
	a.register(t, ns, 0, 1, topics)
	p := newTestProducer(t, ns)
	ctx := context.Background()
	for _, topic := range forbidden {
		if _, err := p.SendSync(ctx, NewMessage(topic, []byte("x"))); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("SendSync to %s: %v, want ErrInvalidMessage", topic, err)
		}
		if err := p.SendOneway(ctx, NewMessage(topic, []byte("x"))); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("SendOneway to %s: %v, want ErrInvalidMessage", topic, err)
		}
		if _, err := p.SendBatch(ctx, []*Message{NewMessage(topic, []byte("x"))}); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("SendBatch to %s: %v, want ErrInvalidMessage", topic, err)
		}
	}
	if n := log.requests(); n != 0 {
		t.Fatalf("%d requests reached the broker", n)
	}
}

// TestProducerRefusesHalfPropertyOutsideTransactions: a message carrying
// TRAN_MSG=true is a half message to the brokers, stored invisibly until
// an END_TRANSACTION or a check-back decides it; a plain producer would
// get SEND_OK for it, answer no check-back, and the message would never
// be delivered. Every plain send refuses it at once; a transaction
// producer's half still carries it.
func TestProducerRefusesHalfPropertyOutsideTransactions(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns)
	ctx := context.Background()
	half := func() *Message {
		return NewMessage("T", []byte("x")).WithProperty(wire.PropertyTransactionPrep, "TRUE")
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("%s of a message with TRAN_MSG: %v, want ErrInvalidMessage", what, err)
		}
	}
	_, err := p.SendSync(ctx, half())
	check("SendSync", err)
	// A consumed transactional message still carries TRAN_MSG=true: the
	// error tells one forwarding it what to do as well.
	if err == nil || !strings.Contains(err.Error(), "delete the "+wire.PropertyTransactionPrep+" property") {
		t.Errorf("the refusal does not say how to forward a consumed transactional message: %v", err)
	}
	check("SendOneway", p.SendOneway(ctx, half()))
	check("SendAsync", p.SendAsync(ctx, half(), func(*SendResult, error) { t.Error("callback of a refused SendAsync") }))
	_, err = p.SendWithSelector(ctx, half(), HashSelector())
	check("SendWithSelector", err)
	_, err = p.SendBatch(ctx, []*Message{NewMessage("T", []byte("y")), half()})
	check("SendBatch", err)
	_, err = p.Request(ctx, half(), time.Second)
	check("Request", err)
	if n := log.requests(); n != 0 {
		t.Fatalf("%d requests reached the broker", n)
	}
	// TRAN_MSG=false asks for nothing.
	if _, err := p.SendSync(ctx, NewMessage("T", []byte("x")).WithProperty(wire.PropertyTransactionPrep, "false")); err != nil {
		t.Fatal(err)
	}
}

// TestProducerBatchNilMessage: SendBatch refuses a nil message, the
// first included, with ErrInvalidMessage naming its index, rather than
// panicking.
func TestProducerBatchNilMessage(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 1})
	p := newTestProducer(t, ns)
	for _, batch := range [][]*Message{{nil}, {nil, NewMessage("T", []byte("x"))}, {NewMessage("T", []byte("x")), nil}} {
		_, err := p.SendBatch(context.Background(), batch)
		if !errors.Is(err, ErrInvalidMessage) || !strings.Contains(err.Error(), "batch message") {
			t.Errorf("SendBatch with a nil message: %v, want ErrInvalidMessage naming it", err)
		}
	}
	if n := log.requests(); n != 0 {
		t.Fatalf("%d requests reached the broker", n)
	}
}

// TestClientIPValidated: ClientIP is written into every UNIQ_KEY, which
// brokers, consumers and tools read as 4 or 16 address bytes: an address
// of another length is refused when the client is built, by name, instead
// of producing ids nothing can parse.
func TestClientIPValidated(t *testing.T) {
	for _, ip := range []net.IP{{10, 0, 0}, make(net.IP, 5)} {
		_, err := NewProducer(NameServers("127.0.0.1:9876"), ClientIP(ip))
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "ClientIP") {
			t.Errorf("ClientIP(%v) of %d bytes: %v, want ErrInvalidOption naming ClientIP", []byte(ip), len(ip), err)
		}
	}
	for _, ip := range []net.IP{net.IPv4(10, 0, 0, 9), net.ParseIP("fe80::1")} {
		p, err := NewProducer(NameServers("127.0.0.1:9876"), ClientIP(ip))
		if err != nil {
			t.Fatalf("ClientIP(%v): %v", ip, err)
		}
		if _, err := ParseUniqID(p.ids.New()); err != nil {
			t.Fatalf("ClientIP(%v): %v", ip, err)
		}
	}
}

// TestProducerKeepsUserUniqKey: a message that already carries a UNIQ_KEY
// property is sent with it, as RocketMQ's clients send it
// (MessageClientIDSetter.setUniqID sets one only when there is none; the
// official Go client's buildSendRequest likewise), by every kind of send:
// the id is the message's, the one its SendResult reports, and stays the
// same when the caller sends the message again. Messages without one get
// a fresh id per send.
func TestProducerKeepsUserUniqKey(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	a := startFakeBroker(t, "broker-a", log)
	a.register(t, ns, 0, 1, map[string]int{"T": 2})
	p := newTestProducer(t, ns)
	ctx := context.Background()
	const id = "0A0B0C0D00001234567800000000ABCD"
	withID := func() *Message { return NewMessage("T", []byte("x")).WithProperty(wire.PropertyUniqKey, id) }
	sentIDs := func(from int) []string {
		var ids []string
		for _, r := range log.all()[from:] {
			if r.code == remoting.RequestSendBatchMessage {
				entries, err := wire.DecodeBatch(r.body)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					ids = append(ids, wire.DecodeProperties(e.Properties)[wire.PropertyUniqKey])
				}
				continue
			}
			ids = append(ids, wire.DecodeProperties(r.header.Properties)[wire.PropertyUniqKey])
		}
		return ids
	}
	check := func(what string, from int, res *SendResult, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := sentIDs(from); len(got) != 1 || got[0] != id {
			t.Fatalf("%s sent UNIQ_KEY %v, want %s", what, got, id)
		}
		if res != nil && res.MsgID != id {
			t.Fatalf("%s: result MsgID %s, want %s", what, res.MsgID, id)
		}
	}
	for range 2 {
		n := log.requests()
		res, err := p.SendSync(ctx, withID())
		check("SendSync", n, res, err)
	}
	n := log.requests()
	res, err := p.SendWithSelector(ctx, withID(), HashSelector())
	check("SendWithSelector", n, res, err)
	n = log.requests()
	err = p.SendOneway(ctx, withID())
	for deadline := time.Now().Add(10 * time.Second); log.requests() == n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // a oneway send returns before the broker reads it
	}
	check("SendOneway", n, nil, err)
	n = log.requests()
	done := make(chan *SendResult, 1)
	if err := p.SendAsync(ctx, withID(), func(r *SendResult, err error) {
		if err != nil {
			t.Error(err)
		}
		done <- r
	}); err != nil {
		t.Fatal(err)
	}
	check("SendAsync", n, <-done, nil)
	n = log.requests()
	res, err = p.SendBatch(ctx, []*Message{withID(), NewMessage("T", []byte("y"))})
	if err != nil {
		t.Fatal(err)
	}
	if got := sentIDs(n); len(got) != 2 || got[0] != id || !uniqKeyRE.MatchString(got[1]) || got[1] == id {
		t.Fatalf("SendBatch sent UNIQ_KEYs %v, want %s and a fresh one", got, id)
	}
	if want := id + "," + sentIDs(n)[1]; res.MsgID != want {
		t.Fatalf("SendBatch result MsgID %s, want %s", res.MsgID, want)
	}
	// Without one, every send makes its own.
	n = log.requests()
	for range 2 {
		if _, err := p.SendSync(ctx, NewMessage("T", []byte("x"))); err != nil {
			t.Fatal(err)
		}
	}
	if got := sentIDs(n); len(got) != 2 || got[0] == got[1] || !uniqKeyRE.MatchString(got[0]) {
		t.Fatalf("sends without a UNIQ_KEY sent %v", got)
	}
}
