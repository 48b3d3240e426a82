package broker

import (
	"fmt"
	"testing"

	"github.com/raftmq/raftmq/remoting"
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
