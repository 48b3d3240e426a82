package namesrv

import (
	"context"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestBrokerRequestsBypassDefaultPool: with the default pool's one worker
// held and its queue full, a broker still registers, heartbeats, checks
// its data version and unregisters: those run in a pool of their own, so
// tools' requests cannot keep a live broker out of the routes.
func TestBrokerRequestsBypassDefaultPool(t *testing.T) {
	n := testServer(t, func(c *Config) { c.DefaultThreadPoolNums, c.DefaultThreadPoolQueueCapacity = 1, 1 })
	addr := n.Addr().String()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	n.srv.RegisterDefault(func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		entered <- struct{}{}
		<-release
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 1)
	c := testClient(t)
	kv := func() *remoting.RemotingCommand {
		return remoting.NewRequest(remoting.RequestGetKVConfig, &wire.KVConfigRequestHeader{Namespace: "ns", Key: "k"}, nil)
	}
	held := make(chan error, 2)
	for range 2 {
		if err := c.InvokeAsync(context.Background(), addr, kv(), func(_ *remoting.RemotingCommand, err error) { held <- err }); err != nil {
			t.Fatal(err)
		}
	}
	<-entered // the worker holds the first; the second waits in the queue
	defer func() {
		close(release)
		for range 2 {
			if err := <-held; err != nil {
				t.Errorf("held request: %v", err)
			}
		}
	}()
	if r := call(t, c, addr, kv()); r.Code != remoting.ResponseSystemBusy {
		t.Fatalf("a third default-pool request answered %d %q; want SYSTEM_BUSY (the test needs the pool full)", r.Code, r.Remark)
	}

	b := testBroker{cluster: "C", name: "b", addr: "127.0.0.1:10911"}
	b.register(t, c, addr)
	routed := func() bool { _, ok := n.Routes().ClusterInfo().BrokerAddrTable["b"]; return ok }
	if !routed() {
		t.Fatal("broker not routed after registering with the default pool full")
	}
	hb := call(t, c, addr, remoting.NewRequest(remoting.RequestBrokerHeartbeat, &wire.BrokerHeartbeatRequestHeader{
		ClusterName: "C", BrokerAddr: b.addr, BrokerName: "b"}, nil))
	dv := call(t, c, addr, remoting.NewRequest(remoting.RequestQueryDataVersion, &wire.QueryDataVersionRequestHeader{
		BrokerName: "b", BrokerAddr: b.addr, ClusterName: "C"}, []byte(`{"counter":0,"timestamp":0}`)))
	un := call(t, c, addr, remoting.NewRequest(remoting.RequestUnregisterBroker, &wire.UnregisterBrokerRequestHeader{
		BrokerName: "b", BrokerAddr: b.addr, Cluster: "C"}, nil))
	for name, r := range map[string]*remoting.RemotingCommand{"BROKER_HEARTBEAT": hb, "QUERY_DATA_VERSION": dv, "UNREGISTER_BROKER": un} {
		if r.Code != remoting.ResponseSuccess {
			t.Errorf("%s with the default pool full: %d %q", name, r.Code, r.Remark)
		}
	}
	testutil.WaitFor(t, 5*time.Second, "the unregistered broker gone from the routes", func() bool { return !routed() })
}
