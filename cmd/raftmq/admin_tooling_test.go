package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// testToolingAnswers sends the requests RocketMQ's tools send and decodes
// the answers the way those tools do, with the field names and Java types
// of their sources: rocketmq-exporter's BrokerRuntimeStats (every runtime
// key parsed as it parses it), mqadmin clusterList and the dashboard's
// collect task (rates split on spaces), BrokerStatsData, ConsumeStatsList,
// ProducerConnection, ConsumerRunningInfo, GroupList, TopicConfig,
// SubscriptionGroupConfig, QueryConsumeQueueResponseBody and the name
// server's properties.
func testToolingAnswers(t *testing.T, f *parityFixture) {
	rc := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	defer func() { _ = rc.Close() }()
	call := func(t *testing.T, addr string, code int16, header any) *remoting.RemotingCommand {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := rc.InvokeSync(ctx, addr, remoting.NewRequest(code, header, nil))
		if err != nil {
			t.Fatalf("code %d: %v", code, err)
		}
		if resp.Code != remoting.ResponseSuccess {
			t.Fatalf("code %d: answered %d %q", code, resp.Code, resp.Remark)
		}
		return resp
	}

	t.Run("GET_BROKER_RUNTIME_INFO as rocketmq-exporter and mqadmin read it", func(t *testing.T) {
		var kv wire.KVTable
		if err := json.Unmarshal(call(t, f.leader, remoting.RequestGetBrokerRuntimeInfo, nil).Body, &kv); err != nil {
			t.Fatal(err)
		}
		tab := kv.Table
		// BrokerRuntimeStats(KVTable): Long.parseLong / Integer.parseInt /
		// Double.parseDouble of these keys; a missing one is a
		// NullPointerException there.
		for _, k := range []string{"msgPutTotalTodayNow", "sendThreadPoolQueueHeadWaitTimeMills", "queryThreadPoolQueueHeadWaitTimeMills",
			"msgGetTotalTodayNow", "queryThreadPoolQueueSize", "bootTimestamp", "msgPutTotalYesterdayMorning", "msgGetTotalYesterdayMorning",
			"pullThreadPoolQueueSize", "commitLogMinOffset", "pullThreadPoolQueueHeadWaitTimeMills", "dispatchMaxBuffer", "pageCacheLockTimeMills",
			"commitLogMaxOffset", "getMessageEntireTimeMax", "msgPutTotalTodayMorning", "putMessageTimesTotal", "msgGetTotalTodayMorning",
			"sendThreadPoolQueueSize", "startAcceptSendRequestTimeStamp", "putMessageEntireTimeMax", "earliestMessageTimeStamp",
			"remainTransientStoreBufferNumbs", "queryThreadPoolQueueCapacity", "dispatchBehindBytes", "putMessageSizeTotal",
			"sendThreadPoolQueueCapacity", "pullThreadPoolQueueCapacity"} {
			if _, err := strconv.ParseInt(tab[k], 10, 64); err != nil {
				t.Errorf("%s=%q: not a Java long", k, tab[k])
			}
		}
		// The fixture's messages are stored: the oldest one's store time,
		// found through the queues (a Raft segment starts with a frame).
		if ts, _ := strconv.ParseInt(tab["earliestMessageTimeStamp"], 10, 64); ts <= 0 || ts > time.Now().UnixMilli() {
			t.Errorf("earliestMessageTimeStamp=%q, want the oldest stored message's time", tab["earliestMessageTimeStamp"])
		}
		if _, err := strconv.ParseInt(tab["brokerVersion"], 10, 32); err != nil {
			t.Errorf("brokerVersion=%q: not an int", tab["brokerVersion"])
		}
		for _, k := range []string{"consumeQueueDiskRatio", "commitLogDiskRatio", "putMessageAverageSize"} {
			if _, err := strconv.ParseFloat(tab[k], 64); err != nil {
				t.Errorf("%s=%q: not a double", k, tab[k])
			}
		}
		if _, err := strconv.ParseFloat(strings.Split(tab["remainHowManyDataToFlush"], " ")[0], 64); err != nil {
			t.Errorf("remainHowManyDataToFlush=%q", tab["remainHowManyDataToFlush"])
		}
		// loadTps: up to three space-separated doubles (10 s, 60 s, 600 s).
		for _, k := range []string{"putTps", "getMissTps", "getTransferredTps", "getTransferedTps", "getTotalTps", "getFoundTps"} {
			parts := strings.Split(tab[k], " ")
			if len(parts) != 3 {
				t.Errorf("%s=%q: want three rates", k, tab[k])
			}
			for _, p := range parts {
				if _, err := strconv.ParseFloat(p, 64); err != nil {
					t.Errorf("%s=%q: %v", k, tab[k], err)
				}
			}
		}
		if first, _ := strconv.ParseFloat(strings.Split(tab["putTps"], " ")[1], 64); first <= 0 {
			t.Errorf("putTps=%q: the last minute saw %d puts", tab["putTps"], parityMsgs)
		}
		// loadCommitLogDirCapacity: "Total : 9.78 GiB, Free : 1.23 GiB."
		arr := strings.Split(tab["commitLogDirCapacity"], " ")
		if len(arr) < 8 || !strings.HasSuffix(arr[3], ",") || !strings.HasSuffix(arr[7], ".") {
			t.Errorf("commitLogDirCapacity=%q", tab["commitLogDirCapacity"])
		} else {
			for _, v := range []string{arr[2], arr[6]} {
				if _, err := strconv.ParseFloat(v, 64); err != nil {
					t.Errorf("commitLogDirCapacity=%q: %v", tab["commitLogDirCapacity"], err)
				}
			}
		}
		// loadPutMessageDistributeTime: "[<=0ms]:0 [0~10ms]:5 ..."
		for _, p := range strings.Split(tab["putMessageDistributeTime"], " ") {
			kv := strings.Split(p, ":")
			if _, err := strconv.Atoi(kv[len(kv)-1]); len(kv) != 2 || err != nil {
				t.Errorf("putMessageDistributeTime part %q", p)
			}
		}
		if !regexp.MustCompile(`^\[ \d+ days, \d+ hours, \d+ minutes, \d+ seconds \]$`).MatchString(tab["runtime"]) {
			t.Errorf("runtime=%q", tab["runtime"])
		}
		if tab["brokerVersionDesc"] == "" || tab["brokerActive"] != "true" {
			t.Errorf("brokerVersionDesc=%q brokerActive=%q", tab["brokerVersionDesc"], tab["brokerActive"])
		}
	})

	t.Run("VIEW_BROKER_STATS_DATA as BrokerStatsData", func(t *testing.T) {
		for _, q := range [][2]string{{wire.StatsTopicPutNums, "ParT"}, {wire.StatsTopicPutSize, "ParT"}, {wire.StatsGroupGetNums, "ParT@ParCG"},
			{wire.StatsGroupGetSize, "ParT@ParCG"}, {wire.StatsBrokerPutNums, "DefaultCluster"}, {wire.StatsBrokerGetNums, "DefaultCluster"}} {
			resp := call(t, f.leader, remoting.RequestViewBrokerStatsData, &wire.ViewBrokerStatsDataRequestHeader{StatsName: q[0], StatsKey: q[1]})
			obj := javaObject(t, resp.Body)
			for _, w := range []string{"statsMinute", "statsHour", "statsDay"} {
				item, ok := obj[w].(map[string]any)
				if !ok {
					t.Fatalf("%s %s: %s missing: %s", q[0], q[1], w, resp.Body)
				}
				wantJava(t, item, map[string]string{"sum": "long", "tps": "double", "avgpt": "double"})
			}
			var d wire.BrokerStatsData
			_ = json.Unmarshal(resp.Body, &d)
			if d.StatsDay.Sum <= 0 || d.StatsMinute.Sum <= 0 || d.StatsMinute.Tps <= 0 {
				t.Errorf("%s %s: %+v, want counts and a rate", q[0], q[1], d)
			}
			if q[0] == wire.StatsTopicPutNums && d.StatsDay.Sum < parityMsgs {
				t.Errorf("TOPIC_PUT_NUMS ParT day sum %d, want >= %d", d.StatsDay.Sum, parityMsgs)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := rc.InvokeSync(ctx, f.leader, remoting.NewRequest(remoting.RequestViewBrokerStatsData,
			&wire.ViewBrokerStatsDataRequestHeader{StatsName: wire.StatsTopicPutNums, StatsKey: "NoSuchTopic"}, nil))
		if err != nil || resp.Code != remoting.ResponseSystemError || !strings.Contains(resp.Remark, "not exist") {
			t.Fatalf("stats of an unknown key: %v %+v", err, resp)
		}
	})

	t.Run("GET_TOPIC_STATS_INFO has the put rate", func(t *testing.T) {
		// mqadmin topicStatus prints TopicStatsTable.topicPutTps (a
		// double) as "Topic Put TPS".
		resp := call(t, f.leader, remoting.RequestGetTopicStatsInfo, &wire.TopicRequestHeader{Topic: "ParT"})
		plain, err := wire.QuoteObjectKeys(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		obj := javaObject(t, plain)
		wantJava(t, obj, map[string]string{"topicPutTps": "double", "offsetTable": "object"})
		if tps, ok := obj["topicPutTps"].(json.Number); ok && tps.String() == "0.0" {
			t.Errorf("topicPutTps 0 right after sending %d messages", parityMsgs)
		}
	})

	t.Run("GET_CONSUME_STATS has the consume rate and last timestamps", func(t *testing.T) {
		resp := call(t, f.leader, remoting.RequestGetConsumeStats, &wire.ConsumeStatsRequestHeader{ConsumerGroup: "ParCG", Topic: "ParT"})
		plain, err := wire.QuoteObjectKeys(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		obj := javaObject(t, plain)
		wantJava(t, obj, map[string]string{"consumeTps": "double", "offsetTable": "object"})
		if obj["consumeTps"].(json.Number).String() == "0.0" {
			t.Errorf("consumeTps 0 right after consuming %d messages", parityMsgs)
		}
		es, err := wire.DecodeQueueTable(resp.Body, "offsetTable")
		if err != nil || len(es) != 4 {
			t.Fatalf("offsetTable: %v %d", err, len(es))
		}
		for _, e := range es {
			ow := javaObject(t, e.Value)
			wantJava(t, ow, map[string]string{"brokerOffset": "long", "consumerOffset": "long", "pullOffset": "long", "lastTimestamp": "long"})
			// RocketMQ 5's mqadmin consumerProgress prints pullOffset -
			// consumerOffset as #Inflight.
			if mustInt64(t, ow["pullOffset"]) < mustInt64(t, ow["consumerOffset"]) {
				t.Errorf("queue %v: pullOffset %v below consumerOffset %v (mqadmin's #Inflight negative)", e.Queue, ow["pullOffset"], ow["consumerOffset"])
			}
			if ow["consumerOffset"].(json.Number).String() != "0" && ow["lastTimestamp"].(json.Number).String() == "0" {
				t.Errorf("queue %v: consumed but lastTimestamp 0", e.Queue)
			}
		}
	})

	t.Run("GET_BROKER_CONSUME_STATS as ConsumeStatsList", func(t *testing.T) {
		resp := call(t, f.leader, remoting.RequestGetBrokerConsumeStats, &wire.GetConsumeStatsInBrokerHeader{})
		plain, err := wire.QuoteObjectKeys(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		obj := javaObject(t, plain)
		wantJava(t, obj, map[string]string{"brokerAddr": "string", "totalDiff": "long", "totalInflightDiff": "long", "consumeStatsList": "array"})
		found := false
		for _, m := range obj["consumeStatsList"].([]any) {
			for g, list := range m.(map[string]any) {
				for _, cs := range list.([]any) {
					wantJava(t, cs.(map[string]any), map[string]string{"offsetTable": "object", "consumeTps": "double"})
					found = found || g == "ParCG"
				}
			}
		}
		if !found {
			t.Fatalf("ConsumeStatsList lacks ParCG: %s", resp.Body)
		}
	})

	t.Run("GET_PRODUCER_CONNECTION_LIST and GET_ALL_PRODUCER_INFO", func(t *testing.T) {
		obj := javaObject(t, call(t, f.leader, remoting.RequestGetProducerConnectionList, &wire.GetProducerConnectionListRequestHeader{ProducerGroup: "ParPG"}).Body)
		set := obj["connectionSet"].([]any)
		if len(set) != 1 {
			t.Fatalf("connectionSet: %v", set)
		}
		wantJava(t, set[0].(map[string]any), map[string]string{"clientId": "string", "clientAddr": "string", "language": "string", "version": "int"})
		obj = javaObject(t, call(t, f.leader, remoting.RequestGetAllProducerInfo, nil).Body)
		ps := obj["data"].(map[string]any)["ParPG"].([]any)
		wantJava(t, ps[0].(map[string]any), map[string]string{"clientId": "string", "remoteIP": "string", "language": "string", "version": "int", "lastUpdateTimestamp": "long"})
	})

	t.Run("GET_CONSUMER_RUNNING_INFO forwarded to the client", func(t *testing.T) {
		resp := call(t, f.leader, remoting.RequestGetConsumerRunningInfo, &wire.GetConsumerRunningInfoRequestHeader{ConsumerGroup: "ParCG", ClientID: f.consumer})
		plain, err := wire.QuoteObjectKeys(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		obj := javaObject(t, plain)
		wantJava(t, obj, map[string]string{"properties": "object", "subscriptionSet": "array", "mqTable": "object", "statusTable": "object"})
		props := obj["properties"].(map[string]any)
		for _, k := range []string{wire.PropConsumeType, wire.PropNamesrvAddr, wire.PropConsumeOrderly, wire.PropThreadPoolCoreSize, wire.PropConsumerStartTimestamp} {
			if _, ok := props[k].(string); !ok {
				t.Errorf("properties.%s missing or not a string: %v", k, props)
			}
		}
		mq := obj["mqTable"].(map[string]any)
		parT := 0
		for k, v := range mq {
			q, err := wire.ParseQueueKey(k)
			if err != nil {
				t.Fatal(err)
			}
			if q.Topic == "ParT" {
				parT++
			}
			wantJava(t, v.(map[string]any), map[string]string{"commitOffset": "long", "cachedMsgMinOffset": "long", "cachedMsgMaxOffset": "long",
				"cachedMsgCount": "int", "cachedMsgSizeInMiB": "int", "locked": "bool", "tryUnlockTimes": "long", "lastLockTimestamp": "long",
				"droped": "bool", "lastPullTimestamp": "long", "lastConsumeTimestamp": "long"})
		}
		if parT != 4 { // and the group's retry queue once the consumer has its route
			t.Fatalf("mqTable: %d queues of ParT, want 4: %v", parT, mq)
		}
		for _, v := range obj["statusTable"].(map[string]any) {
			wantJava(t, v.(map[string]any), map[string]string{"pullRT": "double", "pullTPS": "double", "consumeRT": "double",
				"consumeOKTPS": "double", "consumeFailedTPS": "double", "consumeFailedMsgs": "long"})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := rc.InvokeSync(ctx, f.leader, remoting.NewRequest(remoting.RequestGetConsumerRunningInfo,
			&wire.GetConsumerRunningInfoRequestHeader{ConsumerGroup: "ParCG", ClientID: "nobody"}, nil))
		if err != nil || r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "not online") {
			t.Fatalf("running info of an absent client: %v %+v", err, r)
		}
	})

	t.Run("CONSUME_MESSAGE_DIRECTLY relayed to the client's listener", func(t *testing.T) {
		before := f.consumed.Load()
		resp := call(t, f.leader, remoting.RequestConsumeMessageDirectly, &wire.ConsumeMessageDirectlyResultRequestHeader{
			ConsumerGroup: "ParCG", ClientID: f.consumer, MsgID: f.offsetID, Topic: "ParT"})
		obj := javaObject(t, resp.Body)
		wantJava(t, obj, map[string]string{"order": "bool", "autoCommit": "bool", "consumeResult": "string", "spentTimeMills": "long"})
		if obj["consumeResult"] != wire.CMResultSuccess || f.consumed.Load() < before+1 {
			t.Fatalf("consume directly: %s; listener calls %d → %d", resp.Body, before, f.consumed.Load())
		}
	})

	t.Run("QUERY_TOPIC_CONSUME_BY_WHO, GET_TOPIC_CONFIG, GET_SUBSCRIPTIONGROUP_CONFIG, QUERY_CONSUME_QUEUE", func(t *testing.T) {
		var gl wire.GroupList
		_ = json.Unmarshal(call(t, f.leader, remoting.RequestQueryTopicConsumeByWho, &wire.QueryTopicConsumeByWhoRequestHeader{Topic: "ParT"}).Body, &gl)
		if !strings.Contains(strings.Join(gl.GroupList, ","), "ParCG") {
			t.Fatalf("GroupList: %v", gl)
		}
		tc := javaObject(t, call(t, f.leader, remoting.RequestGetTopicConfig, &wire.GetTopicConfigRequestHeader{Topic: "ParT"}).Body)
		wantJava(t, tc, map[string]string{"topicName": "string", "readQueueNums": "int", "writeQueueNums": "int", "perm": "int", "order": "bool"})
		sg := javaObject(t, call(t, f.leader, remoting.RequestGetSubscriptionGroupConfig, &wire.GetSubscriptionGroupConfigRequestHeader{Group: "ParCG"}).Body)
		wantJava(t, sg, map[string]string{"groupName": "string", "consumeEnable": "bool", "retryQueueNums": "int", "retryMaxTimes": "int", "brokerId": "long"})
		cq := javaObject(t, call(t, f.leader, remoting.RequestQueryConsumeQueue, &wire.QueryConsumeQueueRequestHeader{Topic: "ParT",
			QueueID: int32(f.queueID), Index: 0, Count: 10, ConsumerGroup: "ParCG"}).Body)
		wantJava(t, cq, map[string]string{"queueData": "array", "maxQueueIndex": "long", "minQueueIndex": "long", "subscriptionData": "object"})
		units := cq["queueData"].([]any)
		if len(units) == 0 {
			t.Fatal("QUERY_CONSUME_QUEUE: no units")
		}
		wantJava(t, units[0].(map[string]any), map[string]string{"physicOffset": "long", "physicSize": "int", "tagsCode": "long", "eval": "bool"})
	})

	t.Run("GET_NAMESRV_CONFIG as properties", func(t *testing.T) {
		body := call(t, f.nsAddr, remoting.RequestGetNamesrvConfig, nil).Body
		for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
			if k, _, ok := strings.Cut(line, "="); !ok || k == "" {
				t.Fatalf("line %q is not key=value", line)
			}
		}
		if !bytes.Contains(body, []byte("enableTopicList=")) {
			t.Fatalf("no enableTopicList:\n%s", body)
		}
	})
}

// javaObject decodes a JSON object keeping numbers as written.
func javaObject(t *testing.T, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("not a JSON object: %v: %s", err, b)
	}
	return m
}

// wantJava checks that obj has each field with a JSON value fastjson
// would bind to the Java type: long/int integral numbers (int within 32
// bits), double any number, string, bool, object, array.
func wantJava(t *testing.T, obj map[string]any, fields map[string]string) {
	t.Helper()
	for name, typ := range fields {
		v, ok := obj[name]
		if !ok {
			t.Errorf("field %s (%s) missing in %v", name, typ, obj)
			continue
		}
		good := false
		switch typ {
		case "long", "int":
			if n, isNum := v.(json.Number); isNum {
				i, err := strconv.ParseInt(n.String(), 10, 64)
				good = err == nil && (typ == "long" || int64(int32(i)) == i)
			}
		case "double":
			_, good = v.(json.Number)
		case "string":
			_, good = v.(string)
		case "bool":
			_, good = v.(bool)
		case "object":
			_, good = v.(map[string]any)
		case "array":
			_, good = v.([]any)
		}
		if !good {
			t.Errorf("field %s = %#v: not a %s", name, v, typ)
		}
	}
}

// mustInt64 reads a JSON number decoded with UseNumber.
func mustInt64(t *testing.T, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v is not a number", v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return i
}
