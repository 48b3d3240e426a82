package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestRequesterTable: a requester is found by the connection its latest
// request came on; a connection remembers at most maxRequestersPerConn
// ids (oldest dropped), and its ids go when it closes.
func TestRequesterTable(t *testing.T) {
	tab := newRequesterTable()
	a, b := &remoting.Conn{}, &remoting.Conn{}
	tab.learn("c1", a)
	tab.learn("c1", b) // moved: the latest connection wins
	if tab.find("c1") != b || len(tab.byConn[a]) != 0 {
		t.Fatalf("c1 on %p, a holds %v", tab.find("c1"), tab.byConn[a])
	}
	for i := range 10 {
		tab.learn(fmt.Sprint("x", i), a)
	}
	if n := len(tab.byConn[a]); n != maxRequestersPerConn {
		t.Fatalf("a holds %d ids, want %d", n, maxRequestersPerConn)
	}
	if tab.find("x0") != nil || tab.find("x9") != a {
		t.Fatal("the oldest ids of a connection are not the ones dropped")
	}
	if len(tab.conns) != maxRequestersPerConn+1 {
		t.Fatalf("%d ids in the table", len(tab.conns))
	}
	tab.connClosed(a)
	tab.connClosed(b)
	if len(tab.conns) != 0 || len(tab.byConn) != 0 {
		t.Fatalf("left after close: %v %v", tab.conns, tab.byConn)
	}
}

// TestRequestReadBeforeItsConnectionClosed: a request message read from a
// connection that closes before a worker processes it (the requester
// shutting down with a request in flight) leaves nothing in the requester
// table: the close's removal has run, and the id learned on the closed
// connection would otherwise stay in the table as long as the broker runs.
func TestRequestReadBeforeItsConnectionClosed(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	node := tc.nodes[0]
	addr := node.Addr()
	tc.createTopic(addr, "RQ", 1)
	cli := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = cli.Close() })
	const id = "127.0.0.1@leaving-requester"
	props := wire.EncodeProperties(map[string]string{wire.PropertyReplyToClient: id})
	req := remoting.NewRequest(remoting.RequestSendMessage, nil, []byte("request"))
	for k, v := range sendExt("RQ", 0, props) {
		req.ExtFields[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r, err := cli.InvokeSync(ctx, addr, req); err != nil || r.Code != remoting.ResponseSuccess {
		t.Fatalf("request message: %v %v", r, err)
	}
	conn := node.reqs.find(id)
	if conn == nil {
		t.Fatal("the requester's connection was not learned from its request")
	}
	empty := func() bool {
		node.reqs.mu.Lock()
		defer node.reqs.mu.Unlock()
		return len(node.reqs.conns) == 0 && len(node.reqs.byConn) == 0
	}
	_ = cli.Close()
	testutil.WaitFor(t, 5*time.Second, "the requester's connection's ids gone with its close", empty)

	// The same request, processed now.
	node.stampRequest(wire.ParseProperties(props), conn)
	if !empty() {
		t.Fatalf("a request processed after its connection closed left %v in the requester table", node.reqs.conns)
	}
}
