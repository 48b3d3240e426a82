package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
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
	c.nsClient.CloseConn(tc.nsAddr)
	testutil.WaitFor(t, 5*time.Second, "the broker registers again after its name server connection closed", func() bool {
		return c.reg.registeredRounds() > before && routesMaster(tc.ns, c.cfg.BrokerName, c.Addr())
	})
}

// TestRegisterRetriedAfterFailedRound: a round no name server answered (it
// was not up yet, or it timed out under load) is tried again with back-off,
// not a registerNameServerPeriod later.
func TestRegisterRetriedAfterFailedRound(t *testing.T) {
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
	c.nsClient.CloseConn(tc.nsAddr)
	testutil.WaitFor(t, 3*time.Second, "the broker registers again with the healthy name server", func() bool {
		return c.reg.registeredRounds() > before && routesMaster(tc.ns, c.cfg.BrokerName, c.Addr())
	})
}
