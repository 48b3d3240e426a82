package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Each lookup holds the brokers' answers (up to 16 MiB per broker group)
// until they are clipped, and without a console account anyone reaching
// the port may look up: concurrent lookups were unbounded, and so was the
// name server's memory. Past maxLookups in flight, a lookup is refused
// with 429 at once.
func TestLookupsBounded(t *testing.T) {
	ns := startNamesrv(t)
	release := make(chan struct{})
	var inFlight atomic.Int32
	srv := remoting.NewServer(remoting.ServerConfig{ListenAddr: "127.0.0.1:0"}, nil)
	srv.Register(remoting.RequestQueryMessage, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		inFlight.Add(1)
		<-release
		return remoting.NewResponse(remoting.ResponseQueryNotFound, "nothing"), nil
	}, 2*maxLookups, 16)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	if _, err := ns.Routes().RegisterBroker(namesrv.RegisterBrokerArgs{Cluster: "C", BrokerAddr: srv.Addr().String(), BrokerName: "broker-a",
		Topics: wire.TopicConfigSerializeWrapper{TopicConfigTable: map[string]wire.TopicConfig{
			"T": {TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}}, DataVersion: wire.DataVersion{Counter: 1, Timestamp: 1}}}); err != nil {
		t.Fatal(err)
	}
	c, err := New(ns, Options{TransferWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hs := httptest.NewServer(c.Handler())
	defer hs.Close()

	var wg sync.WaitGroup
	defer wg.Wait()
	var once sync.Once
	defer once.Do(func() { close(release) })
	for range maxLookups {
		wg.Go(func() {
			resp, err := http.Get(hs.URL + "/api/message?topic=T&key=k")
			if err == nil {
				resp.Body.Close()
			}
		})
	}
	testutil.WaitFor(t, 10*time.Second, "the lookups at the broker", func() bool { return inFlight.Load() == maxLookups })
	cl := &http.Client{Timeout: 3 * time.Second}
	resp, err := cl.Get(hs.URL + "/api/message?topic=T&key=k")
	if err != nil {
		t.Fatalf("lookup past the bound: %v (it waited instead of being refused)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("lookup past the bound: %d, want 429", resp.StatusCode)
	}
	once.Do(func() { close(release) })
	wg.Wait()
	// Tokens are given back: the next lookup runs (and finds nothing).
	resp, err = cl.Get(hs.URL + "/api/message?topic=T&key=k")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("lookup after the others ended: %d, want 404", resp.StatusCode)
	}
}
