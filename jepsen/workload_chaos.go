package jepsen

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// The chaos workloads, each on its own topic or group so the main
// workload's checks stay as they are (checker_chaos.go checks them):
//
//   - ordered: one producer, OrderedKeys keys, each key's messages sent one
//     after the other (the next only after the previous returned) to the
//     queue HashSelector picks for the key; one orderly push consumer.
//     Per key, acknowledgements, every replica's stored order and the
//     consumer's first deliveries must follow the send order.
//   - offsets: a committer writes UPDATE_CONSUMER_OFFSET for OffsetQueues
//     queues of group OffsetGroup, each value one higher than the last, to
//     the leader; an observer asks every node QUERY_CONSUMER_OFFSET. A
//     value a follower answered is replicated; the serving leader of that
//     term or a later one must never answer less.
//   - retry: a consumer group with MaxReconsumeTimes RetryMaxReconsume
//     fails every "dlq-" message (retry delay level 1, 1 s) and fails each
//     "retry-" message once: every acknowledged dlq- message must reach
//     %DLQ%RetryGroup, every retry- message must be consumed after one
//     redelivery.
const (
	OrderTopic = "JepsenOrderTopic"
	OrderGroup = "JepsenOrderConsumers"
	// OffsetGroup commits offsets of Topic's queues (no consumer runs in it).
	OffsetGroup = "JepsenOffsetGroup"
	RetryTopic  = "JepsenRetryTopic"
	RetryGroup  = "JepsenRetryConsumers"
	// RetryMaxReconsume is the retry group's redelivery limit: a dlq-
	// message is delivered RetryMaxReconsume+1 times, then dead-lettered.
	RetryMaxReconsume = 2
)

// OrderOp is one ordered send: key Key's Seq-th message.
type OrderOp struct {
	Op
	Key string `json:"key"`
	Seq int    `json:"seq"`
}

// OffsetCommitOp is one UPDATE_CONSUMER_OFFSET of OffsetGroup.
type OffsetCommitOp struct {
	Node       string  `json:"node"`
	Queue      int     `json:"queue"`
	Value      int64   `json:"value"`
	InvokeMs   float64 `json:"invokeMs"`
	CompleteMs float64 `json:"completeMs"`
	Result     string  `json:"result"`
}

// OffsetObs is one QUERY_CONSUMER_OFFSET answer, with the node's Raft state
// polled just before it (StatusMs).
type OffsetObs struct {
	Node       string  `json:"node"`
	State      string  `json:"state"`
	Serving    bool    `json:"serving"`
	Term       uint64  `json:"term"`
	Queue      int     `json:"queue"`
	Value      int64   `json:"value"`
	StatusMs   float64 `json:"statusMs"`
	CompleteMs float64 `json:"completeMs"`
}

// ChaosHistory is the part of History the chaos workloads fill
// (workload_chaos.go).
type ChaosHistory struct {
	OrderOps        []OrderOp        `json:"orderOps,omitempty"`
	OrderDeliveries []Delivery       `json:"orderDeliveries,omitempty"`
	OrderReads      []Read           `json:"orderReads,omitempty"`
	OffsetCommits   []OffsetCommitOp `json:"offsetCommits,omitempty"`
	OffsetObs       []OffsetObs      `json:"offsetObs,omitempty"`
	RetryOps        []Op             `json:"retryOps,omitempty"`
	RetryDeliveries []Delivery       `json:"retryDeliveries,omitempty"`
	// DLQReads is %DLQ%RetryGroup as the final read found it on each node.
	DLQReads []Read `json:"dlqReads,omitempty"`
	// DLQRanges is the span of %DLQ%RetryGroup each node's final read
	// covered; From is that node's own minimum offset (its retention floor).
	DLQRanges []ReadRange `json:"dlqRanges,omitempty"`
	// DLQUnread names the nodes whose %DLQ%RetryGroup read failed: they are
	// not held to the replica check (counted apart, not as absent; the run
	// fails on them).
	DLQUnread []string `json:"dlqUnread,omitempty"`
	// OrderUnread names the nodes whose OrderTopic read failed (the run
	// fails on them).
	OrderUnread []string `json:"orderUnread,omitempty"`
	// OrderRanges is the span of OrderTopic each node's final read covered
	// (none for a node whose read failed); From is that node's retention
	// floor.
	OrderRanges []ReadRange `json:"orderRanges,omitempty"`
	// RetryReads is RetryTopic and %RETRY%RetryGroup (Read.Topic says
	// which) as the final read found them on each node, RetryUnread the
	// nodes where that read failed: the offset-conflict and queue-gap
	// checks compare the replicas' copies.
	RetryReads  []Read   `json:"retryReads,omitempty"`
	RetryUnread []string `json:"retryUnread,omitempty"`
}

func (c *ChaosHistory) clone() ChaosHistory {
	return ChaosHistory{
		OrderOps: append([]OrderOp(nil), c.OrderOps...), OrderDeliveries: append([]Delivery(nil), c.OrderDeliveries...),
		OrderReads: append([]Read(nil), c.OrderReads...), OffsetCommits: append([]OffsetCommitOp(nil), c.OffsetCommits...),
		OffsetObs: append([]OffsetObs(nil), c.OffsetObs...), RetryOps: append([]Op(nil), c.RetryOps...),
		RetryDeliveries: append([]Delivery(nil), c.RetryDeliveries...), DLQReads: append([]Read(nil), c.DLQReads...),
		DLQRanges: append([]ReadRange(nil), c.DLQRanges...), DLQUnread: append([]string(nil), c.DLQUnread...),
		OrderUnread: append([]string(nil), c.OrderUnread...), OrderRanges: append([]ReadRange(nil), c.OrderRanges...),
		RetryReads: append([]Read(nil), c.RetryReads...), RetryUnread: append([]string(nil), c.RetryUnread...),
	}
}

// chaosClients are the chaos workloads' clients.
type chaosClients struct {
	orderProd *client.Producer
	retryProd *client.Producer
	rc        *remoting.Client // offsets committer and observer
	prods     []*client.Producer
	wg        sync.WaitGroup
}

// newProducerFor builds and starts a plain producer with the run's
// timeouts. It is not one of w.prod: runProducers drives every producer
// there with the main workload.
func (w *workload) newProducerFor(ctx context.Context, group string) (*client.Producer, error) {
	p, err := client.NewProducer(
		client.NameServers(w.c.NamesrvAddr()),
		client.ProducerGroup(group),
		client.InstanceName("jepsen-"+group),
		client.AutoCreateTopic(true, w.queues),
		client.SendTimeout(w.cfg.SendTimeout),
		client.AttemptTimeout(w.cfg.AttemptTimeout),
		client.RouteRefreshInterval(time.Second),
		client.WithLogger(w.log.Named(group)),
	)
	if err != nil {
		return nil, err
	}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	w.chaos.prods = append(w.chaos.prods, p)
	return p, nil
}

// newPushConsumerFor builds a push consumer of group on topic with the
// run's settings plus extra options (not started).
func (w *workload) newPushConsumerFor(group, topic string, extra ...client.ConsumerOpt) (*client.PushConsumer, error) {
	opts := []client.ConsumerOpt{
		client.NameServers(w.c.NamesrvAddr()),
		client.ConsumerGroup(group),
		client.InstanceName("jepsen-" + group),
		client.ConsumeFrom(client.ConsumeFromFirstOffset),
		client.RebalanceInterval(2 * time.Second),
		client.PersistInterval(time.Second),
		client.PullBackoff(500 * time.Millisecond),
		client.RouteRefreshInterval(time.Second),
		client.WithLogger(w.log.Named(group)),
	}
	c, err := client.NewPushConsumer(append(opts, extra...)...)
	if err != nil {
		return nil, err
	}
	return c, c.Subscribe(topic, "*")
}

// awaitRoute waits until the name server routes topic. A warm-up send
// auto-creates a topic on the broker, which registers it with the name
// server a moment later; a consumer started in between fails its start
// with ErrNoRoute, as RocketMQ's Go client does.
func (w *workload) awaitRoute(ctx context.Context, topic string) error {
	a, err := client.NewAdmin(client.NameServers(w.c.NamesrvAddr()), client.WithLogger(w.log.Named("admin")))
	if err != nil {
		return err
	}
	defer a.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := a.TopicRoute(cctx, topic)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%w: route of %s: %v", ErrNotReady, topic, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// warm sends until one send succeeds (the first creates the topic).
func warm(ctx context.Context, send func(seq int) error) error {
	deadline := time.Now().Add(30 * time.Second)
	for seq := 0; ; seq++ {
		err := send(seq)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%w: warm-up send: %v", ErrNotReady, err)
		}
	}
}

// startChaos starts the ordered, offsets and retry workloads (each only
// when configured).
func (w *workload) startChaos(ctx context.Context) error {
	if w.cfg.OrderedKeys > 0 {
		if err := w.startOrdered(ctx); err != nil {
			return err
		}
	}
	if w.cfg.OffsetQueues > 0 {
		if err := w.startOffsets(ctx); err != nil {
			return err
		}
	}
	if w.cfg.RetryOpsPerSecond > 0 {
		if err := w.startRetry(ctx); err != nil {
			return err
		}
	}
	return nil
}

// runChaos runs the chaos workloads until ctx ends.
func (w *workload) runChaos(ctx context.Context) {
	x := &w.chaos
	if x.orderProd != nil {
		perKey := time.Duration(w.cfg.OrderedKeys) * time.Second / time.Duration(max(w.cfg.OrderedOpsPerSecond, 1))
		for k := 0; k < w.cfg.OrderedKeys; k++ {
			x.wg.Add(1)
			go func(k int) {
				defer x.wg.Done()
				key := fmt.Sprintf("k%d", k)
				paced(ctx, perKey, func(seq int) { _ = w.sendOrdered(ctx, key, seq) })
			}(k)
		}
	}
	if x.rc != nil {
		x.wg.Add(2)
		go func() { defer x.wg.Done(); w.commitOffsets(ctx) }()
		go func() { defer x.wg.Done(); w.observeOffsets(ctx) }()
	}
	if x.retryProd != nil {
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			paced(ctx, time.Second/time.Duration(w.cfg.RetryOpsPerSecond), func(seq int) {
				kind := "retry"
				if seq%2 == 0 {
					kind = "dlq"
				}
				_ = w.sendRetry(ctx, fmt.Sprintf("%s-%d", kind, seq))
			})
		}()
	}
	x.wg.Wait()
}

// paced calls f(seq) every interval until ctx ends (closed loop: a slow
// call delays the next).
func paced(ctx context.Context, interval time.Duration, f func(seq int)) {
	next := time.Now()
	for seq := 0; ctx.Err() == nil; seq++ {
		f(seq)
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

// --- ordered ---

func (w *workload) startOrdered(ctx context.Context) error {
	p, err := w.newProducerFor(ctx, "JepsenOrderProducer")
	if err != nil {
		return err
	}
	w.chaos.orderProd = p
	if err := warm(ctx, func(seq int) error { return w.sendOrdered(ctx, "warm", seq) }); err != nil {
		return err
	}
	if err := w.awaitRoute(ctx, OrderTopic); err != nil {
		return err
	}
	c, err := w.newPushConsumerFor(OrderGroup, OrderTopic)
	if err != nil {
		return err
	}
	err = c.RegisterOrderlyListener(func(_ context.Context, oc *client.ConsumeOrderlyContext, msgs []*client.MessageExt) client.OrderlyResult {
		now := w.rec.since(time.Now())
		w.rec.mu.Lock()
		for _, m := range msgs {
			w.rec.h.Chaos.OrderDeliveries = append(w.rec.h.Chaos.OrderDeliveries, deliveryOf("order-c", oc.Queue, OrderTopic, m, now, w.nodeAt))
		}
		w.rec.mu.Unlock()
		return client.OrderlySuccess
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

// orderValue is the value of key's seq-th ordered message.
func orderValue(key string, seq int) string { return fmt.Sprintf("o-%s-%d", key, seq) }

// parseOrderValue splits an ordered value into key and seq.
func parseOrderValue(v string) (key string, seq int, ok bool) {
	rest, found := strings.CutPrefix(v, "o-")
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '-')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(rest[i+1:])
	return rest[:i], n, err == nil
}

func (w *workload) sendOrdered(ctx context.Context, key string, seq int) error {
	value := orderValue(key, seq)
	msg := &client.Message{Topic: OrderTopic, Body: encodeBody(value), ShardingKey: key, Keys: []string{value}}
	inv := time.Now()
	sctx, cancel := context.WithTimeout(ctx, w.cfg.SendTimeout)
	res, err := w.chaos.orderProd.SendWithSelector(sctx, msg, client.HashSelector())
	cancel()
	o := OrderOp{Op: Op{Process: "order-" + key, Value: value, InvokeMs: w.rec.since(inv), CompleteMs: w.rec.since(time.Now()), Queue: -1, Offset: -1}, Key: key, Seq: seq}
	if acked, why := sendOutcome(res, err); acked {
		o.Result, o.Broker, o.Queue, o.Offset = ResultOK, res.Queue.BrokerName, res.Queue.QueueID, res.QueueOffset
		o.CommitLogOffset = ackCommitLogOffset(res)
	} else {
		o.Result, o.Err = ResultUnknown, why
	}
	w.rec.mu.Lock()
	w.rec.h.Chaos.OrderOps = append(w.rec.h.Chaos.OrderOps, o)
	w.rec.mu.Unlock()
	return err
}

// --- offsets ---

func (w *workload) startOffsets(ctx context.Context) error {
	a, err := client.NewAdmin(client.NameServers(w.c.NamesrvAddr()), client.WithLogger(w.log.Named("admin")))
	if err != nil {
		return err
	}
	defer a.Close(context.Background())
	sg := wire.SubscriptionGroupConfig{GroupName: OffsetGroup, ConsumeEnable: true, RetryQueueNums: 1, RetryMaxTimes: 16}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := a.UpdateSubscriptionGroup(cctx, sg, ClusterName, "")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%w: creating subscription group %s: %v", ErrNotReady, OffsetGroup, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cfg := remoting.DefaultClientConfig()
	cfg.ConnectTimeout, cfg.DefaultTimeout = time.Second, 2*time.Second
	w.chaos.rc = remoting.NewClient(cfg, w.log.Named("offsets"))
	return nil
}

// commitOffsets commits 1, 2, 3, ... to every queue of OffsetGroup on
// group 0's leader, every 50 ms, until ctx ends.
func (w *workload) commitOffsets(ctx context.Context) {
	leader := -1
	var v int64
	paced(ctx, 50*time.Millisecond, func(int) {
		if leader < 0 || w.c.Nodes[leader].State() != NodeRunning {
			lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			leader = w.c.LeaderOf(lctx, 0)
			cancel()
			if leader < 0 {
				return
			}
		}
		v++
		n := w.c.Nodes[leader]
		for q := 0; q < w.cfg.OffsetQueues; q++ {
			inv := time.Now()
			h := &wire.UpdateConsumerOffsetRequestHeader{ConsumerGroup: OffsetGroup, Topic: Topic, QueueID: int32(q), CommitOffset: v, BrokerName: GroupNameOf(0)}
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			resp, err := w.chaos.rc.InvokeSync(cctx, n.Addr(), remoting.NewRequest(remoting.RequestUpdateConsumerOffset, h, nil))
			cancel()
			o := OffsetCommitOp{Node: n.ID, Queue: q, Value: v, InvokeMs: w.rec.since(inv), CompleteMs: w.rec.since(time.Now()), Result: ResultOK}
			if err != nil || resp.Code != remoting.ResponseSuccess {
				o.Result = ResultUnknown
				leader = -1
			}
			w.rec.mu.Lock()
			w.rec.h.Chaos.OffsetCommits = append(w.rec.h.Chaos.OffsetCommits, o)
			w.rec.mu.Unlock()
			if leader < 0 {
				return
			}
		}
	})
}

// observeOffsets asks every running node of group 0 for its Raft state and
// then OffsetGroup's committed offsets, every 200 ms.
func (w *workload) observeOffsets(ctx context.Context) {
	paced(ctx, 200*time.Millisecond, func(int) {
		for _, i := range w.c.GroupNodes(0) {
			n := w.c.Nodes[i]
			if n.State() != NodeRunning {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			st, err := w.c.RaftStatus(sctx, i)
			cancel()
			if err != nil {
				continue
			}
			statusMs := w.rec.since(time.Now())
			for q := 0; q < w.cfg.OffsetQueues; q++ {
				h := &wire.QueryConsumerOffsetRequestHeader{ConsumerGroup: OffsetGroup, Topic: Topic, QueueID: int32(q), BrokerName: GroupNameOf(0)}
				qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				resp, err := w.chaos.rc.InvokeSync(qctx, n.Addr(), remoting.NewRequest(remoting.RequestQueryConsumerOffset, h, nil))
				cancel()
				if err != nil {
					continue
				}
				off, ok := offsetAnswer(resp)
				if !ok {
					continue
				}
				w.rec.mu.Lock()
				w.rec.h.Chaos.OffsetObs = append(w.rec.h.Chaos.OffsetObs, OffsetObs{Node: n.ID, State: st.State, Serving: st.Serving, Term: st.Term,
					Queue: q, Value: off, StatusMs: statusMs, CompleteMs: w.rec.since(time.Now())})
				w.rec.mu.Unlock()
			}
		}
	})
}

// offsetAnswer reads a QUERY_CONSUMER_OFFSET answer: the committed offset,
// or -1 for QUERY_NOT_FOUND (only a leader says it: the group has no
// offset for the queue there). A leader that lost a replicated commit
// altogether answers that, the worst regression of all (a consumer told
// "none" starts at the queue's end by default), so it is an observation
// like any other. Other answers (not leader, errors) observe nothing.
func offsetAnswer(resp *remoting.RemotingCommand) (int64, bool) {
	switch resp.Code {
	case remoting.ResponseQueryNotFound:
		return -1, true
	case remoting.ResponseSuccess:
		off, err := strconv.ParseInt(resp.ExtFields["offset"], 10, 64)
		return off, err == nil
	}
	return 0, false
}

// --- retry / DLQ ---

func (w *workload) startRetry(ctx context.Context) error {
	p, err := w.newProducerFor(ctx, "JepsenRetryProducer")
	if err != nil {
		return err
	}
	w.chaos.retryProd = p
	if err := warm(ctx, func(seq int) error { return w.sendRetry(ctx, fmt.Sprintf("retry-warm-%d", seq)) }); err != nil {
		return err
	}
	if err := w.awaitRoute(ctx, RetryTopic); err != nil {
		return err
	}
	c, err := w.newPushConsumerFor(RetryGroup, RetryTopic, client.MaxReconsumeTimes(RetryMaxReconsume), client.ConsumeMessageBatchMaxSize(1))
	if err != nil {
		return err
	}
	err = c.RegisterConcurrentListener(func(_ context.Context, cc *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		now := w.rec.since(time.Now())
		res := client.ConsumeSuccess
		w.rec.mu.Lock()
		for _, m := range msgs {
			d := deliveryOf("retry-c", cc.Queue, RetryTopic, m, now, w.nodeAt)
			if strings.HasPrefix(d.Value, "dlq-") || (strings.HasPrefix(d.Value, "retry-") && m.ReconsumeTimes == 0) {
				res = client.ConsumeRetryLater
			} else {
				d.Consumer = "retry-c ok"
			}
			w.rec.h.Chaos.RetryDeliveries = append(w.rec.h.Chaos.RetryDeliveries, d)
		}
		w.rec.mu.Unlock()
		cc.DelayLevel = 1 // 1 s: the default (3 + reconsume times) waits 10 s, 30 s, ...
		return res
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

func (w *workload) sendRetry(ctx context.Context, value string) error {
	msg := &client.Message{Topic: RetryTopic, Body: encodeBody(value), Keys: []string{value}}
	inv := time.Now()
	sctx, cancel := context.WithTimeout(ctx, w.cfg.SendTimeout)
	res, err := w.chaos.retryProd.SendSync(sctx, msg)
	cancel()
	o := Op{Process: "retry", Value: value, InvokeMs: w.rec.since(inv), CompleteMs: w.rec.since(time.Now()), Queue: -1, Offset: -1}
	if acked, why := sendOutcome(res, err); acked {
		o.Result, o.Broker, o.Queue, o.Offset = ResultOK, res.Queue.BrokerName, res.Queue.QueueID, res.QueueOffset
		o.CommitLogOffset = ackCommitLogOffset(res)
	} else {
		o.Result, o.Err = ResultUnknown, why
	}
	w.rec.mu.Lock()
	w.rec.h.Chaos.RetryOps = append(w.rec.h.Chaos.RetryOps, o)
	w.rec.mu.Unlock()
	return err
}

// --- drain and final read ---

// drainChaos waits, up to timeout, until every acknowledged ordered
// message was delivered, every acknowledged retry- message consumed and
// every acknowledged dlq- message found in %DLQ%RetryGroup on some node.
func (w *workload) drainChaos(ctx context.Context, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	dlq := wire.DLQGroupTopicPrefix + RetryGroup
	for {
		h := w.rec.snapshot().Chaos
		missing := 0
		got := map[string]bool{}
		for _, d := range h.OrderDeliveries {
			got[d.Value] = true
		}
		for _, o := range h.OrderOps {
			if o.Result == ResultOK && !got[o.Value] {
				missing++
			}
		}
		okRetry := map[string]bool{}
		for _, d := range h.RetryDeliveries {
			if d.Consumer == "retry-c ok" {
				okRetry[d.Value] = true
			}
		}
		var inDLQ map[string]bool
		for _, o := range h.RetryOps {
			if o.Result != ResultOK {
				continue
			}
			if strings.HasPrefix(o.Value, "retry-") && !okRetry[o.Value] {
				missing++
			}
			if strings.HasPrefix(o.Value, "dlq-") {
				if inDLQ == nil {
					inDLQ = map[string]bool{}
					// Any node: the leader may have removed the DLQ's
					// head by retention (disk pressure) while another
					// node still holds it.
					for _, g := range w.groupsOf(dlqGroups(h)) {
						for _, i := range w.c.GroupNodes(g) {
							if w.c.Nodes[i].State() != NodeRunning {
								continue
							}
							reads, _, _ := w.readTopic(ctx, w.c.Nodes[i], dlq, 1)
							for _, r := range reads {
								inDLQ[r.Value] = true
							}
						}
					}
				}
				if !inDLQ[o.Value] {
					missing++
				}
			}
		}
		if missing == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// orderGroups names the groups the ordered workload used: those that
// acknowledged a send or delivered a message.
func orderGroups(x ChaosHistory) map[string]bool {
	m := map[string]bool{}
	for _, o := range x.OrderOps {
		if o.Result == ResultOK {
			m[o.Broker] = true
		}
	}
	for _, d := range x.OrderDeliveries {
		m[d.Broker] = true
	}
	return m
}

// dlqGroups names the groups that delivered a dlq- message: a send-back
// goes to the group the message was delivered from, so that is where it
// is dead-lettered (and where the checker requires %DLQ% read).
func dlqGroups(x ChaosHistory) map[string]bool {
	m := map[string]bool{}
	for _, d := range x.RetryDeliveries {
		if strings.HasPrefix(d.Value, "dlq-") {
			m[d.Broker] = true
		}
	}
	return m
}

// retryGroups names the groups each of the retry workload's topics was
// used on: RetryTopic where a send was acknowledged or a message of it
// delivered, %RETRY%RetryGroup where one of its redeliveries came from.
func retryGroups(x ChaosHistory) map[string]map[string]bool {
	retry := wire.RetryGroupTopicPrefix + RetryGroup
	m := map[string]map[string]bool{RetryTopic: {}, retry: {}}
	for _, o := range x.RetryOps {
		if o.Result == ResultOK {
			m[RetryTopic][o.Broker] = true
		}
	}
	for _, d := range x.RetryDeliveries {
		if d.Topic == "" {
			m[RetryTopic][d.Broker] = true
		} else if d.Topic == retry {
			m[retry][d.Broker] = true
		}
	}
	return m
}

// groupsOf lists the indexes of the named groups, in order.
func (w *workload) groupsOf(names map[string]bool) []int {
	var out []int
	for g := 0; g < w.c.Groups(); g++ {
		if names[GroupNameOf(g)] {
			out = append(out, g)
		}
	}
	return out
}

// finalReadChaos reads OrderTopic, %DLQ%RetryGroup, RetryTopic and
// %RETRY%RetryGroup on every running node of every group the ordered and
// retry workloads used them on. A topic is
// auto-created on the group the first send reached, so with two groups it
// may live on either or both; the leader of a group without it answers
// TOPIC_NOT_EXIST, which would count as a failed read.
func (w *workload) finalReadChaos(ctx context.Context) error {
	var errs []error
	var orders, dlqs []Read
	var dlqRanges, orderRanges []ReadRange
	var unread, orderUnread []string
	var retries []Read
	var retryUnread []string
	x := w.rec.snapshot().Chaos
	readOrder, readDLQ, readRetry := orderGroups(x), dlqGroups(x), retryGroups(x)
	for _, n := range w.c.Nodes {
		if n.State() != NodeRunning {
			continue
		}
		if w.cfg.OrderedKeys > 0 && readOrder[GroupNameOf(n.Group)] {
			r, rr, err := w.readTopic(ctx, n, OrderTopic, w.queues)
			orders, errs = append(orders, r...), append(errs, err)
			if err != nil {
				orderUnread = append(orderUnread, n.ID)
			} else {
				orderRanges = append(orderRanges, rr...)
			}
		}
		if w.cfg.RetryOpsPerSecond > 0 && readDLQ[GroupNameOf(n.Group)] {
			r, rr, err := w.readTopic(ctx, n, wire.DLQGroupTopicPrefix+RetryGroup, 1)
			dlqs, errs = append(dlqs, r...), append(errs, err)
			if err != nil {
				unread = append(unread, n.ID) // a partial read proves no absence
			} else {
				dlqRanges = append(dlqRanges, rr...)
			}
		}
		// The retry topic's queues and the group's one %RETRY% queue (a
		// subscription group's default retryQueueNums).
		for _, t := range []struct {
			topic  string
			queues int
		}{{RetryTopic, w.queues}, {wire.RetryGroupTopicPrefix + RetryGroup, 1}} {
			if w.cfg.RetryOpsPerSecond == 0 || !readRetry[t.topic][GroupNameOf(n.Group)] {
				continue
			}
			r, _, err := w.readTopic(ctx, n, t.topic, t.queues)
			for i := range r {
				r[i].Topic = t.topic
			}
			retries, errs = append(retries, r...), append(errs, err)
			if err != nil {
				retryUnread = append(retryUnread, n.ID)
			}
		}
	}
	w.rec.mu.Lock()
	w.rec.h.Chaos.OrderReads = append(w.rec.h.Chaos.OrderReads, orders...)
	w.rec.h.Chaos.DLQReads = append(w.rec.h.Chaos.DLQReads, dlqs...)
	w.rec.h.Chaos.DLQRanges = append(w.rec.h.Chaos.DLQRanges, dlqRanges...)
	w.rec.h.Chaos.DLQUnread = append(w.rec.h.Chaos.DLQUnread, unread...)
	w.rec.h.Chaos.OrderUnread = append(w.rec.h.Chaos.OrderUnread, orderUnread...)
	w.rec.h.Chaos.OrderRanges = append(w.rec.h.Chaos.OrderRanges, orderRanges...)
	w.rec.h.Chaos.RetryReads = append(w.rec.h.Chaos.RetryReads, retries...)
	w.rec.h.Chaos.RetryUnread = append(w.rec.h.Chaos.RetryUnread, retryUnread...)
	w.rec.mu.Unlock()
	return errors.Join(errs...)
}

// readTopic pulls queues 0..queues-1 of topic from node n, from its
// minimum offset, without committing, and records the range each queue
// covered. finalRead and the chaos workloads' final reads use it.
func (w *workload) readTopic(ctx context.Context, n *Node, topic string, queues int) ([]Read, []ReadRange, error) {
	rc := remoting.NewClient(remoting.DefaultClientConfig(), w.log.Named("reader"))
	defer rc.Close()
	var reads []Read
	var ranges []ReadRange
	var errs []error
	for q := 0; q < queues; q++ {
		off := int64(0)
		rr := ReadRange{Node: n.ID, Broker: GroupNameOf(n.Group), Queue: q}
		for {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			res, err := client.PullMessage(rctx, rc, n.Addr(), &client.PullRequest{
				Group: "JepsenReader", Queue: client.MessageQueue{Topic: topic, BrokerName: GroupNameOf(n.Group), QueueID: q},
				Offset: off, MaxMsgNums: 32,
			})
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("read %s %s q%d@%d: %w", n.ID, topic, q, off, err))
				break
			}
			if off < res.MinOffset {
				// Retention removed the head of this node's queue (a
				// follower answers "not found" there rather than moving
				// the offset): read what it still holds.
				off = res.MinOffset
				rr.From = off
				continue
			}
			if res.Status != client.PullFound || len(res.Messages) == 0 {
				if res.Status == client.PullOffsetIllegal && res.NextBeginOffset > off {
					off = res.NextBeginOffset
					rr.From = max(rr.From, off)
					continue
				}
				break
			}
			for _, m := range res.Messages {
				v, ok := decodeBody(m.Body)
				reads = append(reads, Read{Node: n.ID, Broker: GroupNameOf(n.Group), Queue: q, Offset: m.QueueOffset, Value: v, Intact: ok, CommitLogOffset: m.CommitLogOffset})
			}
			if res.NextBeginOffset <= off {
				break
			}
			off = res.NextBeginOffset
		}
		rr.To = off
		ranges = append(ranges, rr)
	}
	return reads, ranges, errors.Join(errs...)
}

// closeChaos closes the workloads' producers and remoting client (their
// consumers are in w.cons).
func (w *workload) closeChaos() {
	for _, p := range w.chaos.prods {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = p.Close(ctx)
		cancel()
	}
	w.chaos.prods = nil
	if w.chaos.rc != nil {
		_ = w.chaos.rc.Close()
		w.chaos.rc = nil
	}
}
