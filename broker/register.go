package broker

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// registerService registers this node with every name server (RocketMQ
// BrokerOuterAPI.registerBrokerAll): the topic-config wrapper with its data
// version, every registerNameServerPeriod and at once when the role or the
// topic table changes. The leader registers as brokerId 0, a follower as
// its position in the live Raft configuration + 1 (member.go).
type registerService struct {
	c    *Controller
	kick chan struct{}
	// lost is signalled when a connection to a name server closes: the
	// name server has dropped what was registered through it. lostAddrs
	// names those name servers.
	lost chan struct{}

	mu        sync.Mutex
	lastSent  wire.DataVersion    // guarded by mu
	lastID    int64               // guarded by mu
	lostAddrs map[string]struct{} // guarded by mu
	// registered counts successful registration rounds (tests).
	registered int
	// started and finished count rounds begun and ended; roundDone is
	// closed and replaced as each ends (registerNow waits on it); all
	// guarded by mu.
	started, finished uint64
	roundDone         chan struct{}
}

// reregisterAgainDelay is how long after registering again because a name
// server dropped this node (gossip declared it dead, its connection
// closed) it registers a second time: several gossip rounds, enough for a
// death claim to have reached every name server, and for a name server's
// queued removal to have been applied.
const reregisterAgainDelay = time.Second

// registerRetryMin is the first wait before a failed round is tried again;
// each further failure doubles it, up to registerNameServerPeriod.
const registerRetryMin = time.Second

func newRegisterService(c *Controller) *registerService {
	return &registerService{c: c, kick: make(chan struct{}, 1), lost: make(chan struct{}, 1), lastID: -1,
		roundDone: make(chan struct{})}
}

// connClosed is the registration client's OnConnClose listener. A name
// server drops every broker whose registration came through a connection
// that closes (onChannelDestroy), and the client closes one when a call on
// it times out in silence: waiting for the next period would leave this
// member out of the route for up to registerNameServerPeriod.
func (r *registerService) connClosed(addr string) {
	r.mu.Lock()
	if r.lostAddrs == nil {
		r.lostAddrs = make(map[string]struct{})
	}
	r.lostAddrs[addr] = struct{}{}
	r.mu.Unlock()
	select {
	case r.lost <- struct{}{}:
	default:
	}
}

// registerNowMaxWait bounds how long a topic change's answer waits for its
// registration round: below the clients' request timeouts (the SDK's 3 s,
// mqadmin's 5 s). A round lasts as long as its slowest name server, up to
// registerBrokerTimeoutMills; waiting that long for one that hangs would
// make every client report a failure for a change that was made.
const registerNowMaxWait = 2 * time.Second

// registerTopicChange waits, up to registerNowMaxWait, for a registration
// round that carries a topic change just made.
func (c *Controller) registerTopicChange(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, min(c.cfg.RegisterBrokerTimeoutMills, registerNowMaxWait))
	defer cancel()
	c.reg.registerNow(rctx)
}

// registerNow asks for a round and waits until one that began after the
// call has ended, or until ctx ends. RocketMQ answers a topic change only
// after registering it with every name server (registerIncrementBrokerData),
// so a client that creates a topic and sends to it or subscribes at once
// finds its route; a name server that does not answer in time leaves the
// change to the next rounds, as there.
func (r *registerService) registerNow(ctx context.Context) {
	r.mu.Lock()
	target := r.started + 1
	r.mu.Unlock()
	r.trigger()
	r.awaitFinished(ctx, target)
}

// registerTopicRemoval waits, up to registerNowMaxWait, until every
// registration round begun before the call has ended, then asks for a
// round. A name server keeps a topic's route until a registration changes
// it, and routes it again from any registration that carries it: the
// admin deletes the topic from the name servers once the brokers have
// answered (mqadmin deleteTopic), so a round that read the topic table
// before the deletion must have been taken before that answer, or the
// deleted topic is routed again for good.
func (c *Controller) registerTopicRemoval(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, min(c.cfg.RegisterBrokerTimeoutMills, registerNowMaxWait))
	defer cancel()
	r := c.reg
	r.mu.Lock()
	target := r.started
	r.mu.Unlock()
	r.awaitFinished(rctx, target)
	r.trigger()
}

// awaitFinished waits until round target has ended, or ctx ends.
func (r *registerService) awaitFinished(ctx context.Context, target uint64) {
	for {
		r.mu.Lock()
		done, ended := r.finished >= target, r.roundDone
		r.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return
		case <-r.c.quit:
			return
		}
	}
}

// trigger asks for a registration round now; it never blocks.
func (r *registerService) trigger() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *registerService) run() {
	period := time.NewTicker(r.c.cfg.RegisterNameServerPeriod)
	defer period.Stop()
	check := time.NewTicker(r.c.cfg.TopicChangeCheckInterval)
	defer check.Stop()
	// A node its gossip peers may have declared dead (it refuted a claim,
	// or stood still long enough to be suspected) may have been dropped
	// from the name servers' routes; it registers again at once, not a
	// period later. The claim may still be on its way to a name server
	// that drops the node after that registration, so it registers once
	// more when the claim has had time to spread. Gossip owns telling
	// when (ha.Gossip.MaybeDeclaredDead); this loop only registers.
	var maybeDead <-chan struct{}
	var againT <-chan time.Time
	if r.c.gossip != nil {
		maybeDead = r.c.gossip.MaybeDeclaredDead()
	}
	// A round some name server did not take is tried again after a
	// back-off (registerRetryMin, doubling up to the period) instead of
	// a period later; RocketMQ waits for the period, which at start-up or
	// after a lost connection leaves the member out of the route for that
	// long. Only the retries double it: other rounds failing meanwhile
	// (the second registration after a lost connection, a topic change)
	// leave a pending retry where it is, or a name server restart of a
	// few seconds would push the next try many seconds past its return.
	var retryT <-chan time.Time
	var backoff time.Duration
	var failing []string // the name servers the last round did not reach
	suspect := make(map[string]bool)
	register := func() {
		failing = r.registerAll()
		for ns := range suspect {
			if !slices.Contains(failing, ns) {
				delete(suspect, ns)
			}
		}
		if len(failing) == 0 {
			retryT, backoff = nil, 0
			return
		}
		if retryT != nil {
			return
		}
		backoff = min(max(2*backoff, registerRetryMin), r.c.cfg.RegisterNameServerPeriod)
		retryT = time.After(backoff)
	}
	// A closed connection to a name server registers again at once,
	// whatever back-off another name server is under. A name server that
	// refused the round its closed connection brought (suspect: it may
	// close every connection) is left to the retry's back-off, and such
	// rounds are at least registerRetryMin apart, so none is hammered.
	var lostT <-chan time.Time
	var lostAt time.Time
	var lost []string
	registerLost := func() {
		lostT, lostAt = nil, time.Now()
		r.c.log.Info("name server connection closed; registering again", zap.Strings("namesrv", lost))
		register()
		// The name server may drop this member for the closed connection
		// after that registration (RocketMQ's onChannelDestroy queues the
		// removal without checking the channel again).
		againT = time.After(reregisterAgainDelay)
		for _, ns := range lost {
			suspect[ns] = slices.Contains(failing, ns)
		}
		lost = nil
	}
	register()
	for {
		select {
		case <-r.c.quit:
			return
		case <-maybeDead:
			r.c.log.Info("gossip peers may have declared this node dead; registering again")
			register()
			againT = time.After(reregisterAgainDelay)
		case <-againT:
			againT = nil
			register()
		case <-r.kick:
			register()
		case <-period.C:
			register()
		case <-retryT:
			retryT = nil
			register()
		case <-r.lost:
			for _, ns := range r.takeLost() {
				if !suspect[ns] && !slices.Contains(lost, ns) {
					lost = append(lost, ns)
				}
			}
			if len(lost) == 0 || lostT != nil {
				continue
			}
			if wait := registerRetryMin - time.Since(lostAt); wait > 0 {
				lostT = time.After(wait)
				continue
			}
			registerLost()
		case <-lostT:
			registerLost()
		case <-check.C:
			// Topic changes made on the leader reach followers through
			// Apply; poll the data version so every node re-registers.
			dv := r.c.rep.State().TopicsDataVersion()
			id := r.brokerID()
			r.mu.Lock()
			moved := r.lastID != id
			changed := dv != r.lastSent || moved
			r.mu.Unlock()
			if changed {
				register()
			}
			if moved && id > 0 {
				// The member that held this id may still be routed under
				// it with a longer log (one removed that has not left
				// yet): the name server keeps it then. It leaves once it
				// learns of the change, about when this member does.
				againT = time.After(reregisterAgainDelay)
			}
		}
	}
}

// takeLost empties and returns the name servers whose connection closed.
func (r *registerService) takeLost() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	lost := make([]string, 0, len(r.lostAddrs))
	for ns := range r.lostAddrs {
		lost = append(lost, ns)
	}
	r.lostAddrs = nil
	return lost
}

// brokerID is the id to register under: 0 while leading, otherwise the
// member's slot in the live Raft configuration; -1 while this node is not
// in it (removed, or joining and not added yet), when it does not
// register.
func (r *registerService) brokerID() int64 {
	if r.c.rep.IsLeader() {
		return wire.MasterID
	}
	if id, ok := memberBrokerIDOf(r.c.rep, &r.c.cfg, r.c.cfg.Raft.DLegerSelfID); ok {
		return id
	}
	return -1
}

// followerSlot is brokerID for a follower, with the state version it
// registers under: its last log index, read after the configuration its
// id comes from (Group.memberSlot); 0 for replicas without a Raft
// configuration.
func (r *registerService) followerSlot() (int64, int64) {
	if sv, ok := r.c.rep.(memberSlotVersioner); ok {
		bid, ci, ok := sv.memberSlot(r.c.cfg.Raft.DLegerSelfID)
		if !ok {
			return -1, 0
		}
		return bid, int64(ci)
	}
	return r.brokerID(), 0
}

// body builds the registration body: the replicated topic table plus
// TBW102 when auto-create is on (RocketMQ keeps TBW102 in the table; it
// is registered here instead so it never needs a Raft entry).
func (r *registerService) body() (*wire.RegisterBrokerBody, wire.DataVersion) {
	st := r.c.rep.State()
	dv := st.TopicsDataVersion()
	topics := st.Topics()
	if topics == nil {
		topics = map[string]wire.TopicConfig{}
	}
	for name, tc := range topics {
		// A topic stored with more queues (before the limit) is routed
		// with maxQueueNums: clients allocate one object per routed queue.
		if tc.ReadQueueNums > maxQueueNums || tc.WriteQueueNums > maxQueueNums {
			tc.ReadQueueNums, tc.WriteQueueNums = queueCount(tc.ReadQueueNums), queueCount(tc.WriteQueueNums)
			topics[name] = tc
		}
	}
	if r.c.live().AutoCreateTopicEnable {
		if _, ok := topics[wire.TopicAutoCreate]; !ok {
			n := r.c.live().DefaultTopicQueueNums
			topics[wire.TopicAutoCreate] = wire.TopicConfig{TopicName: wire.TopicAutoCreate, ReadQueueNums: n, WriteQueueNums: n,
				Perm: wire.PermRead | wire.PermWrite | wire.PermInherit, TopicFilterType: "SINGLE_TAG"}
		}
	}
	for _, tc := range r.c.routedSystemTopics() {
		if _, ok := topics[tc.TopicName]; !ok {
			topics[tc.TopicName] = tc
		}
	}
	return &wire.RegisterBrokerBody{
		TopicConfigSerializeWrapper: wire.TopicConfigSerializeWrapper{TopicConfigTable: topics, DataVersion: dv},
		FilterServerList:            []string{},
	}, dv
}

// leaderTermer is implemented by a Replica that knows the term of its
// current leadership (Group).
type leaderTermer interface {
	leaderTerm() uint64
}

// registration is one round's REGISTER_BROKER contents. The brokerId and
// the body's stateVersion are taken together: the name server keeps, for
// one brokerId, the registration with the higher stateVersion, so a
// deposed leader's registration that arrives after its successor's cannot
// take brokerId 0 back.
type registration struct {
	id         int64
	version    int64            // a follower's state version (followerSlot)
	dv         wire.DataVersion // the topic table's version (lastSent)
	raw        []byte
	compressed bool
}

// prepare builds a registration; id is -1 (and raw nil) when this member
// is not in its group's Raft configuration.
func (r *registerService) prepare() (registration, error) {
	body, dv := r.body()
	reg := registration{id: r.brokerID(), dv: dv}
	if reg.id > 0 {
		reg.id, reg.version = r.followerSlot()
	}
	if reg.id < 0 {
		return reg, nil
	}
	if reg.id > 0 {
		body.TopicConfigSerializeWrapper.DataVersion.StateVersion = reg.version
	}
	if reg.id == wire.MasterID {
		// The leadership term orders masters: Raft terms only grow, so the
		// newest leader always carries the highest. Followers send their
		// last log index, past the configuration their id comes from
		// (memberSlot).
		term := r.c.term.Load()
		if lt, ok := r.c.rep.(leaderTermer); ok {
			term = lt.leaderTerm()
		}
		body.TopicConfigSerializeWrapper.DataVersion.StateVersion = int64(term)
	}
	var err error
	reg.raw, reg.compressed, err = encodeRegistration(body, r.c.cfg.CompressedRegister) // register_compress.go
	return reg, err
}

// request is the REGISTER_BROKER request of reg.
func (r *registerService) request(reg registration) *remoting.RemotingCommand {
	h := &wire.RegisterBrokerRequestHeader{
		BrokerName: r.c.cfg.BrokerName, BrokerAddr: r.c.addr, ClusterName: r.c.cfg.BrokerClusterName,
		HAServerAddr: r.c.addr, BrokerID: reg.id, BodyCrc32: int32(wire.BodyCRC32(reg.raw)), Compressed: reg.compressed,
	}
	return remoting.NewRequest(remoting.RequestRegisterBroker, h, reg.raw)
}

// registerAll registers with every name server in parallel. It returns
// the name servers that did not take the registration (every one when it
// could not be encoded; none when there is nothing to register).
func (r *registerService) registerAll() (failed []string) {
	r.mu.Lock()
	r.started++
	round := r.started
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.finished = round
		close(r.roundDone)
		r.roundDone = make(chan struct{})
		r.mu.Unlock()
	}()
	reg, err := r.prepare()
	if err != nil {
		r.c.log.Error("encode registration body", zap.Error(err))
		return r.c.cfg.NameServers()
	}
	id, dv := reg.id, reg.dv
	r.c.kickGossipMeta() // the gossip meta names the same brokerId
	if id < 0 {
		r.c.log.Debug("not registering: this member is not in its group's Raft configuration")
		r.mu.Lock()
		prev := r.lastID
		r.lastSent, r.lastID = dv, id
		r.mu.Unlock()
		if prev >= 0 {
			r.unregisterAll(prev)
		}
		return nil
	}
	var wg sync.WaitGroup
	var mu sync.Mutex // guards failed
	nameServers := r.c.cfg.NameServers()
	for _, ns := range nameServers {
		wg.Add(1)
		go func(ns string) {
			defer wg.Done()
			req := r.request(reg)
			ctx, cancel := context.WithTimeout(r.c.ctx, r.c.cfg.RegisterBrokerTimeoutMills)
			defer cancel()
			resp, err := r.c.regClient.InvokeSync(ctx, ns, req)
			if err == nil && resp.Code != remoting.ResponseSuccess {
				err = remoting.ResponseError(ns, resp)
			}
			if err == nil && registrationIgnored(resp) {
				// Another address holds this brokerId there with a newer
				// state version: a member this one replaced whose record
				// has not gone yet (no close seen, gossip off), or one
				// with a longer log (this member rejoined empty and holds
				// only the snapshot so far); or, for brokerId 0, the
				// group had a leader of a later term within that one's
				// expiry (a group restarted from wiped data counts terms
				// from 1 again). The round is retried on the
				// failed rounds' back-off, so this member is routed
				// seconds after that record goes or its log passes the
				// other's, not a registration period later.
				r.c.log.Info("name server kept another address's newer registration of this brokerId; registering again soon",
					zap.String("namesrv", ns), zap.Int64("brokerId", id))
				mu.Lock()
				failed = append(failed, ns)
				mu.Unlock()
				return
			}
			if err != nil {
				r.c.log.Warn("register with name server failed", zap.String("namesrv", ns), zap.Int64("brokerId", id), zap.Error(err))
				mu.Lock()
				failed = append(failed, ns)
				mu.Unlock()
			}
		}(ns)
	}
	wg.Wait()
	ok := len(nameServers) - len(failed)
	r.mu.Lock()
	r.lastSent, r.lastID = dv, id
	if ok > 0 {
		r.registered++
	}
	r.mu.Unlock()
	r.c.log.Debug("registered", zap.Int64("brokerId", id), zap.Int("nameServers", ok), zap.Int("bytes", len(reg.raw)))
	return failed
}

// registrationIgnored reports whether a name server's SUCCESS to
// REGISTER_BROKER says it ignored the registration (raftmq name servers
// only).
func registrationIgnored(resp *remoting.RemotingCommand) bool {
	var h wire.RegisterBrokerResponseHeader
	return resp.DecodeHeader(&h) == nil && h.Ignored
}
