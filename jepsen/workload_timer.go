package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/raftmq/raftmq/client"
)

// Timer messages in the chaos run: one producer sends messages due 0.2–3 s
// later (client.Message.WithDeliverAt) to their own topic, one push
// consumer group reads it, and after the drain the final read covers the
// topic on every node. The checker requires every acknowledged timer
// message delivered and held by every replica, none before its time and
// none that was never sent (checker_timer.go). They have their own topic because a timer message's
// acknowledgement names its place in rmq_sys_wheel_timer, not in the real
// topic, so the offset checks of the main workload do not apply.
const (
	TimerTopic = "JepsenTimerTopic"
	TimerGroup = "JepsenTimerConsumers"
)

// Due times of the timer messages, after the send is invoked.
const (
	timerMinDelay = 200 * time.Millisecond
	timerMaxDelay = 3 * time.Second
)

// TimerOp is one timer send: DueMs is when it was asked to be delivered
// (milliseconds since the run started, like InvokeMs), DueWallMs the same
// instant as the TIMER_DELIVER_MS the producer sent (Unix milliseconds).
type TimerOp struct {
	Value      string  `json:"value"`
	InvokeMs   float64 `json:"invokeMs"`
	CompleteMs float64 `json:"completeMs"`
	DueMs      float64 `json:"dueMs"`
	DueWallMs  int64   `json:"dueWallMs,omitempty"`
	Result     string  `json:"result"`
	Err        string  `json:"err,omitempty"`
	// Broker is the group that acknowledged it (ok only): its timer wheel
	// holds the message until due, then stores it in TimerTopic there.
	Broker string `json:"broker,omitempty"`
}

// TimerFinalRead is TimerTopic as the final read found it: what each node
// holds, the span each node's read covered (From is its retention floor),
// the nodes whose read failed, and when the read began (ms since the run
// started): a timer due later may still legitimately be pending.
type TimerFinalRead struct {
	Reads  []Read      `json:"reads,omitempty"`
	Ranges []ReadRange `json:"ranges,omitempty"`
	Unread []string    `json:"unread,omitempty"`
	AtMs   float64     `json:"atMs"`
}

func (r *recorder) timerOp(o TimerOp) {
	r.mu.Lock()
	r.h.TimerOps = append(r.h.TimerOps, o)
	r.mu.Unlock()
}

func (r *recorder) timerDelivery(d Delivery) {
	r.mu.Lock()
	r.h.TimerDeliveries = append(r.h.TimerDeliveries, d)
	r.mu.Unlock()
}

// startTimers starts the timer producer and consumer (nothing when the
// workload sends no timer messages).
func (w *workload) startTimers(ctx context.Context) error {
	if w.cfg.TimerOpsPerSecond <= 0 {
		return nil
	}
	p, err := client.NewProducer(
		client.NameServers(w.c.NamesrvAddr()),
		client.ProducerGroup("JepsenTimerProducer"),
		client.InstanceName("jepsen-timer-p"),
		client.AutoCreateTopic(true, w.queues),
		client.SendTimeout(w.cfg.SendTimeout),
		client.AttemptTimeout(w.cfg.AttemptTimeout),
		client.RouteRefreshInterval(time.Second),
		client.WithLogger(w.log.Named("timer-p")),
	)
	if err != nil {
		return err
	}
	if err := p.Start(ctx); err != nil {
		return err
	}
	w.prod = append(w.prod, p)
	w.timerProd = p
	// The first send creates the topic (through TBW102) before the
	// consumer subscribes.
	deadline := time.Now().Add(30 * time.Second)
	for seq := 0; ; seq++ {
		if err := w.sendTimer(ctx, fmt.Sprintf("timer-warm-%d", seq)); err == nil {
			break
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%w: warm-up timer send: %v", ErrNotReady, err)
		}
	}
	if err := w.awaitRoute(ctx, TimerTopic); err != nil {
		return err
	}
	c, err := client.NewPushConsumer(
		client.NameServers(w.c.NamesrvAddr()),
		client.ConsumerGroup(TimerGroup),
		client.InstanceName("jepsen-timer-c"),
		client.ConsumeFrom(client.ConsumeFromFirstOffset),
		client.RebalanceInterval(2*time.Second),
		client.PersistInterval(time.Second),
		client.PullBackoff(500*time.Millisecond),
		client.RouteRefreshInterval(time.Second),
		client.WithLogger(w.log.Named("timer-c")),
	)
	if err != nil {
		return err
	}
	if err := c.Subscribe(TimerTopic, "*"); err != nil {
		return err
	}
	err = c.RegisterConcurrentListener(func(_ context.Context, cc *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		at := time.Now()
		now := w.rec.since(at)
		for _, m := range msgs {
			d := deliveryOf("timer-c", cc.Queue, TimerTopic, m, now, w.nodeAt)
			d.AtWallMs = at.UnixMilli()
			w.rec.timerDelivery(d)
		}
		return client.ConsumeSuccess
	})
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	w.cons = append(w.cons, c)
	return nil
}

// sendTimer performs and records one timer send.
func (w *workload) sendTimer(ctx context.Context, value string) error {
	inv := time.Now()
	due := inv.Add(timerMinDelay + time.Duration(rand.Int63n(int64(timerMaxDelay-timerMinDelay))))
	msg := client.NewMessage(TimerTopic, encodeBody(value)).WithDeliverAt(due)
	sctx, cancel := context.WithTimeout(ctx, w.cfg.SendTimeout)
	res, err := w.timerProd.SendSync(sctx, msg)
	cancel()
	o := TimerOp{Value: value, InvokeMs: w.rec.since(inv), CompleteMs: w.rec.since(time.Now()), DueMs: w.rec.since(due),
		DueWallMs: due.UnixMilli(), Result: ResultOK}
	if acked, why := sendOutcome(res, err); !acked {
		o.Result, o.Err = ResultUnknown, why
	} else {
		o.Broker = res.Queue.BrokerName
	}
	w.rec.timerOp(o)
	return err
}

// runTimers sends timer messages at TimerOpsPerSecond until ctx ends.
func (w *workload) runTimers(ctx context.Context) {
	if w.timerProd == nil {
		return
	}
	interval := time.Second / time.Duration(w.cfg.TimerOpsPerSecond)
	next := time.Now()
	for seq := 0; ctx.Err() == nil; seq++ {
		_ = w.sendTimer(ctx, fmt.Sprintf("timer-%d", seq))
		next = next.Add(interval)
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		} else {
			next = time.Now()
		}
	}
}

// drainTimers waits until every acknowledged timer message was delivered,
// up to timeout (true when none is missing).
func drainTimers(ctx context.Context, rec *recorder, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		rec.mu.Lock()
		got := make(map[string]bool, len(rec.h.TimerDeliveries))
		for _, d := range rec.h.TimerDeliveries {
			got[d.Value] = true
		}
		missing := 0
		for _, o := range rec.h.TimerOps {
			if o.Result == ResultOK && !got[o.Value] {
				missing++
			}
		}
		rec.mu.Unlock()
		if missing == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// finalReadTimers reads TimerTopic on every running node of every group
// that acknowledged or delivered a timer message (the topic lives where
// the first send auto-created it), so the checker can hold every replica
// to every fired timer and tell a timer the wheel never fired from one
// the consumer missed.
func (w *workload) finalReadTimers(ctx context.Context) error {
	h := w.rec.snapshot()
	if len(h.TimerOps) == 0 {
		return nil
	}
	used := map[string]bool{}
	for _, o := range h.TimerOps {
		if o.Result == ResultOK {
			used[o.Broker] = true
		}
	}
	for _, d := range h.TimerDeliveries {
		used[d.Broker] = true
	}
	fr := TimerFinalRead{AtMs: w.rec.since(time.Now())}
	var errs []error
	for _, n := range w.c.Nodes {
		if n.State() != NodeRunning || !used[GroupNameOf(n.Group)] {
			continue
		}
		r, rr, err := w.readTopic(ctx, n, TimerTopic, w.queues)
		fr.Reads = append(fr.Reads, r...)
		if err != nil {
			fr.Unread = append(fr.Unread, n.ID)
			errs = append(errs, err)
		} else {
			fr.Ranges = append(fr.Ranges, rr...)
		}
	}
	w.rec.mu.Lock()
	w.rec.h.TimerRead = &fr
	w.rec.mu.Unlock()
	return errors.Join(errs...)
}
