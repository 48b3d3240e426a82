package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/raftmq/raftmq/broker/filter"
	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/ha"
	"github.com/raftmq/raftmq/internal/httpmon"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Controller is the broker node's front end (RocketMQ BrokerController):
// the remoting server on listenPort and the VIP server on listenPort-2,
// the request processors (one file per concern), the client and consumer
// tables, long polling, orderly locks, the delay-level schedule service
// and name-server registration. Every write goes through the Replica (the
// Raft group); reads use the local store and the replicated state.
//
// Goroutines are started with goFunc and stopped by cancelling the root
// context (ctx; quit is its Done channel), which also bounds their calls
// to the name servers and the Replica; Shutdown waits for them.
type Controller struct {
	cfg         BrokerConfig
	rep         Replica
	st          *store.MessageStore
	log         *zap.Logger
	addr        string // advertised remoting address (brokerIP1:listenPort)
	storeHost   netip.AddrPort
	delayLevels []time.Duration

	srv      *remoting.Server
	vip      *remoting.Server
	nsClient *remoting.Client
	peers    groupPeers // the name servers' route and the members' RAFT_STATUS, over nsClient
	// logCaughtUp is set once this member led, or held the log up to
	// the commit index its leader reported (/readyz, ready).
	logCaughtUp atomic.Bool
	// regClient carries only REGISTER_BROKER and UNREGISTER_BROKER (as
	// RocketMQ's BrokerOuterAPI has its own client): a name server drops
	// the brokers registered through a connection that closes, and
	// nsClient closes one when any call on it times out in silence (a
	// 1 s route lookup under load).
	regClient *remoting.Client

	clients *clientManager
	// reqs: request-reply's requesters by their request sends (reply.go).
	reqs     *requesterTable
	filters  *filter.Cache // compiled SQL92 subscriptions, shared by heartbeats and pulls
	hold     *holdService
	locks    *lockManager
	offsets  *offsetCoalescer
	sched    *scheduleService
	timers   *timerService
	txn      *txnService
	reg      *registerService
	acl      *aclState
	gossip   *ha.Gossip // nil when gossipEnable is off
	gossipMu sync.Mutex // serializes updateGossipMeta
	// gossipKick asks publishGossipMeta to publish the meta as it is now
	// (kickGossipMeta); set with gossip.
	gossipKick chan struct{}
	metrics    *brokerMetrics
	stats      *brokerStats    // RocketMQ-shaped stats for the tools (admin_stats.go)
	mon        *httpmon.Server // nil when metricsPort is -1
	state      atomic.Int32    // stateStarting → stateServing → stateStopping (/health)
	term       atomic.Uint64   // term of the last role change (/health fallback)
	// liveCfg is cfg plus runtime changes (admin_config.go); liveMu
	// serialises updates.
	liveCfg atomic.Pointer[BrokerConfig]
	liveMu  sync.Mutex

	ctx    context.Context
	cancel context.CancelFunc
	quit   <-chan struct{}
	wg     sync.WaitGroup
	// goMu orders goFunc against stopTracked: a role change during Shutdown
	// must not start a goroutine (wg.Add) once Shutdown waits on wg.
	goMu      sync.Mutex
	goStopped bool
	startOnce sync.Once
	stopOnce  sync.Once
	startErr  error

	// autoCreate rate-limits client-triggered creations, autoCreating
	// coalesces concurrent ones of one topic (limits.go).
	autoCreate   autoCreateLimiter
	autoCreating singleflight.Group
	// txnRefusedWarn, replyWarn and sqlWarn bound the warnings a
	// client's END_TRANSACTIONs, replies and SQL92 subscriptions can
	// trigger.
	txnRefusedWarn, replyWarn, sqlWarn remoting.WarnLimiter
}

// New builds a controller over a started Replica. Nothing listens until
// Start. log may be nil.
func New(cfg BrokerConfig, rep Replica, log *zap.Logger) (*Controller, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if rep == nil {
		return nil, fmt.Errorf("%w: nil Replica", ErrInvalidBrokerConfig)
	}
	levels, err := cfg.DelayLevels()
	if err != nil {
		return nil, err
	}
	aclSt, err := loadACL(cfg, log)
	if err != nil {
		return nil, err
	}
	addr := cfg.RemotingAddr()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: brokerIP1/listenPort give %q: %v", ErrInvalidBrokerConfig, addr, err)
	}
	c := &Controller{
		cfg: cfg, rep: rep, st: rep.Store(), log: log.With(zap.String("broker", addr)),
		addr: addr, storeHost: ap, delayLevels: levels,
	}
	if sr, ok := rep.(scheduleReplica); ok {
		sr.SetScheduleLevels(len(levels))
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.quit = c.ctx.Done()
	live := cfg
	c.liveCfg.Store(&live)
	c.loadRuntimeConfig()
	tlsMode, srvTLS, _, err := cfg.remotingTLS()
	if err != nil {
		return nil, err
	}
	if c.nsClient, err = newMemberClient(cfg, c.log.Named("nsclient")); err != nil {
		return nil, err
	}
	if c.regClient, err = newMemberClient(cfg, c.log.Named("nsregister")); err != nil {
		_ = c.nsClient.Close()
		return nil, err
	}
	c.peers = groupPeers{client: c.nsClient, nameServers: cfg.NameServers(), brokerName: cfg.BrokerName}
	c.clients = newClientManager(c)
	c.reqs = newRequesterTable()
	c.filters = filter.NewCache(filterCacheSize)
	c.hold = newHoldService(c)
	c.locks = newLockManager(cfg.RebalanceLockMaxLiveTime, time.Now)
	c.offsets = newOffsetCoalescer(c)
	if g, ok := rep.(*Group); ok {
		g.SetBeforeTransfer(c.offsets.flush)
	}
	c.sched = newScheduleService(c)
	c.reg = newRegisterService(c)
	c.regClient.OnConnClose(c.reg.connClosed)
	c.metrics = newBrokerMetrics(c)
	c.timers = newTimerService(c)
	c.stats = newBrokerStats(cfg.BrokerClusterName, time.Now())
	c.txn = newTxnService(c)
	c.newMonitor()

	scfg := remoting.DefaultServerConfig()
	scfg.ListenAddr = net.JoinHostPort(cfg.ListenAddr, strconv.Itoa(cfg.ListenPort))
	if cfg.ServerChannelMaxIdleTimeSecs > 0 {
		scfg.IdleTimeout = time.Duration(cfg.ServerChannelMaxIdleTimeSecs) * time.Second
	}
	scfg.IncompleteFrameBudget = int64(cfg.MaxIncompleteFrameBytes)
	cfg.LimitsConfig.applyServer(&scfg)
	scfg.TLSMode, scfg.TLS = tlsMode, srvTLS
	c.srv = remoting.NewServer(scfg, c.log.Named("remoting"))
	c.srv.AddHook(debugHook{c.log})
	c.registerProcessors(c.srv)
	c.srv.OnConnClose(c.clients.connClosed)
	if cfg.VipChannelEnabled {
		vcfg := scfg
		vcfg.ListenAddr = net.JoinHostPort(cfg.ListenAddr, strconv.Itoa(cfg.ListenPort-2))
		c.vip = remoting.NewServer(vcfg, c.log.Named("vip"))
		c.registerProcessors(c.vip)
		c.vip.OnConnClose(c.clients.connClosed)
	}
	c.initACL(aclSt)
	return c, nil
}

// Addr is the advertised remoting address.
func (c *Controller) Addr() string { return c.addr }

// Replica returns the Raft group the controller fronts.
func (c *Controller) Replica() Replica { return c.rep }

// registerProcessors wires every request code to its handler; pools are
// split the way RocketMQ splits its executors so a flood of pulls never
// starves sends or heartbeats.
func (c *Controller) registerProcessors(s *remoting.Server) {
	cfg := c.cfg
	send, sendQ := cfg.SendMessageThreadPoolNums, cfg.SendThreadPoolQueueCapacity
	pull, pullQ := cfg.PullMessageThreadPoolNums, cfg.PullThreadPoolQueueCapacity
	// Sends are asynchronous: the handler only checks and decodes, the
	// Raft entry's completion answers. Sends that cannot block (see
	// sendInline) run on the connection's reader; admitted-but-unanswered
	// sends are bounded like the queue (sendThreadPoolQueueCapacity).
	// Their ROCKETMQ headers are not decoded into an ExtFields map
	// (LazyExt): the send path reads the raw fields.
	sendOpts := remoting.AsyncOptions{Workers: send, QueueSize: sendQ, MaxPending: sendQ, Inline: c.sendInline, LazyExt: true}
	s.RegisterAsync(remoting.RequestSendMessage, c.instrumentAsync(c.processSendAsync), sendOpts)
	s.RegisterAsync(remoting.RequestSendMessageV2, c.instrumentAsync(c.processSendAsync), sendOpts)
	s.RegisterAsync(remoting.RequestSendBatchMessage, c.instrumentAsync(c.processSendAsync), sendOpts)
	s.Register(remoting.RequestConsumerSendMsgBack, c.instrument(c.processSendBack), send, sendQ)
	c.registerReply(s, send, sendQ)
	s.Register(remoting.RequestEndTransaction, c.instrument(c.processEndTransaction), send, sendQ)
	s.Register(remoting.RequestPullMessage, c.instrument(c.processPull), pull, pullQ)
	s.Register(remoting.RequestLitePullMessage, c.instrument(c.processPull), pull, pullQ)

	cm, cmQ := cfg.ClientManageThreadPoolNums, 50000
	s.Register(remoting.RequestHeartBeat, c.instrument(c.processHeartbeat), cm, cmQ)
	s.Register(remoting.RequestUnregisterClient, c.instrument(c.processUnregisterClient), cm, cmQ)
	s.Register(remoting.RequestCheckClientConfig, c.instrument(c.processCheckClientConfig), cm, cmQ)

	co, coQ := cfg.ConsumerManageThreadPoolNums, 50000
	s.Register(remoting.RequestGetConsumerListByGroup, c.instrument(c.processGetConsumerList), co, coQ)
	s.Register(remoting.RequestQueryConsumerOffset, c.instrument(c.processQueryConsumerOffset), co, coQ)
	s.Register(remoting.RequestUpdateConsumerOffset, c.instrument(c.processUpdateConsumerOffset), co, coQ)
	s.Register(remoting.RequestLockBatchMQ, c.instrument(c.processLockBatch), co, coQ)
	s.Register(remoting.RequestUnlockBatchMQ, c.instrument(c.processUnlockBatch), co, coQ)

	q := cfg.AdminBrokerThreadPoolNums
	s.Register(remoting.RequestQueryMessage, c.instrument(c.processQueryMessage), q, 10000)
	s.Register(remoting.RequestViewMessageByID, c.instrument(c.processViewMessageByID), q, 10000)
	RegisterRaftAdmin(s, c.rep, c.log.Named("raftadmin"))
	c.registerCatchup(s)
	s.RegisterDefault(c.instrument(c.processAdmin), q, 10000)
}

// instrumentAsync counts an asynchronous processor's requests in the
// request metrics. The duration observed is the handler's (check, decode,
// hand-off), not the wait for replication: RequestMetrics.Wrap only times
// a synchronous call.
//
// Sends run this for every request on the connection's reader, so nothing
// is allocated per request: the instrumented synchronous call is built
// once per pooled asyncCall, which carries the request's Responder in.
func (c *Controller) instrumentAsync(h remoting.AsyncHandlerFunc) remoting.AsyncHandlerFunc {
	var pool sync.Pool
	pool.New = func() any {
		a := &asyncCall{h: h}
		a.instrumented = c.instrument(a.call)
		return a
	}
	return func(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand, r *remoting.Responder) (*remoting.RemotingCommand, error) {
		a := pool.Get().(*asyncCall)
		a.r = r
		resp, err := a.instrumented(ctx, conn, req)
		a.r = nil
		pool.Put(a) // not reached if h panics: that asyncCall is dropped
		return resp, err
	}
}

// asyncCall adapts one asynchronous handler call to the synchronous
// signature RequestMetrics.Wrap instruments; r is set for the call only.
type asyncCall struct {
	h            remoting.AsyncHandlerFunc
	r            *remoting.Responder
	instrumented remoting.HandlerFunc
}

func (a *asyncCall) call(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	return a.h(ctx, conn, req, a.r)
}

// Start listens, joins the role-change feed and starts the background
// services. Registration with the name servers starts at once (followers
// register too, as brokerId index+1).
func (c *Controller) Start() error {
	c.startOnce.Do(func() { c.startErr = c.start() })
	return c.startErr
}

func (c *Controller) start() (err error) {
	// What started is stopped again, newest first, when a later step
	// fails, so a failed Start leaves no listener or goroutine behind.
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	// The monitor comes up first so /health answers 503 while starting.
	// A metricsPort given explicitly must bind; the derived listenPort+3
	// only warns: monitoring is no precondition for serving.
	if c.mon != nil {
		if err := c.mon.Start(); err != nil {
			if c.cfg.MetricsPort > 0 {
				return fmt.Errorf("broker: metrics port (metricsPort, -1 = off): %w", err)
			}
			c.log.Warn("metrics port (listenPort+3) unavailable; monitoring off", zap.Error(err))
			c.mon = nil
		} else {
			undo = append(undo, func() { _ = c.mon.Shutdown(context.Background()) })
		}
	}
	if err := c.srv.Start(); err != nil {
		return fmt.Errorf("broker: listenPort %d: %w", c.cfg.ListenPort, err)
	}
	undo = append(undo, func() { _ = c.srv.Shutdown(context.Background()) })
	if c.vip != nil {
		if err := c.vip.Start(); err != nil {
			return fmt.Errorf("broker: VIP channel on listenPort-2: %w", err)
		}
		undo = append(undo, func() { _ = c.vip.Shutdown(context.Background()) })
	}
	if err := c.startGossip(); err != nil {
		return err
	}
	c.st.Reput().OnNewMessage(c.hold.notify)
	c.rep.OnRoleChange(c.onRoleChange)
	c.goFunc(c.hold.run)
	c.goFunc(c.clients.scanLoop)
	c.goFunc(c.offsets.run)
	c.goFunc(c.sched.run)
	c.goFunc(c.timers.run)
	c.goFunc(c.txn.run)
	c.goFunc(c.reg.run)
	c.goFunc(c.watchRemoval)
	c.startACL()
	c.startCatchup()
	c.startLearnerProbe()
	if c.metrics != nil && c.metrics.followers != nil {
		c.goFunc(c.metrics.followers.run)
	}
	c.state.Store(stateServing)
	c.log.Info("broker started", zap.String("addr", c.addr), zap.String("brokerName", c.cfg.BrokerName),
		zap.Bool("leader", c.rep.IsLeader()), zap.String("metrics", c.MetricsAddr()))
	return nil
}

// onRoleChange runs on the Replica's role goroutine, in order.
func (c *Controller) onRoleChange(leader bool, term uint64) {
	c.log.Info("role changed", zap.Bool("leader", leader), zap.Uint64("term", term))
	c.term.Store(term)
	if leader {
		c.goFunc(c.notifyLeadership) // leader_notify.go
	} else {
		// Locks are leader-local: they go when leadership does, so the
		// next term starts empty (clients re-lock within their lock
		// interval, as after a RocketMQ master restart). Cleared here, not
		// on becoming leader: by then the leader already grants locks.
		c.locks.reset()
	}
	c.hold.wakeAll()
	c.reg.trigger()
	c.updateGossipMeta()
}

// goFunc starts a tracked goroutine, unless stopTracked has begun: then f
// does not run at all.
func (c *Controller) goFunc(f func()) {
	c.goMu.Lock()
	defer c.goMu.Unlock()
	if c.goStopped {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// stopTracked refuses new goFunc goroutines and waits for the running ones.
func (c *Controller) stopTracked() {
	c.goMu.Lock()
	c.goStopped = true
	c.goMu.Unlock()
	c.wg.Wait()
}

// Shutdown stops the servers (letting running requests answer), the
// background services and unregisters nothing: the name servers expire
// the broker or gossip removes it. The Replica is the caller's to close.
func (c *Controller) Shutdown(ctx context.Context) error {
	var err error
	c.stopOnce.Do(func() {
		// Background services first: the hold service answers every
		// parked pull while the connections are still open.
		c.state.Store(stateStopping)
		// Leave the gossip pool first: the name servers drop this node's
		// address at once and clients stop sending here.
		err = c.stopGossip()
		c.cancel()
		c.stopTracked()
		err = errors.Join(err, c.srv.Shutdown(ctx))
		if c.vip != nil {
			err = errors.Join(err, c.vip.Shutdown(ctx))
		}
		// After the servers: the requests they let finish (offset
		// commits, pulls carrying one) were answered success, and the
		// commits they queued are replicated here or never; those a
		// follower holds for the leader are passed on now or never.
		c.offsets.flush()
		c.offsets.passOn(true)
		err = errors.Join(err, c.nsClient.Close(), c.regClient.Close())
		if c.mon != nil {
			err = errors.Join(err, c.mon.Shutdown(ctx))
		}
	})
	return err
}

// writeCtx bounds one replicated write.
func (c *Controller) writeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.ApplyTimeout+time.Second)
}

// refuse answers a request refused by one of the limits against abuse and
// counts it in raftmq_broker_limit_refusals_total{limit}. limit names the
// config key or rule that bit (maxQueueNums, maxBatchMessages,
// offsetCommit, and the LimitsConfig keys); the remark names it too.
func (c *Controller) refuse(limit string, code int16, format string, args ...any) *remoting.RemotingCommand {
	c.metrics.limitRefusals.WithLabelValues(limit).Inc()
	return response(code, format, args...)
}

// response builds a response with code and a remark.
func response(code int16, format string, args ...any) *remoting.RemotingCommand {
	if len(args) == 0 {
		return remoting.NewResponse(code, format)
	}
	return remoting.NewResponse(code, fmt.Sprintf(format, args...))
}

func success() *remoting.RemotingCommand { return remoting.NewResponse(remoting.ResponseSuccess, "") }

// headerError answers a request whose custom header could not be decoded
// (a required field missing or unparsable): SYSTEM_ERROR, as RocketMQ's
// RemotingCommandException handling does, with the field named.
func headerError(req *remoting.RemotingCommand, err error) *remoting.RemotingCommand {
	return response(remoting.ResponseSystemError, "bad request header for code %d: %v", req.Code, err)
}

// writeError maps a Replica write error to a response. Not-leader follows
// broker-plan decision 5: SERVICE_NOT_AVAILABLE, a remark naming the
// leader and extField leaderAddr for the raftmq SDK.
func (c *Controller) writeError(what string, err error) *remoting.RemotingCommand {
	switch {
	case errors.Is(err, ErrNotLeader):
		return c.notLeader()
	case errors.Is(err, ErrGroupClosed):
		// The member is stopping and leads no more: the not-leader answer
		// makes clients wait for the group's next leader instead of
		// retrying here at once. No hint: it may still name itself.
		return notLeaderResponse("", what+": member shutting down: ")
	case errors.Is(err, store.ErrMessageIllegal):
		return response(remoting.ResponseMessageIllegal, "%s: %v", what, err)
	case errors.Is(err, context.DeadlineExceeded):
		return response(remoting.ResponseSystemBusy, "%s: replication timed out: %v", what, err)
	case errors.Is(err, store.ErrDiskFull):
		c.metrics.diskFull.Store(true)
		return response(remoting.ResponseServiceNotAvailable, "%s: %v", what, err)
	case errors.Is(err, store.ErrServiceNotAvailable):
		return response(remoting.ResponseServiceNotAvailable, "%s: %v", what, err)
	default:
		return response(remoting.ResponseSystemError, "%s: %v", what, err)
	}
}

// notLeader is the not-leader answer of broker-plan decision 5.
func (c *Controller) notLeader() *remoting.RemotingCommand {
	return notLeaderResponse(c.rep.LeaderAddr(), "")
}

// notLeaderResponse is every not-leader answer: SERVICE_NOT_AVAILABLE, the
// remark clients recognise (wire.NotLeaderRemark) after prefix, and the
// leader's address in wire.ExtLeaderAddr when one is known.
func notLeaderResponse(leader, prefix string) *remoting.RemotingCommand {
	r := response(remoting.ResponseServiceNotAvailable, "%s%s", prefix, wire.NotLeaderRemark(leader))
	if leader != "" {
		r.ExtFields = map[string]string{wire.ExtLeaderAddr: leader}
	}
	return r
}

// debugHook logs every request except pulls and heartbeats with its
// response code at debug level (RAFTMQ_TEST_LOG=1 in tests, --log-level
// debug in the binary); free when debug is off.
type debugHook struct{ log *zap.Logger }

// BeforeRequest implements remoting.RPCHook.
func (h debugHook) BeforeRequest(string, *remoting.RemotingCommand) {}

// AfterResponse implements remoting.RPCHook.
func (h debugHook) AfterResponse(addr string, req, resp *remoting.RemotingCommand) {
	if resp == nil || req.Code == remoting.RequestPullMessage || req.Code == remoting.RequestHeartBeat {
		return
	}
	if ce := h.log.Check(zap.DebugLevel, "request"); ce != nil {
		// A copy (LazyExt sends have no map), with the secrets masked: an
		// UPDATE_AND_CREATE_ACL_CONFIG header carries the account's secret
		// key, and a Signature replays as its account for the same values
		// (every header-less request of an account has the same one).
		ext := make(map[string]string, len(req.ExtFields))
		req.RangeExt(func(k, v string) bool {
			if k == remoting.ExtSignature || k == aclSecretKeyField {
				v = redactedSecret
			}
			ext[k] = v
			return true
		})
		ce.Write(zap.String("remote", addr), zap.Int16("code", req.Code), zap.Any("ext", ext),
			zap.Int16("resp", resp.Code), zap.String("remark", resp.Remark))
	}
}
