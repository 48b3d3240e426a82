package broker

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// registeredRounds is how many registration rounds reached a name server.
func (r *registerService) registeredRounds() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.registered
}

// finishedRounds is how many registration rounds have ended.
func (r *registerService) finishedRounds() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.finished
}

// routesMaster reports whether the name server routes addr as brokerId 0
// of its group.
func routesMaster(ns *namesrv.NameServer, brokerName, addr string) bool {
	bd, ok := ns.Routes().ClusterInfo().BrokerAddrTable[brokerName]
	return ok && bd.BrokerAddrs[wire.MasterID] == addr
}

// TestRegisterAgainWhenNameServerConnectionCloses: a name server drops
// every broker whose registration came through a connection that closes
// (RocketMQ's onChannelDestroy), and the broker's client closes its name
// server connection when any call on it times out in silence. The broker
// registers again at once, not a registerNameServerPeriod later: until
// then no client finds its group's master.
func TestRegisterAgainWhenNameServerConnectionCloses(t *testing.T) {
	tc, _ := startFakeProc(t, func(c *BrokerConfig) {
		// Nothing but the lost connection may register again.
		c.RegisterNameServerPeriod = time.Hour
	})
	c := tc.nodes[0]
	tc.waitRoute("TBW102")
	before := c.reg.registeredRounds()
	c.regClient.CloseConn(tc.nsAddr)
	testutil.WaitFor(t, 5*time.Second, "the broker registers again after its name server connection closed", func() bool {
		return c.reg.registeredRounds() > before && routesMaster(tc.ns, c.cfg.BrokerName, c.Addr())
	})
}

// TestRegisterRetriedAfterFailedRound: a round no name server answered (it
// was not up yet, or it timed out under load) is tried again with back-off,
// not a registerNameServerPeriod later.
func TestRegisterRetriedAfterFailedRound(t *testing.T) {
	t.Parallel()
	nsPort := testutil.FreePort(t)
	tc, _ := startFakeProc(t, func(c *BrokerConfig) {
		c.NamesrvAddr = "127.0.0.1:" + strconv.Itoa(nsPort)
		c.RegisterNameServerPeriod = time.Hour
	})
	c := tc.nodes[0]
	testutil.WaitFor(t, 5*time.Second, "the start-up round failed", func() bool { return c.reg.finishedRounds() >= 1 })
	if n := c.reg.registeredRounds(); n != 0 {
		t.Fatalf("%d rounds registered with no name server listening", n)
	}
	ns, _ := startProcNameServerWith(t, func(cfg *namesrv.Config) { cfg.ListenPort = nsPort })
	testutil.WaitFor(t, 10*time.Second, "the broker registers once its name server is up", func() bool {
		return routesMaster(ns, c.cfg.BrokerName, c.Addr())
	})
}

// TestRegisterAgainWhileAnotherNameServerIsDown: one name server being down
// keeps a retry with a growing back-off pending; a connection to a healthy
// name server that closes meanwhile (it dropped this member) still
// registers again at once, not when that back-off ends.
func TestRegisterAgainWhileAnotherNameServerIsDown(t *testing.T) {
	t.Parallel()
	down := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	tc, _ := startFakeProc(t, func(c *BrokerConfig) {
		c.NamesrvAddr += ";" + down
		c.RegisterNameServerPeriod = time.Hour
	})
	c := tc.nodes[0]
	// Rounds at 0 s, 1 s and 3 s fail on the name server that is down;
	// the next waits 4 s.
	testutil.WaitFor(t, 10*time.Second, "three rounds the down name server failed", func() bool {
		return c.reg.finishedRounds() >= 3
	})
	tc.waitRoute("TBW102")
	before := c.reg.registeredRounds()
	c.regClient.CloseConn(tc.nsAddr)
	testutil.WaitFor(t, 3*time.Second, "the broker registers again with the healthy name server", func() bool {
		return c.reg.registeredRounds() > before && routesMaster(tc.ns, c.cfg.BrokerName, c.Addr())
	})
}

// lateRemovalNameServer answers REGISTER_BROKER and, as RocketMQ's name
// server may (onChannelDestroy queues the removal of a closed
// connection's broker without checking its channel again), applies that
// removal after a registration that came over another connection since:
// the worst order for a broker that registers again at once.
type lateRemovalNameServer struct {
	srv *remoting.Server

	mu         sync.Mutex
	via        *remoting.Conn                   // guarded by mu: the registration's connection, nil when none
	removeNext bool                             // guarded by mu
	removals   int                              // guarded by mu
	closes     int                              // guarded by mu: connections closed
	gone       map[*remoting.Conn]chan struct{} // guarded by mu: closed once a connection's close was handled
}

func startLateRemovalNameServer(t *testing.T) *lateRemovalNameServer {
	f := &lateRemovalNameServer{gone: make(map[*remoting.Conn]chan struct{})}
	f.srv = remoting.NewServer(remoting.ServerConfig{ListenAddr: "127.0.0.1:0"}, nil)
	f.srv.OnConnClose(func(c *remoting.Conn) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.closes++
		if f.via == c {
			f.removeNext = true
		}
		close(f.goneLocked(c))
	})
	f.srv.Register(remoting.RequestRegisterBroker, func(_ context.Context, conn *remoting.Conn, _ *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		f.mu.Lock()
		old := f.via
		var gone chan struct{}
		if old != nil && old != conn {
			gone = f.goneLocked(old)
		}
		f.mu.Unlock()
		if gone != nil {
			// Take the old connection's removal first, apply it after.
			select {
			case <-gone:
			case <-time.After(5 * time.Second):
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.via = conn
		if f.removeNext {
			f.via, f.removeNext = nil, false
			f.removals++
		}
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 4, 16)
	f.srv.RegisterDefault(func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		return remoting.NewResponse(remoting.ResponseSystemError, "not served by this name server"), nil
	}, 1, 16)
	if err := f.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = f.srv.Shutdown(ctx)
	})
	return f
}

func (f *lateRemovalNameServer) goneLocked(c *remoting.Conn) chan struct{} {
	ch := f.gone[c]
	if ch == nil {
		ch = make(chan struct{})
		f.gone[c] = ch
	}
	return ch
}

// state reports whether the broker is registered and how many
// registrations a late removal undid.
func (f *lateRemovalNameServer) state() (registered bool, removals int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.via != nil, f.removals
}

// startRegisteredWithLateRemoval starts a broker registered with a
// late-removal name server (no periodic registration) and returns the name
// server, its address and the broker's controller.
func startRegisteredWithLateRemoval(t *testing.T) (*lateRemovalNameServer, string, *Controller) {
	t.Helper()
	f := startLateRemovalNameServer(t)
	nsAddr := f.srv.Addr().String()
	tc, _ := startFakeProc(t, func(c *BrokerConfig) {
		c.NamesrvAddr = nsAddr
		c.RegisterNameServerPeriod = time.Hour
	})
	testutil.WaitFor(t, 5*time.Second, "the broker registered", func() bool {
		ok, _ := f.state()
		return ok
	})
	return f, nsAddr, tc.nodes[0]
}

// TestRegisterAgainOutlastsALateRemoval: a name server may apply the
// removal of a closed connection's registration after the registration
// the broker made at once over a new connection (RocketMQ's does); the
// broker registers once more a little later and ends registered.
func TestRegisterAgainOutlastsALateRemoval(t *testing.T) {
	t.Parallel()
	f, nsAddr, c := startRegisteredWithLateRemoval(t)
	c.regClient.CloseConn(nsAddr)
	testutil.WaitFor(t, 5*time.Second, "the late removal undid the registration made at once", func() bool {
		_, removals := f.state()
		return removals > 0
	})
	testutil.WaitFor(t, 5*time.Second, "the broker registered after the late removal", func() bool {
		ok, _ := f.state()
		return ok
	})
}

// TestRegistrationOutlivesOtherNameServerCalls: the broker's other calls
// to a name server (the removal watch's route lookup, whose connection a
// silent timeout closes) do not share the registration's connection, so
// closing theirs drops nothing the name server holds.
func TestRegistrationOutlivesOtherNameServerCalls(t *testing.T) {
	f, nsAddr, c := startRegisteredWithLateRemoval(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.nsClient.InvokeSync(ctx, nsAddr, remoting.NewRequest(remoting.RequestGetBrokerClusterInfo, nil, nil)); err != nil {
		t.Fatal(err)
	}
	c.nsClient.CloseConn(nsAddr)
	testutil.WaitFor(t, 5*time.Second, "the name server saw the connection close", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.closes > 0
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.via == nil || f.removeNext || f.removals > 0 {
		t.Fatalf("closing the broker's lookup connection dropped its registration (registered %v, removal pending %v, removals %d)",
			f.via != nil, f.removeNext, f.removals)
	}
}

// TestRegisterRetryBackOffCountsOnlyRetries: the back-off after a failed
// round doubles with each retry (1 s, 2 s, 4 s, ...), not with every
// round that fails meanwhile. A name server restart closes the connection
// (a round at once) and the second registration reregisterAgainDelay
// later fails too; were each failure to double the wait, the retry that
// should come 2 s after the first one would come 4 s or more later,
// leaving the member out of the route that long after the name server is
// back (the operator's upgrade of the name servers, docs/operations.md).
func TestRegisterRetryBackOffCountsOnlyRetries(t *testing.T) {
	t.Parallel()
	nsPort := testutil.FreePort(t)
	ns1, _ := startProcNameServerWith(t, func(cfg *namesrv.Config) { cfg.ListenPort = nsPort })
	tc, _ := startFakeProc(t, func(c *BrokerConfig) {
		c.NamesrvAddr = "127.0.0.1:" + strconv.Itoa(nsPort)
		c.RegisterNameServerPeriod = time.Hour
	})
	c := tc.nodes[0]
	testutil.WaitFor(t, 5*time.Second, "the broker registered", func() bool {
		return routesMaster(ns1, c.cfg.BrokerName, c.Addr())
	})
	before := c.reg.finishedRounds()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ns1.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// The lost connection's round, the first retry (1 s) and the second
	// registration (1 s) all fail; the next retry is due 2 s after the
	// first one.
	testutil.WaitFor(t, 5*time.Second, "three rounds failed with the name server down", func() bool {
		return c.reg.finishedRounds() >= before+3
	})
	ns2, _ := startProcNameServerWith(t, func(cfg *namesrv.Config) { cfg.ListenPort = nsPort })
	testutil.WaitFor(t, 3*time.Second, "the broker registers with the restarted name server at its next retry", func() bool {
		return routesMaster(ns2, c.cfg.BrokerName, c.Addr())
	})
}
