package jepsen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/wire"
)

// Topic is the topic every producer writes and the consumer group reads.
const (
	Topic         = "JepsenTopic"
	ConsumerGroup = "JepsenConsumers"
)

// WorkloadConfig shapes the clients.
type WorkloadConfig struct {
	// Producers is the number of SDK producers; every second one is
	// idempotent (client.Idempotent), the others plain.
	Producers int
	// WorkersPerProducer is the closed-loop senders per producer.
	WorkersPerProducer int
	// OpsPerSecond caps the total send rate (0 = unbounded closed loop).
	OpsPerSecond int
	// SendTimeout bounds one SendSync (all SDK retries included).
	SendTimeout time.Duration
	// AttemptTimeout bounds each SDK attempt but the last (0 = SDK default:
	// no bound).
	AttemptTimeout time.Duration
	// Consumers is the number of push consumers in the group.
	Consumers int
	// TimerOpsPerSecond is the rate of timer messages (workload_timer.go;
	// 0 = none).
	TimerOpsPerSecond int
	// TxnProducers is the number of SDK transaction producers
	// (workload_txn.go), each with WorkersPerProducer workers.
	TxnProducers int
	// OrderedKeys, OrderedOpsPerSecond, OffsetQueues and RetryOpsPerSecond
	// shape the ordered, offsets and retry workloads (workload_chaos.go;
	// 0 = off).
	OrderedKeys, OrderedOpsPerSecond, OffsetQueues, RetryOpsPerSecond int
}

// workload runs producers and consumers against one cluster.
type workload struct {
	cfg    WorkloadConfig
	queues int
	c      *Cluster
	rec    *recorder
	log    *zap.Logger
	prod   []*client.Producer
	cons   []*client.PushConsumer
	wg     sync.WaitGroup
	// timerProd sends the timer messages (nil: none).
	timerProd *client.Producer
	// txnProd are the transaction producers (workload_txn.go).
	txnProd []*client.TransactionProducer
	chaos   chaosClients
	// nodeAt maps each node's remoting address to its id (ServedBy).
	nodeAt map[string]string
}

func newWorkload(cfg WorkloadConfig, queues int, c *Cluster, rec *recorder, log *zap.Logger) *workload {
	w := &workload{cfg: cfg, queues: queues, c: c, rec: rec, log: log, nodeAt: map[string]string{}}
	for _, n := range c.Nodes {
		w.nodeAt[n.Addr()] = n.ID
	}
	return w
}

// deliveryOf records message m, handed to consumer from queue q of a
// consumer subscribed to topic own, at now (ms since the run started).
func deliveryOf(consumer string, q client.MessageQueue, own string, m *client.MessageExt, now float64, nodeAt map[string]string) Delivery {
	v, ok := decodeBody(m.Body)
	d := Delivery{Consumer: consumer, Value: v, Broker: q.BrokerName, Queue: int(m.QueueID), Offset: m.QueueOffset, AtMs: now, Intact: ok,
		Reconsume: m.ReconsumeTimes, CommitLogOffset: m.CommitLogOffset, ServedBy: m.ServedBy}
	if q.Topic != own {
		d.Topic = q.Topic
	}
	if id, known := nodeAt[m.ServedBy]; known {
		d.ServedBy = id
	}
	return d
}

// ackCommitLogOffset is the CommitLog offset an acknowledged send's offset
// msgId names (0 when it names none).
func ackCommitLogOffset(res *client.SendResult) int64 {
	id, err := wire.ParseMessageID(res.OffsetMsgID)
	if err != nil {
		return 0
	}
	return id.Offset
}

// startProducers creates the producers and sends one warm-up message per
// producer until it succeeds, so the topic exists (auto-created through
// TBW102) before consumers subscribe.
func (w *workload) startProducers(ctx context.Context) error {
	if w.c.Groups() > 1 {
		if err := w.createTopic(ctx); err != nil {
			return err
		}
	}
	for i := 0; i < w.cfg.Producers; i++ {
		idem := i%2 == 1
		p, err := client.NewProducer(
			client.NameServers(w.c.NamesrvAddr()),
			client.ProducerGroup(fmt.Sprintf("JepsenProducer%d", i)),
			client.InstanceName(fmt.Sprintf("jepsen-p%d", i)),
			client.Idempotent(idem),
			client.AutoCreateTopic(true, w.queues),
			client.SendTimeout(w.cfg.SendTimeout),
			// A frozen (SIGSTOPped) leader answers nothing and resets no
			// connection: without a per-attempt bound every closed-loop
			// worker waits out the whole SendTimeout on it, and the pause
			// shows no ack at all.
			client.AttemptTimeout(w.cfg.AttemptTimeout),
			client.RouteRefreshInterval(time.Second),
			client.WithLogger(w.log.Named(fmt.Sprintf("p%d", i))),
		)
		if err != nil {
			return err
		}
		if err := p.Start(ctx); err != nil {
			return err
		}
		w.prod = append(w.prod, p)
	}
	deadline := time.Now().Add(30 * time.Second)
	for i, p := range w.prod {
		for seq := 0; ; seq++ {
			err := w.send(ctx, p, fmt.Sprintf("p%d-warm-%d", i, seq), fmt.Sprintf("p%d-warm", i), i%2 == 1)
			if err == nil {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("%w: warm-up send: %v", ErrNotReady, err)
			}
		}
	}
	return w.startTxnProducers(ctx)
}

// createTopic creates Topic on every group's leader. Auto-creation would
// put it on whichever group the first send reached only: once the topic
// has a route the producer stops looking at TBW102's.
func (w *workload) createTopic(ctx context.Context) error {
	a, err := client.NewAdmin(client.NameServers(w.c.NamesrvAddr()), client.WithLogger(w.log.Named("admin")))
	if err != nil {
		return err
	}
	defer a.Close(context.Background())
	spec := client.TopicSpec{Topic: Topic, ReadQueueNums: w.queues, WriteQueueNums: w.queues}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		done, err := a.CreateTopic(cctx, spec, ClusterName, "")
		cancel()
		if err == nil && len(done) == w.c.Groups() {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%w: creating %s on %d groups: created on %v: %v", ErrNotReady, Topic, w.c.Groups(), done, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// send performs and records one operation.
func (w *workload) send(ctx context.Context, p *client.Producer, value, process string, idem bool) error {
	msg := &client.Message{Topic: Topic, Body: encodeBody(value)}
	msg.Keys = []string{value}
	inv := time.Now()
	sctx, cancel := context.WithTimeout(ctx, w.cfg.SendTimeout)
	res, err := p.SendSync(sctx, msg)
	cancel()
	o := Op{Process: process, Value: value, Idempotent: idem, InvokeMs: w.rec.since(inv), CompleteMs: w.rec.since(time.Now()), Queue: -1, Offset: -1}
	if acked, why := sendOutcome(res, err); acked {
		o.Result, o.Broker, o.Queue, o.Offset = ResultOK, res.Queue.BrokerName, res.Queue.QueueID, res.QueueOffset
		o.CommitLogOffset = ackCommitLogOffset(res)
	} else {
		o.Result, o.Err = ResultUnknown, why
	}
	w.rec.op(o)
	return err
}

// sendOutcome says whether a send was acknowledged: SEND_OK reached the
// client. A stored send with another status (FLUSH_DISK_TIMEOUT,
// FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE: SendSync returns those
// without an error, as RocketMQ's clients do) was not made durable and
// may legitimately be lost, so it is an unknown outcome, as an error is.
func sendOutcome(res *client.SendResult, err error) (acked bool, why string) {
	switch {
	case err != nil:
		return false, err.Error()
	case res.Status != client.SendOK:
		return false, "stored with status " + res.Status.String()
	}
	return true, ""
}

// runProducers sends until ctx ends; returns once every worker stopped.
func (w *workload) runProducers(ctx context.Context) {
	total := len(w.prod) * w.cfg.WorkersPerProducer
	var interval time.Duration
	if w.cfg.OpsPerSecond > 0 {
		interval = time.Duration(total) * time.Second / time.Duration(w.cfg.OpsPerSecond)
	}
	for i, p := range w.prod {
		for k := 0; k < w.cfg.WorkersPerProducer; k++ {
			w.wg.Add(1)
			go func(i, k int, p *client.Producer) {
				defer w.wg.Done()
				proc := fmt.Sprintf("p%d-w%d", i, k)
				next := time.Now()
				for seq := 0; ctx.Err() == nil; seq++ {
					_ = w.send(ctx, p, fmt.Sprintf("%s-%d", proc, seq), proc, i%2 == 1)
					if interval > 0 {
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
			}(i, k, p)
		}
	}
	w.runTxnProducers(ctx)
	w.wg.Wait()
}

// startConsumers starts the push consumers of ConsumerGroup, recording
// every delivery.
func (w *workload) startConsumers(ctx context.Context) error {
	for i := 0; i < w.cfg.Consumers; i++ {
		name := fmt.Sprintf("c%d", i)
		c, err := client.NewPushConsumer(
			client.NameServers(w.c.NamesrvAddr()),
			client.ConsumerGroup(ConsumerGroup),
			client.InstanceName("jepsen-"+name),
			client.ConsumeFrom(client.ConsumeFromFirstOffset),
			client.RebalanceInterval(2*time.Second),
			client.PersistInterval(time.Second),
			client.PullBackoff(500*time.Millisecond),
			client.RouteRefreshInterval(time.Second),
			client.WithLogger(w.log.Named(name)),
		)
		if err != nil {
			return err
		}
		if err := c.Subscribe(Topic, "*"); err != nil {
			return err
		}
		err = c.RegisterConcurrentListener(func(_ context.Context, cc *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
			now := w.rec.since(time.Now())
			for _, m := range msgs {
				w.rec.delivery(deliveryOf(name, cc.Queue, Topic, m, now, w.nodeAt))
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
	}
	return nil
}

// finalRead pulls every queue on every running node, from that node's own
// minimum offset, without committing anything, recording what each node
// holds and the range it covered (ReadRange). Followers serve pulls too;
// whatever a node returns is checked.
func (w *workload) finalRead(ctx context.Context, queues int) error {
	var reads []Read
	var ranges []ReadRange
	var errs []error
	for _, n := range w.c.Nodes {
		if n.State() != NodeRunning {
			continue
		}
		r, rr, err := w.readTopic(ctx, n, Topic, queues)
		reads, ranges = append(reads, r...), append(ranges, rr...)
		if err != nil {
			errs = append(errs, fmt.Errorf("final read: %w", err))
		}
	}
	w.rec.mu.Lock()
	w.rec.h.Reads = append(w.rec.h.Reads, reads...)
	w.rec.h.ReadRanges = append(w.rec.h.ReadRanges, ranges...)
	w.rec.mu.Unlock()
	return errors.Join(errs...)
}

// close stops every client.
func (w *workload) close() {
	w.closeChaos()
	for _, c := range w.cons {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = c.Close(ctx)
		cancel()
	}
	for _, p := range w.prod {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = p.Close(ctx)
		cancel()
	}
	w.closeTxnProducers()
}
