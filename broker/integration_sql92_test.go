package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/filter"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// SQL92 subscriptions over the wire, on one node over a fake replica: the
// answers of CHECK_CLIENT_CONFIG, HEART_BEAT and PULL_MESSAGE.

const sqlExpr = "a >= 5 AND TAGS <> 'TagB'"

func sqlEnabled(c *BrokerConfig) { c.EnablePropertyFilter = true }

// checkClientBody is a CHECK_CLIENT_CONFIG body for one subscription.
func checkClientBody(t *testing.T, exprType, expr string) []byte {
	t.Helper()
	b, err := json.Marshal(wire.CheckClientRequestBody{ClientID: "127.0.0.1@c1", Group: "G",
		SubscriptionData: &wire.SubscriptionData{Topic: "T", SubString: expr, ExpressionType: exprType, SubVersion: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compileErr is the parser's message for expr, which the broker's remark
// must carry.
func compileErr(t *testing.T, expr string) string {
	t.Helper()
	_, err := filter.Compile(expr)
	if err == nil {
		t.Fatalf("%q compiles", expr)
	}
	return err.Error()
}

func TestCheckClientConfigSQL92(t *testing.T) {
	off, _ := startFakeProc(t, nil)
	on, _ := startFakeProc(t, sqlEnabled)
	bad := "a > AND b = 1"
	cases := []struct {
		name     string
		tc       *procCluster
		body     []byte
		want     int16
		inRemark string
	}{
		{"tag, filter off", off, checkClientBody(t, "TAG", "TagA || TagB"), remoting.ResponseSuccess, ""},
		{"no type, filter off", off, checkClientBody(t, "", "*"), remoting.ResponseSuccess, ""},
		{"no body", off, nil, remoting.ResponseSuccess, ""},
		{"SQL92, filter off", off, checkClientBody(t, "SQL92", sqlExpr), remoting.ResponseSystemError, "enablePropertyFilter"},
		{"SQL92, filter on", on, checkClientBody(t, "SQL92", sqlExpr), remoting.ResponseSuccess, ""},
		{"bad SQL92", on, checkClientBody(t, "SQL92", bad), remoting.ResponseSubscriptionParseFailed, compileErr(t, bad)},
		{"unknown type", on, checkClientBody(t, "CLASS", "x"), remoting.ResponseSubscriptionParseFailed, "CLASS"},
		{"malformed body", on, []byte("{"), remoting.ResponseSystemError, "CHECK_CLIENT_CONFIG"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := c.tc.call(c.tc.nodes[0].Addr(), remoting.RequestCheckClientConfig, nil, c.body)
			if resp.Code != c.want || !strings.Contains(resp.Remark, c.inRemark) {
				t.Fatalf("code %d remark %q; want %d with %q", resp.Code, resp.Remark, c.want, c.inRemark)
			}
		})
	}
}

// sendProps sends one message with properties to queue 0 of topic.
func sendProps(t *testing.T, tc *procCluster, topic, body string, props map[string]string) {
	t.Helper()
	resp := tc.call(tc.nodes[0].Addr(), remoting.RequestSendMessage, sendExt(topic, 0, wire.EncodeProperties(props)), []byte(body))
	if resp.Code != remoting.ResponseSuccess {
		t.Fatalf("send %s: %d %s", body, resp.Code, resp.Remark)
	}
}

// sendSQLSet sends messages m0..m(n-1) to queue 0 with property a=i and
// tags alternating TagA/TagB, and returns the bodies sqlExpr selects.
func sendSQLSet(t *testing.T, tc *procCluster, topic string, n int) []string {
	t.Helper()
	var want []string
	for i := range n {
		tag := "TagA"
		if i%2 == 1 {
			tag = "TagB"
		}
		body := fmt.Sprintf("m%d", i)
		sendProps(t, tc, topic, body, map[string]string{"a": strconv.Itoa(i), wire.PropertyTags: tag})
		if i >= 5 && tag != "TagB" {
			want = append(want, body)
		}
	}
	return want
}

// sqlPullExt is a pull of queue 0 from offset, carrying its own
// subscription when exprType is not "".
func sqlPullExt(group, topic string, offset int64, exprType, expr string) map[string]string {
	ext := pullExt(group, topic, 0, offset, 0)
	if exprType != "" {
		ext["sysFlag"] = strconv.Itoa(int(wire.PullFlagSubscription))
		ext["subscription"], ext["expressionType"] = expr, exprType
	}
	return ext
}

// heartbeatSub registers group with one subscription to topic.
func heartbeatSub(t *testing.T, tc *procCluster, group, topic, exprType, expr string) {
	t.Helper()
	if resp := heartbeatSubAnswer(tc, group, &wire.SubscriptionData{Topic: topic, SubString: expr, ExpressionType: exprType}); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat of %s: %d %s", group, resp.Code, resp.Remark)
	}
}

// heartbeatSubAnswer sends a heartbeat of group with the one subscription
// sd and returns the answer.
func heartbeatSubAnswer(tc *procCluster, group string, sd *wire.SubscriptionData) *remoting.RemotingCommand {
	sd.SubVersion = time.Now().UnixNano()
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "127.0.0.1@" + group, ConsumerDataSet: []wire.HeartbeatConsumerData{{
		GroupName: group, ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []*wire.SubscriptionData{sd},
	}}})
	return tc.call(tc.nodes[0].Addr(), remoting.RequestHeartBeat, nil, hb)
}

// pulledBodies checks a found pull and returns its bodies and next offset.
func pulledBodies(t *testing.T, resp *remoting.RemotingCommand) ([]string, int64) {
	t.Helper()
	var h wire.PullMessageResponseHeader
	if err := resp.DecodeHeader(&h); err != nil {
		t.Fatal(err)
	}
	if resp.Code != remoting.ResponseSuccess {
		return nil, h.NextBeginOffset
	}
	var out []string
	for _, m := range decodeAll(t, resp.Body) {
		out = append(out, string(m.Body))
	}
	return out, h.NextBeginOffset
}

// TestPullSQL92: a pull of a SQL92 subscription returns exactly the
// matching messages and moves its offset past the others, whether the
// expression comes with the pull, from the group's heartbeat, or in the
// official Go client's shape (type TAG in the pull, SQL92 in the
// heartbeat); the refusals carry RocketMQ's codes and say why.
func TestPullSQL92(t *testing.T) {
	tc, _ := startFakeProc(t, sqlEnabled)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "T", 1)
	want := sendSQLSet(t, tc, "T", 20)

	expectSet := func(name string, resp *remoting.RemotingCommand) {
		t.Helper()
		got, next := pulledBodies(t, resp)
		if resp.Code != remoting.ResponseSuccess || !slices.Equal(got, want) || next != 20 {
			t.Fatalf("%s: code %d %q, got %v next %d; want %v next 20", name, resp.Code, resp.Remark, got, next, want)
		}
	}
	expectSet("own expression", tc.call(addr, remoting.RequestPullMessage, sqlPullExt("G1", "T", 0, "SQL92", sqlExpr), nil))

	// Nothing matches: PULL_RETRY_IMMEDIATELY, and the offset still moves
	// past every message scanned.
	resp := tc.call(addr, remoting.RequestPullMessage, sqlPullExt("G1", "T", 0, "SQL92", "a > 100"), nil)
	if _, next := pulledBodies(t, resp); resp.Code != remoting.ResponsePullRetryImmediately || next != 20 {
		t.Fatalf("no match: code %d next %d; want %d next 20", resp.Code, next, remoting.ResponsePullRetryImmediately)
	}

	heartbeatSub(t, tc, "G2", "T", "SQL92", sqlExpr)
	expectSet("heartbeat's expression", tc.call(addr, remoting.RequestPullMessage, sqlPullExt("G2", "T", 0, "", ""), nil))
	official := sqlPullExt("G2", "T", 0, "TAG", sqlExpr) // PostSubscriptionWhenPull
	expectSet("official client's shape", tc.call(addr, remoting.RequestPullMessage, official, nil))
	noFlag := pullExt("G2", "T", 0, 0, 0)
	noFlag["expressionType"] = "TAG"
	expectSet("official client's default shape", tc.call(addr, remoting.RequestPullMessage, noFlag, nil))

	// A posted TAG expression that is not the heartbeat's SQL92 text is a
	// tag subscription of its own (a tag consumer in the same group).
	tagA := sqlPullExt("G2", "T", 0, "TAG", "TagA")
	if got, next := pulledBodies(t, tc.call(addr, remoting.RequestPullMessage, tagA, nil)); len(got) != 10 || next != 20 {
		t.Fatalf("tag pull in a SQL92 group: %v next %d; want the 10 TagA messages", got, next)
	}
	// Before any heartbeat, SQL text posted as TAG (the official client's
	// PostSubscriptionWhenPull) must not be read as tags, which would
	// match nothing and move the offset past wanted messages: the pull
	// gets everything instead, and the client's tag re-filter is a no-op.
	unknown := sqlPullExt("G-unknown", "T", 0, "TAG", sqlExpr)
	if got, next := pulledBodies(t, tc.call(addr, remoting.RequestPullMessage, unknown, nil)); len(got) != 20 || next != 20 {
		t.Fatalf("SQL text posted as TAG before a heartbeat: %v next %d; want all 20", got, next)
	}

	bad := "a BETWEEN 5"
	refusals := []struct {
		name     string
		ext      map[string]string
		want     int16
		inRemark string
	}{
		{"bad own expression", sqlPullExt("G1", "T", 0, "SQL92", bad), remoting.ResponseSubscriptionParseFailed, compileErr(t, bad)},
		{"unknown type", sqlPullExt("G1", "T", 0, "CLASS", "x"), remoting.ResponseSubscriptionParseFailed, "CLASS"},
		{"SQL92 without a subscription", func() map[string]string {
			ext := pullExt("G_NONE", "T", 0, 0, 0)
			ext["expressionType"] = "SQL92"
			return ext
		}(), remoting.ResponseSubscriptionNotExist, "G_NONE"},
	}
	heartbeatSub(t, tc, "G3", "T", "SQL92", bad)
	heartbeatSub(t, tc, "G3", "T", "SQL92", bad) // a second heartbeat still succeeds
	refusals = append(refusals, struct {
		name     string
		ext      map[string]string
		want     int16
		inRemark string
	}{"heartbeat's expression does not compile", pullExt("G3", "T", 0, 0, 0), remoting.ResponseFilterDataNotExist, compileErr(t, bad)})
	for _, r := range refusals {
		resp := tc.call(addr, remoting.RequestPullMessage, r.ext, nil)
		if resp.Code != r.want || !strings.Contains(resp.Remark, r.inRemark) {
			t.Fatalf("%s: code %d remark %q; want %d with %q", r.name, resp.Code, resp.Remark, r.want, r.inRemark)
		}
	}

	// An empty property is null, as in RocketMQ: b IS NOT NULL selects
	// neither b="" nor a message without b.
	tc.createTopic(addr, "E", 1)
	sendProps(t, tc, "E", "with-empty-b", map[string]string{"b": ""})
	sendProps(t, tc, "E", "without-b", map[string]string{"c": "1"})
	sendProps(t, tc, "E", "with-b", map[string]string{"b": "x"})
	got, _ := pulledBodies(t, tc.call(addr, remoting.RequestPullMessage, sqlPullExt("G1", "E", 0, "SQL92", "b IS NOT NULL"), nil))
	if !slices.Equal(got, []string{"with-b"}) {
		t.Fatalf("b IS NOT NULL selected %v", got)
	}

	// Retry topics are not filtered.
	retry := wire.RetryTopic("G1")
	tc.createTopic(addr, retry, 1)
	sendProps(t, tc, retry, "redelivered", map[string]string{"a": "1"})
	got, _ = pulledBodies(t, tc.call(addr, remoting.RequestPullMessage, sqlPullExt("G1", retry, 0, "SQL92", sqlExpr), nil))
	if !slices.Equal(got, []string{"redelivered"}) {
		t.Fatalf("retry topic pull returned %v; want the message unfiltered", got)
	}
}

// TestPullSQL92FilterOff: without enablePropertyFilter a SQL92 pull is a
// SYSTEM_ERROR naming the key, while tag pulls work as always.
func TestPullSQL92FilterOff(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "T", 1)
	sendSQLSet(t, tc, "T", 4)
	heartbeatSub(t, tc, "G2", "T", "SQL92", sqlExpr)
	for name, ext := range map[string]map[string]string{
		"own":       sqlPullExt("G1", "T", 0, "SQL92", sqlExpr),
		"heartbeat": pullExt("G2", "T", 0, 0, 0),
	} {
		resp := tc.call(addr, remoting.RequestPullMessage, ext, nil)
		if resp.Code != remoting.ResponseSystemError || !strings.Contains(resp.Remark, "enablePropertyFilter") {
			t.Fatalf("%s: code %d remark %q; want SYSTEM_ERROR naming enablePropertyFilter", name, resp.Code, resp.Remark)
		}
	}
	got, _ := pulledBodies(t, tc.call(addr, remoting.RequestPullMessage, sqlPullExt("G1", "T", 0, "TAG", "TagB"), nil))
	if !slices.Equal(got, []string{"m1", "m3"}) {
		t.Fatalf("tag pull returned %v", got)
	}
}

// TestHeldPullSQL92: a long poll of a SQL92 subscription is answered
// with the filter applied: a non-matching arrival gives an empty answer
// that moves the offset past it, a matching one is returned.
func TestHeldPullSQL92(t *testing.T) {
	tc, _ := startFakeProc(t, sqlEnabled)
	node := tc.nodes[0]
	addr := node.Addr()
	tc.createTopic(addr, "H", 1)
	heldPull := func(offset int64) <-chan *remoting.RemotingCommand {
		ext := sqlPullExt("G", "H", offset, "SQL92", sqlExpr)
		ext["sysFlag"] = strconv.Itoa(int(wire.PullFlagSubscription | wire.PullFlagSuspend))
		ext["suspendTimeoutMillis"] = "20000"
		return tc.parkPull(node, ext)
	}

	ch := heldPull(0)
	sendProps(t, tc, "H", "no-match", map[string]string{"a": "9", wire.PropertyTags: "TagB"})
	resp := <-ch
	got, next := pulledBodies(t, resp)
	if resp.Code != remoting.ResponsePullRetryImmediately || len(got) != 0 || next != 1 {
		t.Fatalf("held pull woken by a non-matching message: code %d %q, %v next %d; want no message, next 1",
			resp.Code, resp.Remark, got, next)
	}
	ch = heldPull(next)
	sendProps(t, tc, "H", "match", map[string]string{"a": "9", wire.PropertyTags: "TagA"})
	resp = <-ch
	if got, next := pulledBodies(t, resp); resp.Code != remoting.ResponseSuccess || !slices.Equal(got, []string{"match"}) || next != 2 {
		t.Fatalf("held pull woken by a matching message: code %d %q, %v next %d", resp.Code, resp.Remark, got, next)
	}
}

// TestHeldPullSeesNewSubscription: a pull held while the group's heartbeat
// changes its SQL92 expression is answered with the new expression, so a
// message the new one selects is delivered, not skipped.
func TestHeldPullSeesNewSubscription(t *testing.T) {
	tc, _ := startFakeProc(t, sqlEnabled)
	node := tc.nodes[0]
	addr := node.Addr()
	tc.createTopic(addr, "H2", 1)
	heartbeatSub(t, tc, "GH", "H2", "SQL92", "a > 100")
	ch := tc.parkPull(node, pullExt("GH", "H2", 0, 0, 20000))
	heartbeatSub(t, tc, "GH", "H2", "SQL92", sqlExpr)
	sendProps(t, tc, "H2", "match", map[string]string{"a": "9", wire.PropertyTags: "TagA"})
	resp := <-ch
	if got, next := pulledBodies(t, resp); resp.Code != remoting.ResponseSuccess || !slices.Equal(got, []string{"match"}) || next != 1 {
		t.Fatalf("held pull after the subscription changed: code %d %q, %v next %d; want the message the new expression selects",
			resp.Code, resp.Remark, got, next)
	}
}

// parkPull sends a suspending pull to node in the background and returns
// once node holds it; the answer (or the call's error as code -1) arrives
// on the channel.
func (tc *procCluster) parkPull(node *Controller, ext map[string]string) <-chan *remoting.RemotingCommand {
	tc.t.Helper()
	ch := make(chan *remoting.RemotingCommand, 1)
	held := node.hold.heldCount()
	go func() {
		req := remoting.NewRequest(remoting.RequestPullMessage, nil, nil)
		for k, v := range ext {
			req.ExtFields[k] = v
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := tc.client.InvokeSync(ctx, node.Addr(), req)
		if err != nil {
			r = remoting.NewResponse(-1, err.Error())
		}
		ch <- r
	}()
	testutil.WaitFor(tc.t, 10*time.Second, "pull parked", func() bool { return node.hold.heldCount() > held })
	return ch
}
