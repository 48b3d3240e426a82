package broker

import (
	"context"
	"encoding/json"
	"fmt"
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

// warnBroker is a broker over a fake replica whose warnings the test
// observes and whose WarnLimiters read the test's clock, which stands
// still unless the test moves it.
type warnBroker struct {
	c     *Controller
	pc    *procCluster
	logs  *observer.ObservedLogs
	clock atomic.Int64 // unix ns
}

func startWarnBroker(t *testing.T) *warnBroker {
	t.Helper()
	_, nsAddr := startProcNameServer(t)
	port := testutil.FreePort(t)
	cfg := testBrokerConfig(t, nsAddr, port)
	rep := newFakeReplica(t, "127.0.0.1:"+strconv.Itoa(port))
	core, logs := observer.New(zap.WarnLevel)
	c, err := New(cfg, rep, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	w := &warnBroker{c: c, logs: logs}
	w.clock.Store(time.Unix(1_800_000_000, 0).UnixNano())
	now := func() time.Time { return time.Unix(0, w.clock.Load()) }
	c.txnRefusedWarn.Now, c.replyWarn.Now, c.sqlWarn.Now = now, now, now
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
	w.pc = &procCluster{t: t, client: client}
	return w
}

// checkBounded checks that n triggers at one instant logged msg once, and
// that one more after remoting.WarnInterval logs it again counting the n-1 held
// back in its heldKey field.
func (w *warnBroker) checkBounded(t *testing.T, msg, heldKey string, n int, trigger func()) {
	t.Helper()
	for range n {
		trigger()
	}
	if got := w.logs.FilterMessage(msg).Len(); got != 1 {
		t.Fatalf("%d warnings %q for %d triggers at one instant, want 1", got, msg, n)
	}
	w.clock.Add(int64(remoting.WarnInterval))
	trigger()
	all := w.logs.FilterMessage(msg).All()
	if len(all) != 2 || all[1].ContextMap()[heldKey] != int64(n-1) {
		t.Fatalf("after remoting.WarnInterval: %d warnings, last %v; want 2, the last counting %d held back", len(all), all[len(all)-1].ContextMap(), n-1)
	}
}

// TestReplyWarningsBounded: replies for a requester that is not connected
// are each refused with the reason, but logged at most once per
// remoting.WarnInterval, the next line counting the ones held back: a client
// cannot flood the broker's log.
func TestReplyWarningsBounded(t *testing.T) {
	w := startWarnBroker(t)
	w.checkBounded(t, "reply for a client not connected here", "replyWarningsNotLogged", 20, func() {
		t.Helper()
		props := wire.EncodeProperties(map[string]string{wire.PropertyReplyToClient: "nobody@here", wire.PropertyMessageType: wire.ReplyMessageFlag})
		r := w.pc.call(w.c.Addr(), remoting.RequestSendReplyMessage, sendExt(w.c.replyTopic(), 0, props), []byte("reply"))
		if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "not found") {
			t.Fatalf("reply to a requester not connected: code %d remark %q", r.Code, r.Remark)
		}
	})
}

// TestSQLWarningsBounded: a bad SQL92 subscription is warned once per
// expression text, and a client that changes the text on every heartbeat
// gets at most one warning per remoting.WarnInterval.
func TestSQLWarningsBounded(t *testing.T) {
	w := startWarnBroker(t)
	i := 0
	w.checkBounded(t, "consumer group subscribes with a SQL92 expression this broker cannot use; its pulls will fail",
		"sqlWarningsNotLogged", 20, func() {
			t.Helper()
			i++
			hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@sql", ConsumerDataSet: []wire.HeartbeatConsumerData{{
				GroupName: "SQLG", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
				SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "SQLT", SubString: fmt.Sprintf("a%d >", i), ExpressionType: "SQL92", SubVersion: int64(i)}},
			}}})
			if r := w.pc.call(w.c.Addr(), remoting.RequestHeartBeat, nil, hb); r.Code != remoting.ResponseSuccess {
				t.Fatalf("heartbeat: %d %s", r.Code, r.Remark)
			}
		})
}
