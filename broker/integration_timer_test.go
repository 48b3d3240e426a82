package broker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

// Timer messages end to end on a 3-node group on files and TCP: the
// unmodified official Go client sets the RocketMQ 5 properties directly,
// the SDK uses WithDeliverAt / WithDeliverAfter; an official consumer gets
// every message once, never before its time.

// timerRecv records when each body arrived and when it was due.
type timerRecv struct {
	mu   sync.Mutex
	got  map[string]int
	late map[string]time.Duration // arrival - TIMER_OUT_MS
	out  map[string]int64         // TIMER_OUT_MS
}

func newTimerRecv() *timerRecv {
	return &timerRecv{got: map[string]int{}, late: map[string]time.Duration{}, out: map[string]int64{}}
}

func (r *timerRecv) add(m *primitive.MessageExt) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := string(m.Body)
	r.got[b]++
	if due, err := strconv.ParseInt(m.GetProperty(wire.PropertyTimerOutMs), 10, 64); err == nil {
		r.late[b] = now.Sub(time.UnixMilli(due))
		r.out[b] = due
	}
}

func (r *timerRecv) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func TestOfficialAndSDKTimerMessages(t *testing.T) {
	testutil.SkipOfficialClientUnderRace(t)
	pc := startDiskCluster(t, nil)
	const topic = "TMR"
	pc.createTopicOnLeader(topic, 2)
	ctx := context.Background()
	op := officialProducer(t, pc.nsAddr)
	sp := sdkProducer(t, pc.nsAddr)

	due := map[string]time.Time{}
	now := time.Now()
	officialSend := func(body, prop string, v int64, at time.Time) {
		m := primitive.NewMessage(topic, []byte(body))
		m.WithProperty(prop, strconv.FormatInt(v, 10))
		if r, err := op.SendSync(ctx, m); err != nil || r.Status != primitive.SendOK {
			t.Fatalf("official send %s: %v %v", body, r, err)
		}
		due[body] = at
	}
	at := now.Add(1500 * time.Millisecond)
	officialSend("o-start", wire.PropertyStartDeliverTime, at.UnixMilli(), at)
	at = now.Add(1200 * time.Millisecond)
	officialSend("o-deliver", wire.PropertyTimerDeliverMs, at.UnixMilli(), at)
	officialSend("o-delay", wire.PropertyTimerDelaySec, 1, now.Add(time.Second))

	at = now.Add(1300 * time.Millisecond)
	if _, err := sp.SendSync(ctx, client.NewMessage(topic, []byte("s-at")).WithDeliverAt(at)); err != nil {
		t.Fatal(err)
	}
	due["s-at"] = at
	if _, err := sp.SendSync(ctx, client.NewMessage(topic, []byte("s-after")).WithDeliverAfter(time.Second)); err != nil {
		t.Fatal(err)
	}
	due["s-after"] = now.Add(time.Second)

	// Beyond timerMaxDelaySec (7 days): refused, with the reason.
	far := primitive.NewMessage(topic, []byte("far"))
	far.WithProperty(wire.PropertyTimerDelaySec, strconv.Itoa(8*24*3600))
	if _, err := op.SendSync(ctx, far); err == nil || !strings.Contains(err.Error(), "timerMaxDelaySec") {
		t.Fatalf("official send 8 days ahead: %v", err)
	}
	_, err := sp.SendSync(ctx, client.NewMessage(topic, []byte("far")).WithDeliverAfter(8*24*time.Hour))
	if err == nil || !strings.Contains(err.Error(), "timerMaxDelaySec") {
		t.Fatalf("SDK send 8 days ahead: %v", err)
	}

	r := newTimerRecv()
	officialPushConsumer(t, pc.nsAddr, "CG_TMR", topic, "*", func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			r.add(m)
		}
		return consumer.ConsumeSuccess, nil
	})
	testutil.WaitFor(t, 30*time.Second, "every timer message consumed", func() bool { return r.count() == len(due) })
	r.mu.Lock()
	defer r.mu.Unlock()
	for body, at := range due {
		if r.got[body] != 1 {
			t.Errorf("%s consumed %d times", body, r.got[body])
		}
		// TIMER_OUT_MS is the due time the broker computed: the given
		// time, or for a delay at least the client's estimate.
		if l, ok := r.late[body]; !ok || l < 0 {
			t.Errorf("%s arrived %v after its due time (TIMER_OUT_MS present: %v)", body, l, ok)
		}
		if out := r.out[body]; out < at.UnixMilli() || (!strings.Contains(body, "delay") && !strings.Contains(body, "after") && out != at.UnixMilli()) {
			t.Errorf("%s: TIMER_OUT_MS %d, sent for %d", body, out, at.UnixMilli())
		}
	}
	t.Logf("arrival after the due time (includes the consumer's pull): %v", fmt.Sprint(r.late))
}
