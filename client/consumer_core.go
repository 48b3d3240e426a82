package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// lockMaxLiveTime is how long the client trusts a queue lock it has not
// renewed (RocketMQ REBALANCE_LOCK_MAX_LIVE_TIME); brokers expire them at
// 60 s, renewals run every 20 s.
const lockMaxLiveTime = 30 * time.Second

// queueHooks is what differs between the push and the lite pull consumer
// once a queue is assigned: how its messages are delivered, and whether
// queues need broker locks (orderly).
type queueHooks struct {
	consumeType string
	orderly     bool
	// deliver hands pulled messages on; it may block (the pull loop then
	// waits) and returns false when the queue was dropped meanwhile.
	deliver func(pq *processQueue, msgs []*MessageExt) bool
	// started is called once a queue's process queue exists, before its
	// pull loop runs (the orderly consumer starts its consume goroutine).
	started func(pq *processQueue)
	// direct runs the listener on one message for CONSUME_MESSAGE_DIRECTLY
	// (consumer_direct.go); nil for the lite pull consumer.
	direct func(ctx context.Context, m *MessageExt, mq MessageQueue) wire.ConsumeMessageDirectlyResult
	// handedOver runs first when a queue is handed over (the lite pull
	// consumer forgets what Poll returned of it); nil for none.
	handedOver func(mq MessageQueue)
	// reset runs when a broker's reset restarts a queue at off, once its
	// process queue was dropped and before off is stored (the lite pull
	// consumer takes off as what Poll returned of it, as Seek does, after
	// any Poll of the queue in progress); nil for none.
	reset func(mq MessageQueue, off int64)
}

// consumerCore is the machinery both consumer types share: remoting
// client, routes, offset store, subscriptions, the process-queue table,
// the rebalance / heartbeat / persist / route-refresh / lock loops and one
// pull loop per assigned queue. Every goroutine is started through c.goTracked
// and ends when c.ctx is cancelled; close waits for them.
type consumerCore struct {
	cfg      consumerConfig
	log      *zap.Logger
	clientID string
	hooks    queueHooks

	rc     *remoting.Client
	routes *routeManager
	store  OffsetStore

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// listeners holds the goroutines that run the listener (goListener
	// and the push consumer's pool).
	listeners selfWaits
	// lockWaiters counts the goroutines awaitCalls leaves waiting for a
	// queue's listener calls; close waits for them after wg.
	lockWaiters sync.WaitGroup
	// closeDone is closed when a close ends; set by a start that
	// succeeded (awaitClosed). Guarded by mu.
	closeDone chan struct{}
	// directCalls holds the remoting handlers running the listener on a
	// message to consume directly (consumeDirectlyHandler): closing the
	// connections waits for them (closeConns).
	directCalls selfWaits

	rebalanceCh chan struct{}
	refreshCh   chan string
	// heartbeatCh wakes the heartbeat loop (see start).
	heartbeatCh chan struct{}

	// rebalanceMu serializes rebalances and hand-overs.
	rebalanceMu sync.Mutex

	mu       sync.Mutex
	subs     map[string]*SubscriptionData   // guarded by mu; topic → subscription
	pqs      map[MessageQueue]*processQueue // guarded by mu
	assigned map[MessageQueue]bool          // guarded by mu; Assign mode: fixed queues (nil = rebalance)
	seeks    map[MessageQueue]int64         // guarded by mu; lite pull: offset to start a queue at
	warned   map[string]bool                // guarded by mu; warn once per condition
	pulls    map[*processQueue]*pullCall    // guarded by mu; long polls in flight
	closing  bool                           // guarded by mu; close has begun
	// unstarted holds the queues whose start offset could not be read
	// (startQueue), starting counts start-offset reads in flight per
	// broker group: a leader learned for the group retries them.
	unstarted map[MessageQueue]bool // guarded by mu
	starting  map[string]int        // guarded by mu
	// releasing holds the orderly queues handed over while a listener
	// call on them still ran: they keep their broker lock and are not
	// taken back until it returns (handOver).
	releasing map[MessageQueue]bool // guarded by mu
	// restarting holds the orderly queues a reset or restart dropped
	// while a listener call on them still ran: once it returned, a
	// rebalance starts them at c.seeks or hands them over (restartAt).
	restarting map[MessageQueue]bool // guarded by mu
	// unsettled holds the orderly queues handed over whose offset no
	// broker confirmed yet, each with the time until which it keeps its
	// broker lock (lockAll renews it) unless a persist round settles the
	// offset first (unlockSettled): released, the next owner would start
	// at the older committed offset and consume the range again.
	unsettled map[MessageQueue]time.Time // guarded by mu
	// releaseMu orders lockAll's renewals with the unlock of a releasing
	// or unsettled queue; taken before mu and pendingMu.
	releaseMu sync.Mutex

	startedAt time.Time // set by start; GET_CONSUMER_RUNNING_INFO reports it

	// pending holds the queues whose offset the store holds and no broker
	// has confirmed yet (consumer_offsets.go): a Commit's the lite pull
	// consumer could not send, and every queue handed over until a broker
	// took its offset. Only the offset store's locks are taken inside it.
	pendingMu  sync.Mutex
	pending    map[MessageQueue]pendingOffset // guarded by pendingMu
	pendingSeq uint64                         // guarded by pendingMu; numbers the entries
	// sending holds a token per broker group, held while sendGroup sends
	// to it: brokers keep the last offset they are sent, so one send's
	// older offset must not reach a broker after another's newer one, and
	// the pending entries those confirmed would be gone. One per group, so
	// a group that does not answer holds up no other; a group's token
	// leaves the table once no send holds or waits for it (sendToken), so
	// groups that left the cluster leave nothing behind.
	sendingMu sync.Mutex
	sending   map[string]*sendToken // guarded by sendingMu
	// beforePersist, when set (tests, before start), runs at the start of
	// each persist round.
	beforePersist func()
}

func newConsumerCore(cfg consumerConfig, name string, hooks queueHooks) *consumerCore {
	c := &consumerCore{
		cfg:         cfg,
		clientID:    newClientID(cfg.common.clientIP, cfg.common.instanceName),
		hooks:       hooks,
		rebalanceCh: make(chan struct{}, 1),
		heartbeatCh: make(chan struct{}, 1),
		refreshCh:   make(chan string, 16),
		subs:        map[string]*SubscriptionData{},
		pqs:         map[MessageQueue]*processQueue{},
		seeks:       map[MessageQueue]int64{},
		warned:      map[string]bool{},
		pulls:       map[*processQueue]*pullCall{},
		unstarted:   map[MessageQueue]bool{},
		starting:    map[string]int{},
		releasing:   map[MessageQueue]bool{},
		restarting:  map[MessageQueue]bool{},
		unsettled:   map[MessageQueue]time.Time{},
		pending:     map[MessageQueue]pendingOffset{},
		sending:     map[string]*sendToken{},
	}
	c.log = cfg.common.log.Named(name).With(zap.String("group", cfg.group), zap.String("clientID", c.clientID))
	return c
}

// subscribe records a tag subscription (before start).
func (c *consumerCore) subscribe(topic, expr string) error {
	return c.subscribeSelector(topic, Tags(expr))
}

// subscribeSelector records a subscription (before start).
func (c *consumerCore) subscribeSelector(topic string, sel MessageSelector) error {
	if err := validateTopic(topic); err != nil {
		return fmt.Errorf("%w: subscribe: %v", ErrInvalidOption, err)
	}
	sd, err := buildSubscription(topic, sel, c.cfg.common.now().UnixMilli())
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.subs[topic] = sd
	return nil
}

func (c *consumerCore) subscription(topic string) *SubscriptionData {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subs[topic]
}

func (c *consumerCore) topics() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.subs))
}

// start builds the machinery, checks every subscribed topic has a route
// (as the official clients do: a typo must fail Start, not consume
// nothing), sends the first heartbeats and rebalances once.
func (c *consumerCore) start(ctx context.Context) error {
	// A Start that failed after this returned (LitePullConsumer.Start)
	// closed the core; a later Start must start its goroutines again.
	c.mu.Lock()
	c.closing = false
	c.mu.Unlock()
	c.rc = remoting.NewClient(remoting.ClientConfig{DefaultTimeout: c.cfg.common.requestTimeout, TLS: c.cfg.common.tls.cfg}, c.cfg.common.log)
	c.cfg.common.sign(c.rc)
	c.routes = newRouteManager(c.rc, c.log.Named("route"), c.cfg.common.nameServers, c.cfg.common.requestTimeout, c.cfg.common.now)
	c.routes.onAddrChange = c.movePulls
	if c.cfg.model == Broadcasting {
		c.store = NewLocalOffsetStore(filepath.Join(c.cfg.offsetDir, c.cfg.common.instanceName, c.cfg.group, "offsets.json"))
	} else {
		c.store = NewRemoteOffsetStore(c.cfg.group, c.rc, c.routes.brokerAddr)
	}
	if err := c.store.Load(); err != nil {
		_ = c.rc.Close()
		return err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.rc.RegisterProcessor(remoting.RequestNotifyConsumerIDsChanged, func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		if c.followLeaderNotice(req) {
			return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
		}
		c.log.Debug("broker says the group's members changed; rebalancing")
		c.triggerRebalance()
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	})
	c.rc.RegisterProcessor(remoting.RequestResetConsumerClientOffset, c.resetOffsetHandler)
	c.rc.RegisterProcessor(remoting.RequestGetConsumerRunningInfo, c.runningInfoHandler)
	c.rc.RegisterProcessor(remoting.RequestConsumeMessageDirectly, c.consumeDirectlyHandler)
	c.startedAt = c.cfg.common.now()
	for _, topic := range c.topics() {
		if _, err := c.routes.refresh(ctx, topic, false, 0); err != nil {
			if isRetryTopic(topic) && errors.Is(err, ErrNoRoute) {
				// Brokers create a group's retry topic when its first
				// heartbeat arrives; rebalancing picks it up later.
				continue
			}
			c.cancel()
			_ = c.rc.Close()
			return fmt.Errorf("client: consumer start: route of subscribed topic %q: %w", topic, err)
		}
	}
	if err := c.checkSubscriptions(ctx); err != nil {
		c.cancel()
		_ = c.rc.Close()
		return err
	}
	// From here on a route with other members (a member that joined, by
	// addMember or replaceMember, or came back) is heartbeaten at once: it
	// could otherwise lead the group for up to a heartbeat interval without
	// knowing the consumer, leaving it out of the group's consumer list and
	// of the new leader's notices. The first routes' members get theirs now.
	c.routes.onMembersChange = func(string) { wake(c.heartbeatCh) }
	c.sendHeartbeats(ctx)
	c.startConnHeartbeats()
	c.mu.Lock()
	c.closeDone = make(chan struct{})
	c.mu.Unlock()
	c.goTracked(c.rebalanceLoop)
	// Heartbeats, offset commits and (orderly) lock renewal
	// (RebalanceImpl.lockAll) each run on their own interval.
	c.goTracked(func() { every(c.ctx, c.cfg.heartbeatInterval, c.heartbeatCh, c.sendHeartbeats) })
	c.goTracked(func() { every(c.ctx, c.cfg.persistInterval, nil, c.persistAll) })
	c.goTracked(c.refreshLoop)
	if c.hooks.orderly && c.cfg.model == Clustering {
		c.goTracked(func() { every(c.ctx, c.cfg.lockInterval, nil, c.lockAll) })
	}
	c.triggerRebalance()
	return nil
}

// goTracked starts f as a goroutine close waits for; once close has begun
// it starts nothing (a seek or broker reset racing with Close).
func (c *consumerCore) goTracked(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	c.wg.Add(1)
	go func() { defer c.wg.Done(); f() }()
}

// goListener is goTracked for a goroutine that runs the listener: a Close
// the listener makes does not wait for it (selfWaits).
func (c *consumerCore) goListener(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	c.wg.Add(1)
	go c.listeners.run(&c.wg, f)
}

// close stops every loop and pull, waits for them, commits offsets,
// releases orderly locks, leaves the group at every broker, and closes the
// connections. ctx bounds the wait; when it ends before the goroutines
// do, close still drops the queues and returns ctx's error, joined with
// any failure of what follows. The commit, unlocks and unregistering get
// at least the request timeout (lastWords), as RocketMQ's shutdown always
// persists the consumed offsets: skipped, what was consumed here would be
// consumed again by the queues' next owner.
func (c *consumerCore) close(ctx context.Context) error {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.cancel()
	// Whatever still runs has been cancelled; what follows is safe beside
	// it (the store and the tables are locked, requests on closed
	// connections fail).
	waitErr := waitGroup(ctx, &c.wg)
	if waitErr == nil && !c.listeners.mine() {
		// Called by the listener, close cannot wait for them: one may
		// wait for the caller's own call. They end once it returned.
		waitErr = waitGroup(ctx, &c.lockWaiters)
	}
	c.mu.Lock()
	pqs := slices.Collect(maps.Values(c.pqs))
	c.pqs = map[MessageQueue]*processQueue{}
	// Orderly queues waiting to restart hold their new offset, which a
	// broker may not have taken, and, once their call returned, their
	// broker lock: settled as owned queues are.
	var restarting, busy []MessageQueue
	for mq := range c.restarting {
		restarting = append(restarting, mq)
		if c.releasing[mq] {
			busy = append(busy, mq) // close gave up waiting for its call
		}
	}
	c.mu.Unlock()
	mqs := make([]MessageQueue, 0, len(pqs)+len(restarting))
	for _, pq := range pqs {
		pq.drop()
		mqs = append(mqs, pq.mq)
	}
	mqs = append(mqs, restarting...)
	ctx, cancel := lastWords(ctx, c.cfg.common.requestTimeout)
	defer cancel()
	var errs []error
	settled, err := c.closeCommit(ctx, mqs)
	if err != nil {
		errs = append(errs, fmt.Errorf("client: commit offsets on close: %w", err))
	}
	if c.hooks.orderly && c.cfg.model == Clustering {
		// Only the queues whose offset a broker took are unlocked, with
		// the queues handed over that unsettledDone releases (kept offset
		// settled by a round before, or held the broker's lock life
		// already): the others' locks expire at the brokers (60 s), so
		// their next owner does not start at an older committed offset.
		c.mu.Lock()
		unsettled := maps.Clone(c.unsettled)
		c.mu.Unlock()
		unlock := c.unsettledDone(unsettled)
		for _, mq := range slices.AppendSeq(slices.Clone(mqs), maps.Keys(unsettled)) {
			if settled[mq] && !slices.Contains(unlock, mq) && !slices.Contains(busy, mq) {
				unlock = append(unlock, mq)
			}
		}
		for broker, qs := range byBroker(unlock) {
			if addr := c.routes.brokerAddr(broker); addr != "" {
				if err := unlockQueues(ctx, c.rc, broker, addr, c.cfg.group, c.clientID, qs); err != nil {
					c.log.Warn("unlock queues on close", zap.String("broker", broker), zap.Error(err))
				}
			}
		}
	}
	for _, b := range c.brokerMembers() {
		if err := unregisterClient(ctx, c.rc, b.name, b.addr, c.clientID, c.cfg.group); err != nil {
			c.log.Debug("unregister client", zap.String("broker", b.addr), zap.Error(err))
		}
	}
	if err := c.closeConns(ctx); err != nil {
		errs = append(errs, err)
	}
	c.mu.Lock()
	if c.closeDone != nil {
		close(c.closeDone)
		c.closeDone = nil
	}
	c.mu.Unlock()
	return errors.Join(append([]error{waitErr}, errs...)...)
}

// awaitClosed is a Close after the first: it waits within ctx for the
// close in progress to end (its commit sent), so that a program closing
// its consumer from a listener and again before it exits loses no
// commit. Called by the listener, which that close may wait for, it does
// not wait.
func (c *consumerCore) awaitClosed(ctx context.Context) error {
	c.mu.Lock()
	done := c.closeDone
	c.mu.Unlock()
	if done == nil || c.listeners.mine() || c.directCalls.mine() {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeConns closes the connections within ctx. That waits for their
// request handlers, among them a listener consuming a message directly,
// which Close cannot stop: when ctx ends first, or the caller is that
// listener, they close once it returned.
func (c *consumerCore) closeConns(ctx context.Context) error {
	if c.directCalls.mine() {
		go func() { _ = c.rc.Close() }()
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- c.rc.Close() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
			return fmt.Errorf("client: connections close once the listener consuming a message directly returns: %w", ctx.Err())
		}
	}
}

// lastWords is the context of the requests a closing client must still
// make (commit, unlock, unregister): ctx while it has d left, else one that
// ends d from now whatever ctx does, so that one bounded attempt is made.
func lastWords(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ctx.Err() == nil && (!ok || time.Until(dl) >= d) {
		return ctx, func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

func byBroker(mqs []MessageQueue) map[string][]MessageQueue {
	out := map[string][]MessageQueue{}
	for _, mq := range mqs {
		out[mq.BrokerName] = append(out[mq.BrokerName], mq)
	}
	return out
}

// wait sleeps d or until the consumer (or ctx) ends; false means it ended.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (c *consumerCore) triggerRebalance() { wake(c.rebalanceCh) }

// wake signals ch (buffered, capacity 1) without waiting: a loop already
// woken runs once for any number of signals.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// every runs f each d, and at once whenever wakeCh (nil: never) is
// signalled, until ctx ends.
func every(ctx context.Context, d time.Duration, wakeCh <-chan struct{}, f func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wakeCh:
		}
		f(ctx)
	}
}

// warnOnce logs a condition the first time it is seen, and at debug level
// afterwards, so a broker that is down does not flood the log.
func (c *consumerCore) warnOnce(key, msg string, fields ...zap.Field) {
	c.mu.Lock()
	seen := c.warned[key]
	c.warned[key] = true
	c.mu.Unlock()
	if seen {
		c.log.Debug(msg, fields...)
	} else {
		c.log.Warn(msg, fields...)
	}
}

func (c *consumerCore) clearWarn(key string) {
	c.mu.Lock()
	delete(c.warned, key)
	c.mu.Unlock()
}

func (c *consumerCore) refreshLoop() {
	t := time.NewTicker(c.cfg.common.routeRefreshInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			c.refreshRound()
		case topic := <-c.refreshCh:
			c.refreshTopic(topic)
		}
	}
}

// refreshTopic refreshes topic's route (a failed lookup keeps the cached
// one).
func (c *consumerCore) refreshTopic(topic string) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.common.requestTimeout)
	defer cancel()
	if _, err := c.routes.refresh(ctx, topic, false, 0); err != nil && c.ctx.Err() == nil {
		c.warnOnce("route:"+topic, "route refresh failed", zap.String("topic", topic), zap.Error(err))
	}
}

// refreshRound is one timed round of refreshLoop: every subscribed
// topic's route refreshed, then the broker groups none names any more
// forgotten and the offsets kept for their queues dropped.
func (c *consumerCore) refreshRound() {
	for _, topic := range c.topics() {
		c.refreshTopic(topic)
	}
	c.routes.forgetOffline()
	c.dropOffline()
}

func (c *consumerCore) requestRefresh(topic string) {
	select {
	case c.refreshCh <- topic:
	default:
	}
}

// checkSubscriptions asks each broker group serving a subscription that
// is not a tag one whether it can serve it (CHECK_CLIENT_CONFIG, 46, as
// MQClientInstance.checkClientInBroker): a broker without SQL92 filtering
// or one that cannot compile the expression refuses, and Start fails with
// its reason instead of the consumer receiving nothing. A broker that
// cannot be reached is logged and skipped; its pulls will say the same.
func (c *consumerCore) checkSubscriptions(ctx context.Context) error {
	c.mu.Lock()
	var subs []*SubscriptionData
	for _, t := range slices.Sorted(maps.Keys(c.subs)) {
		if sd := c.subs[t]; !strings.EqualFold(sd.ExpressionType, wire.ExpressionTypeTag) && sd.ExpressionType != "" {
			subs = append(subs, sd)
		}
	}
	c.mu.Unlock()
	for _, sd := range subs {
		for _, name := range c.topicBrokers(sd.Topic) {
			addr := c.routes.brokerAddr(name)
			if addr == "" {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, c.cfg.common.requestTimeout)
			err := checkClientConfig(cctx, c.rc, name, addr, &wire.CheckClientRequestBody{ClientID: c.clientID, Group: c.cfg.group, SubscriptionData: sd})
			cancel()
			var be *BrokerError
			switch {
			case errors.As(err, &be):
				return fmt.Errorf("client: consumer start: broker %s refuses the %s subscription %q of topic %q: %w",
					name, sd.ExpressionType, sd.SubString, sd.Topic, err)
			case err != nil:
				c.log.Warn("cannot check a subscription with a broker; its pulls will report any problem",
					zap.String("broker", addr), zap.String("topic", sd.Topic), zap.Error(err))
			}
		}
	}
	return nil
}

// topicBrokers lists the broker groups in topic's cached route, sorted.
func (c *consumerCore) topicBrokers(topic string) []string {
	c.routes.mu.Lock()
	defer c.routes.mu.Unlock()
	tr := c.routes.topics[topic]
	if tr == nil {
		return nil
	}
	var names []string
	for _, bd := range tr.data.BrokerDatas {
		names = append(names, bd.BrokerName)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

type brokerMember struct{ name, addr string }

// brokerMembers lists every member of every broker group serving a
// subscribed topic. Heartbeats go to all of them, followers included: a
// raftmq follower that becomes leader then already knows the group.
func (c *consumerCore) brokerMembers() []brokerMember {
	return c.routes.members(c.topics())
}

func (c *consumerCore) heartbeatData() *wire.HeartbeatData {
	c.mu.Lock()
	subs := make([]*SubscriptionData, 0, len(c.subs))
	for _, t := range slices.Sorted(maps.Keys(c.subs)) {
		subs = append(subs, c.subs[t])
	}
	c.mu.Unlock()
	return &wire.HeartbeatData{
		ClientID:        c.clientID,
		ProducerDataSet: []wire.HeartbeatProducerData{},
		ConsumerDataSet: []wire.HeartbeatConsumerData{{
			GroupName:           c.cfg.group,
			ConsumeType:         c.hooks.consumeType,
			MessageModel:        c.cfg.model.String(),
			ConsumeFromWhere:    c.cfg.fromWhere.String(),
			SubscriptionDataSet: subs,
		}},
	}
}

// sendHeartbeats sends the heartbeat to every member; a member that is
// down is logged once.
func (c *consumerCore) sendHeartbeats(ctx context.Context) {
	hb := c.heartbeatData()
	for _, b := range c.brokerMembers() {
		cctx, cancel := context.WithTimeout(ctx, c.cfg.common.requestTimeout)
		err := sendHeartbeat(cctx, c.rc, b.name, b.addr, hb)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				c.warnOnce("hb:"+b.addr, "heartbeat failed", zap.String("broker", b.addr), zap.Error(err))
			}
			continue
		}
		c.clearWarn("hb:" + b.addr)
	}
}

// persistAll sends the pending offsets (consumer_offsets.go) and, when
// the consumer commits by itself, those of every owned queue.
func (c *consumerCore) persistAll(ctx context.Context) {
	if c.beforePersist != nil {
		c.beforePersist()
	}
	c.persistPending(ctx)
	c.unlockSettled(ctx)
	if !c.autoCommits() {
		return
	}
	c.mu.Lock()
	mqs := slices.Collect(maps.Keys(c.pqs))
	c.mu.Unlock()
	c.persistOwned(ctx, mqs)
}

// persistOwned is the persist round's send of the offsets of mqs, the
// queues owned when the round began, through sendOffsets: after the
// group's sends in progress, only for the queues still owned or kept (one
// handed over since is its hand-over's to send), and once each (the next
// round sends again; riding out an election here could reach a member
// whose pulls are marked down and lift the mark).
func (c *consumerCore) persistOwned(ctx context.Context, mqs []MessageQueue) {
	if _, err := c.sendOffsets(ctx, mqs, true, true); err != nil && ctx.Err() == nil {
		c.warnOnce("persist", "committing offsets failed", zap.Error(err))
	} else {
		c.clearWarn("persist")
	}
}

// autoCommits reports whether the consumer commits what it consumed by
// itself: push consumers, or lite pull with AutoCommit.
func (c *consumerCore) autoCommits() bool {
	return c.cfg.autoCommit || c.hooks.consumeType == wire.ConsumeTypePush
}

// lockAll renews the broker locks of every queue an orderly consumer holds
// (RebalanceImpl.lockAll), including the queues handed over while their
// listener still runs or waiting for their hand-over (c.releasing) and
// those whose offset no broker confirmed (c.unsettled): the broker frees a
// lock not renewed for 60 s, and the next owner would then consume beside
// the listener, or again.
func (c *consumerCore) lockAll(ctx context.Context) {
	c.unlockSettled(ctx)
	// Held for the whole round so a releasing queue's unlock (handOver)
	// never comes between this round reading c.releasing and its lock
	// request, which would take the lock back until the broker's lock
	// lifetime (60 s) runs out.
	c.releaseMu.Lock()
	defer c.releaseMu.Unlock()
	c.mu.Lock()
	pqs := slices.Collect(maps.Values(c.pqs))
	releasing := slices.AppendSeq(slices.Collect(maps.Keys(c.releasing)), maps.Keys(c.unsettled))
	c.mu.Unlock()
	byB := map[string][]MessageQueue{}
	for _, pq := range pqs {
		byB[pq.mq.BrokerName] = append(byB[pq.mq.BrokerName], pq.mq)
	}
	for _, mq := range releasing {
		byB[mq.BrokerName] = append(byB[mq.BrokerName], mq)
	}
	for broker, mqs := range byB {
		granted, err := c.lock(ctx, broker, mqs)
		if err != nil {
			c.warnOnce("lock:"+broker, "renewing queue locks failed", zap.String("broker", broker), zap.Error(err))
			continue
		}
		now := c.cfg.common.now()
		for _, pq := range pqs {
			if pq.mq.BrokerName == broker {
				pq.setLocked(granted[pq.mq], now)
			}
		}
	}
}

// lock asks brokerName's leader to lock mqs; the answer is the set granted.
func (c *consumerCore) lock(ctx context.Context, brokerName string, mqs []MessageQueue) (map[MessageQueue]bool, error) {
	var got []MessageQueue
	err := c.onBroker(ctx, brokerName, func(ctx context.Context, addr string) error {
		var err error
		got, err = lockQueues(ctx, c.rc, brokerName, addr, c.cfg.group, c.clientID, mqs)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[MessageQueue]bool, len(got))
	for _, mq := range got {
		out[mq] = true
	}
	return out, nil
}

// followLeader learns from a not-leader answer or a failed connection, as
// the producer does (route.go), and asks for a route refresh. It reports
// whether err named a leader worth following, to retry there at once.
func (c *consumerCore) followLeader(brokerName, addr string, err error) (followed bool) {
	followed, _ = c.noteFailure(brokerName, addr, err)
	return followed
}

// noteFailure is followLeader that also reports whether the failure is
// one a leader change explains (see routeManager.noteFailure).
func (c *consumerCore) noteFailure(brokerName, addr string, err error) (followed, retry bool) {
	followed, retry = c.routes.noteFailure(brokerName, addr, err)
	if followed {
		c.retryUnstarted(brokerName)
	}
	if retry {
		for _, topic := range c.topics() {
			c.requestRefresh(topic)
		}
	}
	return followed, retry
}

// followHint learns leader from addr's answer (a not-leader answer, or a
// follower's pull answer) as routeManager.follow does, and reports whether
// it did.
func (c *consumerCore) followHint(brokerName, addr, leader string) bool {
	if !c.routes.follow(brokerName, addr, leader) {
		return false
	}
	c.retryUnstarted(brokerName)
	return true
}

// followLeaderNotice handles a raftmq broker's notice that it became its
// group's leader (wire.ExtLeaderOf, on NOTIFY_CONSUMER_IDS_CHANGED): the
// group is read from there now, and long polls parked at the old leader
// move at once (a frozen leader keeps its connection open and would hold
// them until the poll timeout). Reports whether req was such a notice.
func (c *consumerCore) followLeaderNotice(req *remoting.RemotingCommand) bool {
	name, addr := req.ExtFields[wire.ExtLeaderOf], req.ExtFields[wire.ExtLeaderAddr]
	if name == "" || addr == "" {
		return false
	}
	if c.routes.brokerAddr(name) != addr {
		c.routes.learnLeader(name, "", addr)
	}
	c.retryUnstarted(name)
	return true
}

// retryUnstarted rebalances at once when a queue of brokerName could not
// start, or may not (its start offset is being read, perhaps from the old
// leader), and the group now has a known leader. Without it such a queue
// waits for the rebalance retry (a second at least) though the new leader
// answers within milliseconds. Only a leader learned triggers it, never a
// member marked down: a dead or electing group would otherwise rebalance
// in a loop.
func (c *consumerCore) retryUnstarted(brokerName string) {
	c.mu.Lock()
	retry := c.starting[brokerName] > 0
	for mq := range c.unstarted {
		if mq.BrokerName == brokerName {
			retry = true
			delete(c.unstarted, mq)
		}
	}
	c.mu.Unlock()
	if retry {
		c.triggerRebalance()
	}
}

// isRetryTopic reports whether topic is a group retry topic.
func isRetryTopic(topic string) bool { return strings.HasPrefix(topic, wire.RetryGroupTopicPrefix) }

// maxBrokerHops bounds how often one call follows "not leader, ask X".
const maxBrokerHops = 3

// onBroker runs call against brokerName's current address, following a
// leader a not-leader answer names at once (a raftmq group that changed
// leader), up to maxBrokerHops times.
func (c *consumerCore) onBroker(ctx context.Context, brokerName string, call func(ctx context.Context, addr string) error) error {
	var err error
	for range maxBrokerHops + 1 {
		addr := c.routes.brokerAddr(brokerName)
		if addr == "" {
			return fmt.Errorf("%w: broker group %q", ErrNoQueue, brokerName)
		}
		cctx, cancel := context.WithTimeout(ctx, c.cfg.common.requestTimeout)
		err = call(cctx, addr)
		cancel()
		if err == nil {
			c.routes.markUp(brokerName, addr)
			return nil
		}
		// An answer naming another address moved brokerAddr: to that
		// leader, or past addr (marked down) when the hint was not followed.
		c.followLeader(brokerName, addr, err)
		var be *BrokerError
		if !errors.As(err, &be) || be.LeaderAddr == "" || be.LeaderAddr == addr {
			return err
		}
	}
	return err
}
