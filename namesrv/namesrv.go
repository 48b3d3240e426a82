package namesrv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/ha"
	"github.com/raftmq/raftmq/internal/httpmon"
	"github.com/raftmq/raftmq/remoting"
)

// shutdownTimeout bounds how long Close (and Run, when its context ends)
// waits for in-flight requests.
const shutdownTimeout = 10 * time.Second

// NameServer is one running name server. Start or Run it, then Close it
// (or Shutdown, to bound the drain with a context): Close returns once
// every goroutine the name server started has returned.
type NameServer struct {
	cfg    Config
	rt     runtimeCfg // UPDATE_NAMESRV_CONFIG changes (config_runtime.go)
	log    *zap.Logger
	routes *RouteInfoManager
	kv     *KVConfigManager
	srv    *remoting.Server

	// unregisterCh feeds the batch-unregistration goroutine
	// (BatchUnregistrationService): UNREGISTER_BROKER and closed
	// connections are applied in batches under one table lock.
	unregisterCh chan unregistration

	// gossip is the memberlist member (nil unless gossipEnable), set by
	// Start while the metrics endpoint may already read it;
	// unsubscribeGossip stops its dead-broker hook.
	gossip            atomic.Pointer[ha.Gossip]
	unsubscribeGossip func()

	// requests and mon are the monitoring side (metrics.go); monState is
	// 0 starting, 1 serving, 2 stopping (/health).
	requests *httpmon.RequestMetrics
	mon      *httpmon.Server
	monState atomic.Int32

	started  atomic.Bool
	stopOnce sync.Once
	stopErr  error
	// ctx is the root of every background loop; Shutdown cancels it and
	// waits for wg.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New builds a name server from cfg; nothing listens until Start or Run.
// log may be nil.
func New(cfg Config, log *zap.Logger) (*NameServer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	n := &NameServer{
		cfg: cfg,
		log: log,
		routes: NewRouteInfoManager(cfg.BrokerChannelExpiredTime, log.Named("routes"),
			WithDeleteTopicWithRegistration(cfg.DeleteTopicWithBrokerRegistration)),
		kv:           NewKVConfigManager(cfg.KVConfigPath, cfg.KVLimits, log.Named("kv")),
		unregisterCh: make(chan unregistration, cfg.UnRegisterBrokerQueueCapacity),
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	tlsMode, tlsCfg, err := cfg.TLS.ServerTLS()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	n.srv = remoting.NewServer(remoting.ServerConfig{
		ListenAddr:  cfg.Addr(),
		IdleTimeout: time.Duration(cfg.ServerChannelMaxIdleTimeSeconds) * time.Second,
		TLSMode:     tlsMode,
		TLS:         tlsCfg,
	}, log)
	n.newMonitor()
	n.registerProcessors()
	if err := n.initAuth(); err != nil {
		return nil, err
	}
	n.srv.OnConnClose(n.onConnClose)
	return n, nil
}

// Routes exposes the route tables, e.g. for gossip-driven removal.
func (n *NameServer) Routes() *RouteInfoManager { return n.routes }

// KV exposes the KV config table.
func (n *NameServer) KV() *KVConfigManager { return n.kv }

// Addr is the bound listen address (useful with port 0); nil before Start.
func (n *NameServer) Addr() net.Addr { return n.srv.Addr() }

// RemoveBroker drops one member of a broker group at once (for failure
// detectors such as memberlist gossip) instead of waiting for the heartbeat
// expiry. It reports whether the member was registered.
func (n *NameServer) RemoveBroker(cluster, brokerName string, brokerID int64) bool {
	return n.routes.RemoveBroker(cluster, brokerName, brokerID)
}

// RemoveBrokerByAddr drops the broker registered at addr in cluster at once.
func (n *NameServer) RemoveBrokerByAddr(cluster, addr string) bool {
	return n.routes.RemoveBrokerByAddr(cluster, addr)
}

// Start loads the KV table, starts listening and starts the background
// goroutines (inactive-broker scan, batch unregistration). When it fails,
// what it had started is stopped again; Close is still safe to call.
func (n *NameServer) Start() error {
	if !n.started.CompareAndSwap(false, true) {
		return ErrAlreadyStarted
	}
	if err := n.kv.Load(); err != nil {
		return err
	}
	if err := n.startMonitor(); err != nil {
		return err
	}
	stopMonitor := func() {
		if n.mon != nil {
			ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			defer cancel()
			_ = n.mon.Shutdown(ctx)
		}
	}
	if err := n.srv.Start(); err != nil {
		stopMonitor()
		return fmt.Errorf("namesrv: listen on %s: %w", n.cfg.Addr(), err)
	}
	if n.cfg.GossipEnable {
		if err := n.startGossip(); err != nil {
			_ = n.srv.Shutdown(context.Background())
			stopMonitor()
			return err
		}
	}
	n.wg.Add(2)
	go func() { defer n.wg.Done(); n.scanLoop() }()
	go func() { defer n.wg.Done(); n.unregisterLoop() }()
	n.monState.Store(1)
	n.log.Info("name server started", zap.String("addr", n.srv.Addr().String()),
		zap.Duration("scanInterval", n.cfg.ScanNotActiveBrokerInterval),
		zap.Duration("brokerExpiry", n.cfg.BrokerChannelExpiredTime),
		zap.String("kvConfigPath", n.cfg.KVConfigPath))
	return nil
}

// Shutdown stops accepting connections, drains in-flight requests (bounded
// by ctx), cancels the root context of the background goroutines and
// waits for them. Safe to call more than once (later calls return the
// first one's error), before Start too.
func (n *NameServer) Shutdown(ctx context.Context) error {
	n.stopOnce.Do(func() {
		n.monState.Store(2)
		n.stopGossip()
		var err error
		if n.started.Load() {
			// A failed Start may have stopped the server already.
			if err = n.srv.Shutdown(ctx); errors.Is(err, remoting.ErrServerClosed) {
				err = nil
			}
		}
		n.cancel()
		n.wg.Wait()
		if n.mon != nil {
			err = errors.Join(err, n.mon.Shutdown(ctx))
		}
		n.stopErr = err
		n.log.Info("name server stopped")
	})
	return n.stopErr
}

// Close is Shutdown with in-flight requests given shutdownTimeout to
// answer, the same shape as the broker's node.
func (n *NameServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return n.Shutdown(ctx)
}

// Run starts the server, serves until ctx is done and closes it. If Start
// fails, what it had started is already stopped and Run returns its error
// (a server that is already running is left running).
func (n *NameServer) Run(ctx context.Context) error {
	if err := n.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	return n.Close()
}

// scanLoop expires brokers that stopped heartbeating
// (NamesrvController's scanNotActiveBroker task).
func (n *NameServer) scanLoop() {
	t := time.NewTicker(n.cfg.ScanNotActiveBrokerInterval)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			// Closing happens outside the table lock: the close callback
			// re-enters the tables.
			for _, ch := range n.routes.ScanNotActiveBrokers() {
				_ = ch.Close()
			}
		}
	}
}

// unregisterLoop applies queued unregistrations, everything pending at once.
func (n *NameServer) unregisterLoop() {
	for {
		select {
		case <-n.ctx.Done():
			return
		case req := <-n.unregisterCh:
			batch := []unregistration{req}
		drain:
			for {
				select {
				case r := <-n.unregisterCh:
					batch = append(batch, r)
				default:
					break drain
				}
			}
			n.routes.unregister(batch)
		}
	}
}

// submitUnregister queues a request without blocking a request worker.
func (n *NameServer) submitUnregister(u unregistration) error {
	select {
	case n.unregisterCh <- u:
		return nil
	default:
		n.log.Warn("unregister queue full; the broker will expire instead",
			zap.String("brokerName", u.req.BrokerName), zap.String("addr", u.req.BrokerAddr))
		return ErrUnregisterQueueFull
	}
}

// onConnClose drops brokers whose registration came through the closed
// connection (BrokerHousekeepingService).
func (n *NameServer) onConnClose(c *remoting.Conn) {
	for _, req := range n.routes.UnregisterRequestsForChannel(c) {
		n.log.Info("broker connection closed; unregistering",
			zap.String("brokerName", req.BrokerName), zap.String("addr", req.BrokerAddr),
			zap.String("remote", c.RemoteAddr()))
		_ = n.submitUnregister(unregistration{req: req, via: c})
	}
}

// registerProcessors wires request codes to handlers. Route lookups get
// their own pool (RocketMQ's clientRequestExecutor) so that a burst of
// client lookups never waits behind broker registrations. The brokers'
// own requests (register, unregister, heartbeat, data version) get a pool
// of their own, sized like the default one: a registration that waits
// out the broker's timeout in a queue is dropped (its connection closed
// since, see registerBroker), so tools' KV and cluster requests must not
// be able to hold it up. Everything else shares the default pool, whose
// dispatcher answers REQUEST_CODE_NOT_SUPPORTED for codes it does not
// know.
func (n *NameServer) registerProcessors() {
	n.srv.Register(remoting.RequestGetRouteInfoByTopic, n.instrument(n.getRouteInfoByTopic),
		n.cfg.ClientRequestThreadPoolNums, n.cfg.ClientRequestThreadPoolQueueCapacity)
	brokers := map[int16]remoting.HandlerFunc{
		remoting.RequestQueryDataVersion: n.queryDataVersion,
		remoting.RequestRegisterBroker:   n.registerBroker,
		remoting.RequestUnregisterBroker: n.unregisterBroker,
		remoting.RequestBrokerHeartbeat:  n.brokerHeartbeat,
	}
	n.srv.RegisterShared(slices.Sorted(maps.Keys(brokers)), n.instrument(func(ctx context.Context, c *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		return brokers[req.Code](ctx, c, req)
	}), n.cfg.DefaultThreadPoolNums, n.cfg.DefaultThreadPoolQueueCapacity)
	handlers := map[int16]remoting.HandlerFunc{
		remoting.RequestPutKVConfig:                   n.putKVConfig,
		remoting.RequestGetKVConfig:                   n.getKVConfig,
		remoting.RequestDeleteKVConfig:                n.deleteKVConfig,
		remoting.RequestGetKVListByNamespace:          n.getKVListByNamespace,
		remoting.RequestGetBrokerClusterInfo:          n.getBrokerClusterInfo,
		remoting.RequestWipeWritePermOfBroker:         n.wipeWritePermOfBroker,
		remoting.RequestAddWritePermOfBroker:          n.addWritePermOfBroker,
		remoting.RequestGetAllTopicListFromNameserver: n.getAllTopicList,
		remoting.RequestGetTopicsByCluster:            n.getTopicsByCluster,
		remoting.RequestGetSystemTopicListFromNS:      n.getSystemTopicList,
		remoting.RequestGetUnitTopicList:              n.unitTopicList(hasUnitFlag),
		remoting.RequestGetHasUnitSubTopicList:        n.unitTopicList(hasUnitSubFlag),
		remoting.RequestGetHasUnitSubUnunitTopicList: n.unitTopicList(func(f int) bool {
			return hasUnitSubFlag(f) && !hasUnitFlag(f)
		}),
		remoting.RequestDeleteTopicInNamesrv:   n.deleteTopicInNamesrv,
		remoting.RequestRegisterTopicInNamesrv: n.registerTopicInNamesrv,
		remoting.RequestGetNamesrvConfig:       n.getNamesrvConfig,
		remoting.RequestUpdateNamesrvConfig:    n.updateNamesrvConfig,
	}
	n.srv.RegisterDefault(n.instrument(func(ctx context.Context, c *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		if h, ok := handlers[req.Code]; ok {
			return h(ctx, c, req)
		}
		return remoting.NewResponse(remoting.ResponseRequestCodeNotSupported,
			" request type "+strconv.Itoa(int(req.Code))+" not supported"), nil
	}), n.cfg.DefaultThreadPoolNums, n.cfg.DefaultThreadPoolQueueCapacity)
}

// success is a SUCCESS response without remark.
func success() *remoting.RemotingCommand {
	return remoting.NewResponse(remoting.ResponseSuccess, "")
}

// legacyJSONVersionCutoff is MQVersion.Version.V4_9_4.ordinal(): requests at
// or above it get standard JSON (ClientRequestProcessor.getRouteInfoByTopic).
const legacyJSONVersionCutoff = 401

// wantsStandardJSON applies ClientRequestProcessor's rule: requests from
// V4_9_4 on, or asking for it, get quoted map keys.
func wantsStandardJSON(req *remoting.RemotingCommand, acceptStandardOnly bool) bool {
	return int(req.Version) >= legacyJSONVersionCutoff || acceptStandardOnly
}
