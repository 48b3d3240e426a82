package client

import (
	"errors"
	"testing"
	"time"

	"github.com/raftmq/raftmq/wire"
)

// Deliver-at and deliver-after become the RocketMQ 5 timer properties,
// replace user properties of the same name, keep the message out of
// batches and exclude each other and delay levels.
func TestMessageTimerOptions(t *testing.T) {
	at := time.UnixMilli(1_900_000_000_123)
	m := NewMessage("T", []byte("x")).WithDeliverAt(at).WithProperty(wire.PropertyTimerDeliverMs, "1")
	got := wire.DecodeProperties(string(m.appendWireProperties(nil)))
	if got[wire.PropertyTimerDeliverMs] != "1900000000123" {
		t.Fatalf("TIMER_DELIVER_MS = %q", got[wire.PropertyTimerDeliverMs])
	}
	if !m.timer() {
		t.Fatal("a deliver-at message is batchable")
	}
	m = NewMessage("T", []byte("x")).WithDeliverAfter(1500 * time.Millisecond)
	if got := wire.DecodeProperties(string(m.appendWireProperties(nil))); got[wire.PropertyTimerDelayMs] != "1500" {
		t.Fatalf("TIMER_DELAY_MS = %q", got[wire.PropertyTimerDelayMs])
	}
	if !NewMessage("T", []byte("x")).WithProperty(wire.PropertyStartDeliverTime, "5").timer() {
		t.Fatal("__STARTDELIVERTIME not seen as a timer")
	}
	if NewMessage("T", []byte("x")).timer() {
		t.Fatal("plain message seen as a timer")
	}
	for _, bad := range []*Message{
		NewMessage("T", []byte("x")).WithDeliverAfter(-time.Second),
		NewMessage("T", []byte("x")).WithDeliverAfter(time.Second).WithDeliverAt(at),
		{Topic: "T", Body: []byte("x"), DelayLevel: 2, DeliverAt: at},
	} {
		if err := bad.validate(DefaultMaxMessageSize); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("validate(%v) = %v", bad, err)
		}
	}
}
