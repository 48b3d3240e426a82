package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

func newTestAdmin(t *testing.T, ns *namesrv.NameServer) *Admin {
	t.Helper()
	a, err := NewAdmin(NameServers(ns.Addr().String()), WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	return a
}

func okBody(body string) func(*remoting.RemotingCommand) *remoting.RemotingCommand {
	return func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		r := remoting.NewResponse(remoting.ResponseSuccess, "")
		r.Body = []byte(body)
		return r
	}
}

func TestAdminNameServerCalls(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 4, "U": 2})
	a := newTestAdmin(t, ns)
	ctx := context.Background()
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ci.BrokerAddrTable["broker-a"].BrokerAddrs[0] != b.addr || !slices.Equal(ci.ClusterAddrTable["C"], []string{"broker-a"}) {
		t.Fatalf("cluster info %+v", ci)
	}
	topics, err := a.TopicList(ctx)
	if err != nil || !slices.Contains(topics, "T") || !slices.Contains(topics, "U") {
		t.Fatalf("topics %v %v", topics, err)
	}
	rd, err := a.TopicRoute(ctx, "T")
	if err != nil || rd.QueueDatas[0].ReadQueueNums != 4 {
		t.Fatalf("route %+v %v", rd, err)
	}
	if _, err := a.TopicRoute(ctx, "Nope"); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("unknown topic: %v", err)
	}
	if _, err := a.CreateTopic(ctx, TopicSpec{Topic: "N", ReadQueueNums: 1, WriteQueueNums: 1}, "NoCluster", ""); !errors.Is(err, ErrNoBroker) {
		t.Fatalf("unknown cluster: %v", err)
	}
}

func TestAdminTopicCreateDeleteStatus(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 2})
	a := newTestAdmin(t, ns)
	ctx := context.Background()
	done, err := a.CreateTopic(ctx, TopicSpec{Topic: "New", ReadQueueNums: 8, WriteQueueNums: 8, Order: true}, "C", "")
	if err != nil || !slices.Equal(done, []string{b.addr}) {
		t.Fatalf("create: %v %v", done, err)
	}
	var h wire.CreateTopicRequestHeader
	if err := b.requests(remoting.RequestUpdateAndCreateTopic)[0].DecodeHeader(&h); err != nil {
		t.Fatal(err)
	}
	if h != (wire.CreateTopicRequestHeader{Topic: "New", DefaultTopic: "TBW102", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 6, TopicFilterType: "SINGLE_TAG", Order: true}) {
		t.Fatalf("create header %+v", h)
	}

	// The shape a RocketMQ (and raftmq) broker writes: fastjson keys that are objects.
	b.answer(remoting.RequestGetTopicStatsInfo, okBody(`{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"minOffset":3,"maxOffset":40,"lastUpdateTimestamp":1700000000000},
		{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"minOffset":0,"maxOffset":12,"lastUpdateTimestamp":0}}}`))
	st, err := a.TopicStatus(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st[0].Queue != (MessageQueue{"T", "broker-a", 0}) || st[0].MaxOffset != 12 ||
		st[1].MinOffset != 3 || st[1].MaxOffset != 40 || st[1].LastUpdate.UnixMilli() != 1700000000000 {
		t.Fatalf("status %+v", st)
	}

	// A not-leader answer is followed to the leader it names.
	leader := startQBroker(t, "broker-a")
	b.setNotLeader(leader.addr)
	if _, err := a.CreateTopic(ctx, TopicSpec{Topic: "Again", ReadQueueNums: 1, WriteQueueNums: 1}, "C", ""); err != nil {
		t.Fatal(err)
	}
	if len(leader.requests(remoting.RequestUpdateAndCreateTopic)) != 1 {
		t.Fatal("create did not reach the leader")
	}
	b.setNotLeader("")

	// The leader learned from the hint stands until the name servers
	// route another master than the refuted one, as for sends.
	if err := a.DeleteTopic(ctx, "T", "C"); err != nil {
		t.Fatal(err)
	}
	if len(leader.requests(remoting.RequestDeleteTopicInBroker)) != 1 {
		t.Fatal("no DELETE_TOPIC_IN_BROKER at the learned leader")
	}
	if _, err := a.TopicRoute(ctx, "T"); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("route after delete: %v", err)
	}
}

func TestAdminConsumerProgressAndReset(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 2, wire.RetryTopic("G"): 1})
	a := newTestAdmin(t, ns)
	ctx := context.Background()
	b.answer(remoting.RequestGetConsumeStats, okBody(`{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":100,"consumerOffset":60,"lastTimestamp":0},{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"brokerOffset":5,"consumerOffset":5,"lastTimestamp":1700000000000}},"consumeTps":0.0}`))
	prog, err := a.ConsumerProgress(ctx, "G", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) != 2 || prog[0].Lag != 40 || prog[1].Lag != 0 || prog[1].LastTimestamp.UnixMilli() != 1700000000000 || !prog[0].LastTimestamp.IsZero() {
		t.Fatalf("progress %+v", prog)
	}
	var ch struct {
		ConsumerGroup string `ext:"consumerGroup"`
	}
	_ = b.requests(remoting.RequestGetConsumeStats)[0].DecodeHeader(&ch)
	if ch.ConsumerGroup != "G" {
		t.Fatalf("header %+v", ch)
	}

	// Reset by time, broker without 222: SEARCH_OFFSET_BY_TIMESTAMP + UPDATE_CONSUMER_OFFSET.
	base := time.Now().Add(-time.Hour).UnixMilli()
	for i := range 5 {
		b.putAt("T", 0, []byte("x"), nil, base+int64(i)*1000, 0)
		b.putAt("T", 1, []byte("y"), nil, base+int64(i)*1000, 0)
	}
	b.mu.Lock()
	b.offsets["G|T|0"] = 5
	b.offsets["G|T|1"] = 1
	b.mu.Unlock()
	b.answer(remoting.RequestInvokeBrokerToResetOffset, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseRequestCodeNotSupported, "not supported")
	})
	got, err := a.ResetOffsetByTime(ctx, "G", "T", time.UnixMilli(base+2000), false)
	if err != nil {
		t.Fatal(err)
	}
	// Queue 1 is already before the target: without force it stays.
	if len(got) != 1 || got[MessageQueue{"T", "broker-a", 0}] != 2 {
		t.Fatalf("reset %v", got)
	}
	if off, _ := b.offset("G", "T", 0); off != 2 {
		t.Fatalf("broker offset %d", off)
	}
	if off, _ := b.offset("G", "T", 1); off != 1 {
		t.Fatalf("queue 1 moved forward without force: %d", off)
	}
	// A broker that does it itself answers ResetOffsetBody.
	b.answer(remoting.RequestInvokeBrokerToResetOffset, okBody(`{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:7}}`))
	got, err = a.ResetOffsetByTime(ctx, "G", "T", time.Now(), true)
	if err != nil || got[MessageQueue{"T", "broker-a", 0}] != 7 {
		t.Fatalf("reset via 222: %v %v", got, err)
	}
	var rh wire.ResetOffsetRequestHeader
	reqs := b.requests(remoting.RequestInvokeBrokerToResetOffset)
	_ = reqs[len(reqs)-1].DecodeHeader(&rh)
	// queueId -1 asks for every queue (0 would be queue 0 only).
	if rh.Group != "G" || rh.Topic != "T" || !rh.IsForce || rh.QueueID != -1 || rh.Offset != -1 {
		t.Fatalf("reset header %+v", rh)
	}
}

func TestAdminMessageLookupAndConfig(t *testing.T) {
	ns := startNameServer(t)
	b := startQBroker(t, "broker-a")
	b.register(t, ns, 0, map[string]int{"T": 1})
	a := newTestAdmin(t, ns)
	ctx := context.Background()
	store := netip.MustParseAddrPort(b.addr)
	b.answer(remoting.RequestViewMessageByID, func(req *remoting.RemotingCommand) *remoting.RemotingCommand {
		var h struct {
			Offset int64 `ext:"offset"`
		}
		_ = req.DecodeHeader(&h)
		r := remoting.NewResponse(remoting.ResponseSuccess, "")
		r.Body = encodeStored(t, storedMessage{topic: "T", body: []byte("found"), physical: h.Offset, store: store,
			props: wire.EncodeProperties(map[string]string{wire.PropertyKeys: "order-1"})})
		return r
	})
	id := wire.EncodeMessageID(wire.MessageID{Addr: store, Offset: 4242})
	m, err := a.ViewMessage(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Body) != "found" || m.CommitLogOffset != 4242 || m.OffsetMsgID != id {
		t.Fatalf("view %v", m)
	}
	if _, err := a.ViewMessage(ctx, "nothex"); !errors.Is(err, ErrInvalidMessageID) {
		t.Fatalf("bad id: %v", err)
	}

	b.answer(remoting.RequestQueryMessage, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		r := remoting.NewResponse(remoting.ResponseSuccess, "")
		// The index is by hash: a collision brings another key along.
		r.Body = append(encodeStored(t, storedMessage{topic: "T", body: []byte("a"), store: store, props: wire.EncodeProperties(map[string]string{wire.PropertyKeys: "k1 k2"})}),
			encodeStored(t, storedMessage{topic: "T", body: []byte("b"), store: store, physical: 100, props: wire.EncodeProperties(map[string]string{wire.PropertyKeys: "other"})})...)
		return r
	})
	msgs, err := a.QueryMessageByKey(ctx, "T", "k2", 10, time.Now().Add(-time.Hour), time.Now())
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "a" {
		t.Fatalf("by key: %v %v", msgs, err)
	}
	var qh wire.QueryMessageRequestHeader
	_ = b.requests(remoting.RequestQueryMessage)[0].DecodeHeader(&qh)
	if qh.Topic != "T" || qh.Key != "k2" || qh.MaxNum != 10 || qh.EndTimestamp <= qh.BeginTimestamp {
		t.Fatalf("query header %+v", qh)
	}
	b.answer(remoting.RequestQueryMessage, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseQueryNotFound, "none")
	})
	if _, err := a.QueryMessageByKey(ctx, "T", "zz", 10, time.Now().Add(-time.Hour), time.Now()); !errors.Is(err, ErrMessageNotFound) {
		t.Fatalf("missing key: %v", err)
	}

	b.answer(remoting.RequestGetBrokerConfig, okBody("# raftmq\nbrokerName=broker-a\nlistenPort = 10911\n\nflushDiskType=SYNC_FLUSH\n"))
	cfg, err := a.BrokerConfig(ctx, b.addr)
	if err != nil || cfg["brokerName"] != "broker-a" || cfg["listenPort"] != "10911" || len(cfg) != 3 {
		t.Fatalf("config %v %v", cfg, err)
	}
	b.answer(remoting.RequestUpdateBrokerConfig, func(*remoting.RemotingCommand) *remoting.RemotingCommand {
		return remoting.NewResponse(remoting.ResponseSystemError, "runtime broker config updates are not supported by raftmq")
	})
	var be *BrokerError
	if err := a.UpdateBrokerConfig(ctx, b.addr, map[string]string{"x": "1"}); !errors.As(err, &be) || be.Code != remoting.ResponseSystemError {
		t.Fatalf("update config: %v", err)
	}
	if body := string(b.requests(remoting.RequestUpdateBrokerConfig)[0].Body); body != "x=1\n" {
		t.Fatalf("update body %q", body)
	}
	// Config text is Java properties both ways (MixAll.string2Properties):
	// escapes are read, and an update is written so a broker reads the
	// same value back; a line break, which RocketMQ's own writer
	// (properties2String) cannot carry, is refused before sending.
	b.answer(remoting.RequestGetBrokerConfig, okBody(`storePathRootDir=C:\\data\\x=1:2\n#y`+"\nnamesrvAddr = a:9876;b:9876\n"))
	if cfg, err = a.BrokerConfig(ctx, b.addr); err != nil || cfg["storePathRootDir"] != "C:\\data\\x=1:2\n#y" || cfg["namesrvAddr"] != "a:9876;b:9876" || len(cfg) != 2 {
		t.Fatalf("escaped config %q %v", cfg, err)
	}
	if err := a.UpdateBrokerConfig(ctx, b.addr, map[string]string{"msgTraceTopicName": `C:\t=1`}); err == nil {
		t.Fatal("update with a backslash: the fake broker answers SYSTEM_ERROR, want that error")
	}
	if body := string(b.requests(remoting.RequestUpdateBrokerConfig)[1].Body); body != `msgTraceTopicName=C:\\t=1`+"\n" {
		t.Fatalf("update body with a backslash %q", body)
	}
	if err := a.UpdateBrokerConfig(ctx, b.addr, map[string]string{"k": "a\nb"}); !errors.Is(err, ErrInvalidOption) || len(b.requests(remoting.RequestUpdateBrokerConfig)) != 2 {
		t.Fatalf("update with a line break: %v, want ErrInvalidOption and nothing sent", err)
	}

	sg := wire.DefaultSubscriptionGroupConfig("G")
	sg.ConsumeMessageOrderly = true
	if _, err := a.UpdateSubscriptionGroup(ctx, sg, "C", ""); err != nil {
		t.Fatal(err)
	}
	var sent wire.SubscriptionGroupConfig
	if err := json.Unmarshal(b.requests(remoting.RequestUpdateAndCreateSubscriptionGroup)[0].Body, &sent); err != nil || sent != sg {
		t.Fatalf("subscription group %+v %v", sent, err)
	}
}

func TestDecodeQueueTable(t *testing.T) {
	for _, tc := range []struct {
		body string
		n    int
		ok   bool
	}{
		{`{"offsetTable":{}}`, 0, true},
		{`{"x":1}`, 0, true},
		{`{"offsetTable":{{"brokerName":"b","queueId":2,"topic":"T"} : 5 , {"brokerName":"b","queueId":1,"topic":"T"}:6}}`, 2, true},
		{`{"offsetTable":{"T@b@0":5}}`, 0, false},
		{`{"offsetTable":{{"brokerName":"b","queueId":2,"topic":"T"}:5`, 0, false},
	} {
		got, err := decodeQueueTable([]byte(tc.body), "offsetTable")
		if (err == nil) != tc.ok || len(got) != tc.n {
			t.Errorf("%s: %v %v", tc.body, got, err)
		}
		if tc.n == 2 && (got[0].Queue.QueueID != 1 || string(got[0].Value) != "6") {
			t.Errorf("order/value: %+v", got)
		}
	}
	if _, err := decodeQueueTable([]byte(`{"offsetTable":{"T@b@0":5}}`), "offsetTable"); !errors.Is(err, ErrMalformedMessage) {
		t.Errorf("error type: %v", err)
	}
}
