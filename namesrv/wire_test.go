package namesrv

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// These tests drive the name server over real loopback sockets with our
// remoting client, request code by request code.

func TestRouteJSONStyle(t *testing.T) {
	ns := testServer(t, nil)
	addr := ns.Addr().String()
	c := testClient(t)
	testBroker{cluster: "C", name: "b1", addr: "127.0.0.1:10911", id: 0, topics: topics(1, tc("T", 8, 4, 6))}.register(t, c, addr)
	testBroker{cluster: "C", name: "b1", addr: "127.0.0.1:10921", id: 1, topics: topics(1, tc("T", 8, 4, 6))}.register(t, c, addr)

	const legacy = `"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"}`
	const standard = `"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"}`
	tests := []struct {
		name         string
		version      int16
		standardOnly bool
		want         string
	}{
		{"go client version 317 gets legacy keys", 317, false, legacy},
		{"version just below V4_9_4 gets legacy keys", 400, false, legacy},
		{"V4_9_4 gets standard JSON", 401, false, standard},
		{"acceptStandardJsonOnly overrides an old version", 317, true, standard},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := routeOf(t, c, addr, "T", tt.version, tt.standardOnly)
			if resp.Code != remoting.ResponseSuccess {
				t.Fatalf("code %d %s", resp.Code, resp.Remark)
			}
			if !bytes.Contains(resp.Body, []byte(tt.want)) {
				t.Fatalf("body %s\nwant it to contain %s", resp.Body, tt.want)
			}
			isStandard := tt.want == standard
			if json.Valid(resp.Body) != isStandard {
				t.Fatalf("json.Valid=%v for %s", json.Valid(resp.Body), resp.Body)
			}
			rd, err := wire.DecodeTopicRouteData(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			want := &wire.TopicRouteData{
				QueueDatas: []wire.QueueData{{BrokerName: "b1", ReadQueueNums: 8, WriteQueueNums: 4, Perm: 6}},
				BrokerDatas: []wire.BrokerData{{Cluster: "C", BrokerName: "b1",
					BrokerAddrs: map[int64]string{0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}}},
				FilterServerTable: map[string][]string{},
			}
			if !reflect.DeepEqual(rd, want) {
				t.Fatalf("decoded %+v\nwant %+v", rd, want)
			}
		})
	}
}

func TestUnknownTopicAndCode(t *testing.T) {
	ns := testServer(t, nil)
	addr := ns.Addr().String()
	c := testClient(t)
	resp := routeOf(t, c, addr, "Nope", 317, false)
	if resp.Code != remoting.ResponseTopicNotExist || !strings.Contains(resp.Remark, "Nope") {
		t.Fatalf("unknown topic: code %d remark %q", resp.Code, resp.Remark)
	}
	// RocketMQ 5 name-server codes raftmq does not serve are refused at
	// once, naming the code, rather than answered with something else:
	// GET_BROKER_MEMBER_GROUP (slave-acting-master brokers), the
	// controller's codes (Controller mode), and an unknown one.
	for _, code := range []int16{12345, remoting.RequestGetBrokerMemberGroup, remoting.RequestGetSystemTopicListFromBroker,
		remoting.RequestControllerAlterSyncStateSet, remoting.RequestControllerElectMaster, remoting.RequestControllerRegisterBroker,
		remoting.RequestControllerGetReplicaInfo, remoting.RequestControllerGetMetadataInfo, remoting.RequestControllerGetSyncStateData,
		remoting.RequestGetBrokerEpochCache, remoting.RequestNotifyBrokerRoleChanged, remoting.RequestUpdateControllerConfig,
		remoting.RequestGetControllerConfig, remoting.RequestControllerGetNextBrokerID, remoting.RequestControllerApplyBrokerID} {
		resp = call(t, c, addr, remoting.NewRequest(code, nil, nil))
		if resp.Code != remoting.ResponseRequestCodeNotSupported || !strings.Contains(resp.Remark, strconv.Itoa(int(code))) {
			t.Fatalf("code %d: got code %d %q", code, resp.Code, resp.Remark)
		}
	}
	// A request missing a required header field is a SYSTEM_ERROR naming it.
	resp = call(t, c, addr, remoting.NewRequest(remoting.RequestGetRouteInfoByTopic, nil, nil))
	if resp.Code != remoting.ResponseSystemError || !strings.Contains(resp.Remark, "topic") {
		t.Fatalf("missing topic header: code %d remark %q", resp.Code, resp.Remark)
	}
}

func TestConnCloseRemovesBroker(t *testing.T) {
	ns := testServer(t, nil)
	addr := ns.Addr().String()
	brokerSide := testClient(t)
	testBroker{cluster: "C", name: "b1", addr: "127.0.0.1:10911", id: 0, topics: topics(1, tc("T", 4, 4, 6))}.register(t, brokerSide, addr)
	lookup := testClient(t)
	if resp := routeOf(t, lookup, addr, "T", 317, false); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("route before close: %d", resp.Code)
	}
	// The lookup client's connection closing must not touch the broker.
	lookup.CloseConn(addr)
	brokerSide.CloseConn(addr)
	testutil.WaitFor(t, 5*time.Second, "broker removed after its connection closed", func() bool {
		return ns.Routes().PickupTopicRouteData("T") == nil
	})
	if resp := routeOf(t, lookup, addr, "T", 317, false); resp.Code != remoting.ResponseTopicNotExist {
		t.Fatalf("route after close: code %d", resp.Code)
	}
}

func TestKVConfigSurvivesRestart(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort = "127.0.0.1", 0
	cfg.KVConfigPath = t.TempDir() + "/sub/kvConfig.json"
	ns := startServer(t, cfg)
	c := testClient(t)
	put := func(addr, ns, k, v string) {
		t.Helper()
		resp := call(t, c, addr, remoting.NewRequest(remoting.RequestPutKVConfig, &wire.PutKVConfigRequestHeader{Namespace: ns, Key: k, Value: v}, nil))
		if resp.Code != remoting.ResponseSuccess {
			t.Fatalf("put: %d %s", resp.Code, resp.Remark)
		}
	}
	get := func(addr, ns, k string) *remoting.RemotingCommand {
		t.Helper()
		return call(t, c, addr, remoting.NewRequest(remoting.RequestGetKVConfig, &wire.KVConfigRequestHeader{Namespace: ns, Key: k}, nil))
	}
	addr := ns.Addr().String()
	put(addr, "NS1", "k1", "v1")
	put(addr, "NS1", "k2", "v2")
	put(addr, "NS2", "k", "x")
	if resp := call(t, c, addr, remoting.NewRequest(remoting.RequestDeleteKVConfig, &wire.KVConfigRequestHeader{Namespace: "NS1", Key: "k2"}, nil)); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("delete: %d", resp.Code)
	}
	stopServer(t, ns)

	ns2 := startServer(t, cfg)
	addr2 := ns2.Addr().String()
	if resp := get(addr2, "NS1", "k1"); resp.Code != remoting.ResponseSuccess || resp.ExtFields["value"] != "v1" {
		t.Fatalf("after restart get k1: code %d ext %v", resp.Code, resp.ExtFields)
	}
	if resp := get(addr2, "NS1", "k2"); resp.Code != remoting.ResponseQueryNotFound || !strings.Contains(resp.Remark, "k2") {
		t.Fatalf("deleted key after restart: code %d remark %q", resp.Code, resp.Remark)
	}
	resp := call(t, c, addr2, remoting.NewRequest(remoting.RequestGetKVListByNamespace, &wire.GetKVListByNamespaceRequestHeader{Namespace: "NS2"}, nil))
	var kv wire.KVTable
	if resp.Code != remoting.ResponseSuccess || json.Unmarshal(resp.Body, &kv) != nil || !reflect.DeepEqual(kv.Table, map[string]string{"k": "x"}) {
		t.Fatalf("kv list: code %d body %s", resp.Code, resp.Body)
	}
	resp = call(t, c, addr2, remoting.NewRequest(remoting.RequestGetKVListByNamespace, &wire.GetKVListByNamespaceRequestHeader{Namespace: "NS9"}, nil))
	if resp.Code != remoting.ResponseQueryNotFound {
		t.Fatalf("unknown namespace: code %d", resp.Code)
	}
}

func TestOrderTopicConfAndCompressedRegistration(t *testing.T) {
	ns := testServer(t, func(c *Config) { c.OrderMessageEnable = true })
	addr := ns.Addr().String()
	c := testClient(t)
	resp := call(t, c, addr, remoting.NewRequest(remoting.RequestPutKVConfig,
		&wire.PutKVConfigRequestHeader{Namespace: wire.NamespaceOrderTopicConfig, Key: "OrderT", Value: "b1:4"}, nil))
	if resp.Code != remoting.ResponseSuccess {
		t.Fatalf("put: %d", resp.Code)
	}
	reg := testBroker{cluster: "C", name: "b1", addr: "127.0.0.1:10911", id: 0, compressed: true,
		topics: topics(3, tc("OrderT", 4, 4, 6), tc("Other", 2, 2, 6))}.register(t, c, addr)
	var kv wire.KVTable
	if err := json.Unmarshal(reg.Body, &kv); err != nil || kv.Table["OrderT"] != "b1:4" {
		t.Fatalf("register response body %s: %v", reg.Body, err)
	}
	resp = routeOf(t, c, addr, "OrderT", 401, false)
	rd, err := wire.DecodeTopicRouteData(resp.Body)
	if err != nil || rd.OrderTopicConf != "b1:4" || rd.QueueDatas[0].WriteQueueNums != 4 {
		t.Fatalf("route %s: %v", resp.Body, err)
	}
	if resp := routeOf(t, c, addr, "Other", 401, false); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("second topic of compressed body: %d", resp.Code)
	}
}

func TestBadRegisterBodies(t *testing.T) {
	ns := testServer(t, nil)
	addr := ns.Addr().String()
	c := testClient(t)
	h := &wire.RegisterBrokerRequestHeader{BrokerName: "b1", BrokerAddr: "a:1", ClusterName: "C", BrokerID: 0}
	body := []byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":{}}}`)
	h.BodyCrc32 = int32(wire.BodyCRC32(body)) + 1
	resp := call(t, c, addr, remoting.NewRequest(remoting.RequestRegisterBroker, h, body))
	if resp.Code != remoting.ResponseSystemError || resp.Remark != "crc32 not match" {
		t.Fatalf("bad crc: %d %q", resp.Code, resp.Remark)
	}
	h.BodyCrc32 = 0
	h.Compressed = true
	resp = call(t, c, addr, remoting.NewRequest(remoting.RequestRegisterBroker, h, body))
	if resp.Code != remoting.ResponseSystemError || !strings.Contains(resp.Remark, "malformed") {
		t.Fatalf("uncompressed body flagged compressed: %d %q", resp.Code, resp.Remark)
	}
	if len(ns.Routes().ClusterInfo().BrokerAddrTable) != 0 {
		t.Fatal("a rejected registration changed the tables")
	}
}

func TestHeartbeatAndDataVersion(t *testing.T) {
	ns := testServer(t, nil)
	addr := ns.Addr().String()
	c := testClient(t)
	b := testBroker{cluster: "C", name: "b1", addr: "127.0.0.1:10911", id: 0, topics: topics(5, tc("T", 4, 4, 6))}
	b.register(t, c, addr)

	query := func(dv wire.DataVersion) *remoting.RemotingCommand {
		body, _ := json.Marshal(dv)
		return call(t, c, addr, remoting.NewRequest(remoting.RequestQueryDataVersion,
			&wire.QueryDataVersionRequestHeader{BrokerName: "b1", BrokerAddr: b.addr, ClusterName: "C"}, body))
	}
	resp := query(b.topics.DataVersion)
	var got wire.DataVersion
	if resp.Code != remoting.ResponseSuccess || resp.ExtFields["changed"] != "false" ||
		json.Unmarshal(resp.Body, &got) != nil || got != b.topics.DataVersion {
		t.Fatalf("same version: code %d ext %v body %s", resp.Code, resp.ExtFields, resp.Body)
	}
	if resp := query(wire.DataVersion{Timestamp: 1, Counter: 6}); resp.ExtFields["changed"] != "true" {
		t.Fatalf("new version: ext %v", resp.ExtFields)
	}
	resp = call(t, c, addr, remoting.NewRequest(remoting.RequestBrokerHeartbeat,
		&wire.BrokerHeartbeatRequestHeader{ClusterName: "C", BrokerAddr: b.addr, BrokerName: "b1"}, nil))
	if resp.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %d %s", resp.Code, resp.Remark)
	}
}

func TestAdminCodes(t *testing.T) {
	ns := testServer(t, nil)
	addr := ns.Addr().String()
	c := testClient(t)
	testBroker{cluster: "C1", name: "b1", addr: "127.0.0.1:10911", id: 0, topics: topics(1, tc("T", 4, 4, 6), tc("U", 4, 4, 6))}.register(t, c, addr)
	testBroker{cluster: "C2", name: "b2", addr: "127.0.0.1:10912", id: 0, topics: topics(1, tc("T", 4, 4, 6), tc("V", 4, 4, 6))}.register(t, c, addr)
	ok := func(resp *remoting.RemotingCommand) *remoting.RemotingCommand {
		t.Helper()
		if resp.Code != remoting.ResponseSuccess {
			t.Fatalf("code %d %s", resp.Code, resp.Remark)
		}
		return resp
	}
	topicList := func(resp *remoting.RemotingCommand) []string {
		t.Helper()
		var tl wire.TopicList
		if err := json.Unmarshal(ok(resp).Body, &tl); err != nil {
			t.Fatalf("topic list %s: %v", resp.Body, err)
		}
		return tl.TopicList
	}

	if got := topicList(call(t, c, addr, remoting.NewRequest(remoting.RequestGetAllTopicListFromNameserver, nil, nil))); !reflect.DeepEqual(got, []string{"T", "U", "V"}) {
		t.Fatalf("all topics %v", got)
	}
	if got := topicList(call(t, c, addr, remoting.NewRequest(remoting.RequestGetTopicsByCluster, &wire.GetTopicsByClusterRequestHeader{Cluster: "C2"}, nil))); !reflect.DeepEqual(got, []string{"T", "V"}) {
		t.Fatalf("topics of C2 %v", got)
	}

	resp := ok(call(t, c, addr, remoting.NewRequest(remoting.RequestWipeWritePermOfBroker, &wire.BrokerNameRequestHeader{BrokerName: "b1"}, nil)))
	if resp.ExtFields["wipeTopicCount"] != "2" {
		t.Fatalf("wipe ext %v", resp.ExtFields)
	}
	rd, _ := wire.DecodeTopicRouteData(routeOf(t, c, addr, "T", 317, false).Body)
	if rd.QueueDatas[0].Perm != wire.PermRead || rd.QueueDatas[1].Perm != wire.PermRead|wire.PermWrite {
		t.Fatalf("perms after wipe %+v", rd.QueueDatas)
	}
	resp = ok(call(t, c, addr, remoting.NewRequest(remoting.RequestAddWritePermOfBroker, &wire.BrokerNameRequestHeader{BrokerName: "b1"}, nil)))
	if resp.ExtFields["addTopicCount"] != "2" {
		t.Fatalf("add ext %v", resp.ExtFields)
	}

	ok(call(t, c, addr, remoting.NewRequest(remoting.RequestDeleteTopicInNamesrv, &wire.DeleteTopicFromNamesrvRequestHeader{Topic: "T", ClusterName: "C1"}, nil)))
	rd, _ = wire.DecodeTopicRouteData(routeOf(t, c, addr, "T", 317, false).Body)
	if len(rd.QueueDatas) != 1 || rd.QueueDatas[0].BrokerName != "b2" {
		t.Fatalf("T after per-cluster delete %+v", rd.QueueDatas)
	}
	ok(call(t, c, addr, remoting.NewRequest(remoting.RequestDeleteTopicInNamesrv, &wire.DeleteTopicFromNamesrvRequestHeader{Topic: "T"}, nil)))
	if resp := routeOf(t, c, addr, "T", 317, false); resp.Code != remoting.ResponseTopicNotExist {
		t.Fatalf("T after delete: %d", resp.Code)
	}

	body := wire.EncodeTopicRouteData(&wire.TopicRouteData{QueueDatas: []wire.QueueData{{BrokerName: "b2", ReadQueueNums: 3, WriteQueueNums: 3, Perm: 6}}}, false)
	ok(call(t, c, addr, remoting.NewRequest(remoting.RequestRegisterTopicInNamesrv, &wire.RegisterTopicRequestHeader{Topic: "New"}, body)))
	rd, _ = wire.DecodeTopicRouteData(routeOf(t, c, addr, "New", 317, false).Body)
	if rd == nil || len(rd.QueueDatas) != 1 || rd.QueueDatas[0].ReadQueueNums != 3 {
		t.Fatalf("registered topic route %+v", rd)
	}

	for _, standard := range []bool{false, true} {
		req := remoting.NewRequest(remoting.RequestGetBrokerClusterInfo, nil, nil)
		if standard {
			req.ExtFields = map[string]string{"acceptStandardJsonOnly": "true"}
		}
		resp = ok(call(t, c, addr, req))
		if json.Valid(resp.Body) != standard {
			t.Fatalf("cluster info standard=%v: %s", standard, resp.Body)
		}
		ci, err := wire.DecodeClusterInfo(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if ci.BrokerAddrTable["b2"].BrokerAddrs[0] != "127.0.0.1:10912" || !reflect.DeepEqual(ci.ClusterAddrTable["C1"], []string{"b1"}) {
			t.Fatalf("cluster info %+v", ci)
		}
	}

	ok(call(t, c, addr, remoting.NewRequest(remoting.RequestUnregisterBroker,
		&wire.UnregisterBrokerRequestHeader{Cluster: "C2", BrokerAddr: "127.0.0.1:10912", BrokerName: "b2", BrokerID: 0}, nil)))
	testutil.WaitFor(t, 5*time.Second, "batch unregistration of b2", func() bool {
		_, found := ns.Routes().ClusterInfo().BrokerAddrTable["b2"]
		return !found
	})
}

// rocketmq-dashboard's topic page asks GET_SYSTEM_TOPIC_LIST_FROM_NS (304)
// on every load, and fails if the name server refuses it; the unit lists
// (311-313) read topicSysFlag, which raftmq brokers store and register.
func TestSystemAndUnitTopicLists(t *testing.T) {
	ns := testServer(t, nil)
	addr := ns.Addr().String()
	c := testClient(t)
	withFlag := func(cfg wire.TopicConfig, flag int) wire.TopicConfig { cfg.TopicSysFlag = flag; return cfg }
	testBroker{cluster: "C1", name: "b1", addr: "127.0.0.1:10911", id: 0, topics: topics(1,
		tc("T", 4, 4, 6), tc(wire.TopicAutoCreate, 8, 8, 7), tc(wire.TopicSchedule, 18, 18, 6),
		tc(wire.TopicTransHalf, 1, 1, 6), tc(wire.ReplyTopic("C1"), 1, 1, 6), tc("RMQ_SYS_TRACE_TOPIC", 1, 1, 6),
		withFlag(tc("Unit", 4, 4, 6), wire.TopicSysFlagUnit),
		withFlag(tc("UnitSub", 4, 4, 6), wire.TopicSysFlagUnitSub),
		withFlag(tc("Both", 4, 4, 6), wire.TopicSysFlagUnit|wire.TopicSysFlagUnitSub))}.register(t, c, addr)
	testBroker{cluster: "C2", name: "b2", addr: "127.0.0.1:10912", id: 0, topics: topics(1, tc("T", 4, 4, 6))}.register(t, c, addr)

	list := func(code int16) wire.TopicList {
		t.Helper()
		resp := call(t, c, addr, remoting.NewRequest(code, nil, nil))
		if resp.Code != remoting.ResponseSuccess {
			t.Fatalf("code %d: %d %q", code, resp.Code, resp.Remark)
		}
		var tl wire.TopicList
		if err := json.Unmarshal(resp.Body, &tl); err != nil {
			t.Fatalf("code %d: topic list %s: %v", code, resp.Body, err)
		}
		return tl
	}
	sys := list(remoting.RequestGetSystemTopicListFromNS)
	want := []string{"C1", "C1_REPLY_TOPIC", "C2", "RMQ_SYS_TRACE_TOPIC", wire.TopicTransHalf, wire.TopicSchedule, wire.TopicAutoCreate, "b1", "b2"}
	if !reflect.DeepEqual(sys.TopicList, want) {
		t.Fatalf("system topics %v, want %v", sys.TopicList, want)
	}
	// A brokerAddr would send the Java client on to ask that broker
	// GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305), which raftmq brokers refuse:
	// the name server's list is the whole answer.
	if sys.BrokerAddr != "" {
		t.Fatalf("system topic list names broker %q", sys.BrokerAddr)
	}
	for code, want := range map[int16][]string{
		remoting.RequestGetUnitTopicList:             {"Both", "Unit"},
		remoting.RequestGetHasUnitSubTopicList:       {"Both", "UnitSub"},
		remoting.RequestGetHasUnitSubUnunitTopicList: {"UnitSub"},
	} {
		if got := list(code).TopicList; !reflect.DeepEqual(got, want) {
			t.Fatalf("code %d: %v, want %v", code, got, want)
		}
	}
}

// A broker registering under a brokerName another cluster's group holds is
// told why, so its log names the clash instead of its routes silently
// mixing with the other group's (testdata/name-clash.txt has the tables).
func TestBrokerNameClashRefused(t *testing.T) {
	ns := testServer(t, nil)
	addr := ns.Addr().String()
	c := testClient(t)
	testBroker{cluster: "C1", name: "broker-a", addr: "127.0.0.1:10911", id: 0, topics: topics(1, tc("T", 4, 4, 6))}.register(t, c, addr)
	body, err := wire.EncodeRegisterBrokerBody(&wire.RegisterBrokerBody{TopicConfigSerializeWrapper: topics(1, tc("U", 4, 4, 6)), FilterServerList: []string{}}, false)
	if err != nil {
		t.Fatal(err)
	}
	h := &wire.RegisterBrokerRequestHeader{BrokerName: "broker-a", BrokerAddr: "127.0.0.1:20911", ClusterName: "C2", BrokerID: 0,
		BodyCrc32: int32(wire.BodyCRC32(body))}
	resp := call(t, c, addr, remoting.NewRequest(remoting.RequestRegisterBroker, h, body))
	if resp.Code != remoting.ResponseSystemError || !strings.Contains(resp.Remark, "registered in cluster C1") {
		t.Fatalf("clashing registration: code %d %q", resp.Code, resp.Remark)
	}
	rd, err := wire.DecodeTopicRouteData(routeOf(t, c, addr, "T", 317, false).Body)
	if err != nil || len(rd.BrokerDatas) != 1 || rd.BrokerDatas[0].BrokerAddrs[0] != "127.0.0.1:10911" || len(rd.BrokerDatas[0].BrokerAddrs) != 1 {
		t.Fatalf("route of T after the clash: %+v, %v", rd, err)
	}
}

func TestDisabledTopicLists(t *testing.T) {
	ns := testServer(t, func(c *Config) { c.EnableAllTopicList, c.EnableTopicList = false, false })
	c := testClient(t)
	for _, req := range []*remoting.RemotingCommand{
		remoting.NewRequest(remoting.RequestGetAllTopicListFromNameserver, nil, nil),
		remoting.NewRequest(remoting.RequestGetTopicsByCluster, &wire.GetTopicsByClusterRequestHeader{Cluster: "C"}, nil),
		remoting.NewRequest(remoting.RequestGetUnitTopicList, nil, nil),
		remoting.NewRequest(remoting.RequestGetHasUnitSubTopicList, nil, nil),
		remoting.NewRequest(remoting.RequestGetHasUnitSubUnunitTopicList, nil, nil),
	} {
		if resp := call(t, c, ns.Addr().String(), req); resp.Code != remoting.ResponseSystemError || resp.Remark != "disable" {
			t.Fatalf("code %d: got %d %q", req.Code, resp.Code, resp.Remark)
		}
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort = "127.0.0.1", testutil.FreePort(t)
	cfg.KVConfigPath = t.TempDir() + "/kv.json"
	n, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	c := testClient(t)
	testutil.WaitFor(t, 5*time.Second, "name server to answer", func() bool {
		resp, err := c.InvokeSync(context.Background(), cfg.Addr(), remoting.NewRequest(remoting.RequestGetAllTopicListFromNameserver, nil, nil))
		return err == nil && resp.Code == remoting.ResponseSuccess
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if err := n.Start(); err != ErrAlreadyStarted {
		t.Fatalf("restart: want ErrAlreadyStarted, got %v", err)
	}
}

// A header value that does not parse is named in the remark, clipped: a
// route lookup, open to every client even under clusterAuth*, with a
// 1 MiB flag of NUL bytes was answered a 4 MiB remark quoting it.
func TestBadHeaderRemarkBounded(t *testing.T) {
	n := testServer(t, nil)
	c := testClient(t)
	req := remoting.NewRequest(remoting.RequestGetRouteInfoByTopic, &wire.GetRouteInfoRequestHeader{Topic: "T"}, nil)
	req.ExtFields["acceptStandardJsonOnly"] = string(make([]byte, 1<<20))
	// A 1 MiB header takes seconds to encode and decode under -race on a
	// loaded machine (past the client's 5 s default there).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.InvokeSync(ctx, n.Addr().String(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != remoting.ResponseSystemError || !strings.Contains(resp.Remark, "acceptStandardJsonOnly") || len(resp.Remark) > 512 {
		t.Fatalf("code %d, %d-byte remark %.200q…, want SYSTEM_ERROR naming the field in at most 512 bytes", resp.Code, len(resp.Remark), resp.Remark)
	}
}

// An ignored registration answers SUCCESS, as RocketMQ does, and says it
// was ignored in a field raftmq's brokers read (they register again soon);
// a taken one does not.
func TestIgnoredRegistrationSaysSo(t *testing.T) {
	ns := testServer(t, nil)
	addr := ns.Addr().String()
	c := testClient(t)
	ignored := func(resp *remoting.RemotingCommand) bool {
		t.Helper()
		var h wire.RegisterBrokerResponseHeader
		if err := resp.DecodeHeader(&h); err != nil {
			t.Fatal(err)
		}
		return h.Ignored
	}
	newer := topics(1, tc("T", 4, 4, 6))
	newer.DataVersion.StateVersion = 1000
	if ignored(testBroker{cluster: "C", name: "g", addr: "10.0.0.1:10911", id: 2, topics: newer}.register(t, c, addr)) {
		t.Fatal("a first registration answered as ignored")
	}
	older := topics(1, tc("T", 4, 4, 6))
	older.DataVersion.StateVersion = 900
	resp := testBroker{cluster: "C", name: "g", addr: "10.0.0.9:10911", id: 2, topics: older}.register(t, c, addr)
	if !ignored(resp) {
		t.Fatalf("a registration with an older state version for a taken brokerId answered %v", resp.ExtFields)
	}
	if got := ns.Routes().ClusterInfo().BrokerAddrTable["g"].BrokerAddrs[2]; got != "10.0.0.1:10911" {
		t.Fatalf("brokerId 2 is %s", got)
	}
}
