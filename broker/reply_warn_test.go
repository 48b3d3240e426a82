package broker

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestReplyWarningsBounded: replies for a requester that is not connected
// are each refused with the reason, but logged at most once per
// warnInterval, the next line counting the ones held back: a client
// cannot flood the broker's log.
func TestReplyWarningsBounded(t *testing.T) {
	_, nsAddr := startProcNameServer(t)
	port := testutil.FreePort(t)
	cfg := testBrokerConfig(t, nsAddr, port)
	rep := newFakeReplica(t, "127.0.0.1:"+strconv.Itoa(port))
	core, logs := observer.New(zap.WarnLevel)
	c, err := New(cfg, rep, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64 // unix ns; stands still unless the test moves it
	clock.Store(time.Unix(1_800_000_000, 0).UnixNano())
	c.replyWarn.now = func() time.Time { return time.Unix(0, clock.Load()) }
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	client := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() {
		_ = client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	pc := &procCluster{t: t, client: client}
	reply := func() {
		t.Helper()
		props := wire.EncodeProperties(map[string]string{wire.PropertyReplyToClient: "nobody@here", wire.PropertyMessageType: wire.ReplyMessageFlag})
		r := pc.call(c.Addr(), remoting.RequestSendReplyMessage, sendExt(c.replyTopic(), 0, props), []byte("reply"))
		if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "not found") {
			t.Fatalf("reply to a requester not connected: code %d remark %q", r.Code, r.Remark)
		}
	}
	const n = 20
	for range n {
		reply()
	}
	warned := logs.FilterMessage("reply for a client not connected here")
	if warned.Len() != 1 {
		t.Fatalf("%d warnings for %d replies at one instant, want 1", warned.Len(), n)
	}
	clock.Add(int64(warnInterval))
	reply()
	all := logs.FilterMessage("reply for a client not connected here").All()
	if len(all) != 2 || all[1].ContextMap()["replyWarningsNotLogged"] != int64(n-1) {
		t.Fatalf("after warnInterval: %d warnings, last %v; want 2, the last counting %d held back", len(all), all[len(all)-1].ContextMap(), n-1)
	}
}
