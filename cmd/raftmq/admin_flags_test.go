package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestAdminMQAdminFlags runs mqadmin's options of updateSubGroup (-i -w),
// updateTopic (-u -s), sendMessage (-b -i), topicRoute (-l) and
// consumerProgress (-s) against a live cluster and checks their outcome:
// the configs every member stores, the queue a message landed on, the
// printed layout.
func TestAdminMQAdminFlags(t *testing.T) {
	f := startParity(t)
	n, leader := f.n, f.leader
	run, js := f.run, f.js
	rc := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = rc.Close() })
	// stored asks addr for a config (GET_TOPIC_CONFIG or
	// GET_SUBSCRIPTIONGROUP_CONFIG) and decodes it into v.
	stored := func(addr string, code int16, header any, v any) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := rc.InvokeSync(ctx, addr, remoting.NewRequest(code, header, nil))
		return err == nil && resp.Code == remoting.ResponseSuccess && json.Unmarshal(resp.Body, v) == nil
	}
	// onEveryMember waits until every member of the group stores a
	// config for which ok holds.
	onEveryMember := func(t *testing.T, what string, code int16, header any, ok func(raw []byte) bool) {
		t.Helper()
		for _, m := range f.Members(0) {
			testutil.WaitFor(t, 10*time.Second, what+" on "+m.Addr(), func() bool {
				var raw json.RawMessage
				return stored(m.Addr(), code, header, &raw) && ok(raw)
			})
		}
	}

	t.Run("updateSubGroup -i -w", func(t *testing.T) {
		out := run(t, "updateSubGroup", "-c", "DefaultCluster", "-g", "FlagSG", "-i", "1", "-w", "2")
		// As mqadmin: one line per master that took the config.
		wantLines(t, out, "create subscription group to "+leader+" success.", "SubscriptionGroupConfig [groupName=FlagSG, ",
			"brokerId=1, whichBrokerWhenConsumeSlowly=2")
		onEveryMember(t, "FlagSG with brokerId 1, whichBrokerWhenConsumeSlowly 2", remoting.RequestGetSubscriptionGroupConfig,
			&wire.GetSubscriptionGroupConfigRequestHeader{Group: "FlagSG"}, func(raw []byte) bool {
				var sg wire.SubscriptionGroupConfig
				return json.Unmarshal(raw, &sg) == nil && sg.BrokerID == 1 && sg.WhichBrokerWhenConsumeSlowly == 2
			})
		// As mqadmin, each update sends a whole config: left out, the
		// options go back to SubscriptionGroupConfig's defaults.
		// mqadmin's own defaults differ from the class's for -m and -d:
		// a group it creates neither starts new consumers at the minimum
		// offset nor allows broadcasting unless told to.
		out = run(t, "updateSubGroup", "-b", leader, "-g", "FlagSG")
		wantLines(t, out, "SubscriptionGroupConfig [groupName=FlagSG, consumeEnable=true, consumeFromMinEnable=false, "+
			"consumeBroadcastEnable=false, retryQueueNums=1, retryMaxTimes=16, brokerId=0, whichBrokerWhenConsumeSlowly=1, "+
			"notifyConsumerIdsChangedEnable=true]")
		var sg wire.SubscriptionGroupConfig
		if !stored(leader, remoting.RequestGetSubscriptionGroupConfig, &wire.GetSubscriptionGroupConfigRequestHeader{Group: "FlagSG"}, &sg) ||
			sg.BrokerID != 0 || sg.WhichBrokerWhenConsumeSlowly != 1 || sg.ConsumeFromMinEnable || sg.ConsumeBroadcastEnable {
			t.Fatalf("FlagSG updated without -i -w -m -d: %+v, want brokerId 0, whichBrokerWhenConsumeSlowly 1, "+
				"consumeFromMinEnable and consumeBroadcastEnable false (mqadmin's defaults)", sg)
		}
	})

	t.Run("updateTopic -u -s", func(t *testing.T) {
		sysFlag := func(t *testing.T, want int, args ...string) {
			t.Helper()
			out := run(t, append([]string{"updateTopic", "-b", leader, "-t", "FlagUnitT", "-r", "2", "-w", "2"}, args...)...)
			wantLines(t, out, fmt.Sprintf("topicSysFlag=%d", want))
			onEveryMember(t, fmt.Sprintf("FlagUnitT with topicSysFlag %d", want), remoting.RequestGetTopicConfig,
				&wire.GetTopicConfigRequestHeader{Topic: "FlagUnitT"}, func(raw []byte) bool {
					var tc wire.TopicConfig
					return json.Unmarshal(raw, &tc) == nil && tc.TopicSysFlag == want
				})
			testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("FlagUnitT routed with topicSysFlag %d", want), func() bool {
				var rd wire.TopicRouteData
				out, err := runAdmin(t, append(slices.Clone(n), "topicRoute", "-t", "FlagUnitT", "--json")...)
				return err == nil && json.Unmarshal([]byte(out), &rd) == nil && len(rd.QueueDatas) == 1 && rd.QueueDatas[0].TopicSysFlag == want
			})
		}
		// TopicSysFlag.buildSysFlag: bit 0 unit, bit 1 has unit sub.
		sysFlag(t, 3, "-u", "true", "-s", "true")
		// updateTopicPerm rewrites the topic keeping its flags, as mqadmin
		// copies them from the route.
		run(t, "updateTopicPerm", "-t", "FlagUnitT", "-b", leader, "-p", "4")
		onEveryMember(t, "FlagUnitT read-only with topicSysFlag 3", remoting.RequestGetTopicConfig,
			&wire.GetTopicConfigRequestHeader{Topic: "FlagUnitT"}, func(raw []byte) bool {
				var tc wire.TopicConfig
				return json.Unmarshal(raw, &tc) == nil && tc.Perm == wire.PermRead && tc.TopicSysFlag == 3
			})
		sysFlag(t, 1, "-u", "true")
		sysFlag(t, 2, "-s", "true")
		sysFlag(t, 0)
	})

	t.Run("updateTopic -a", func(t *testing.T) {
		out := run(t, "updateTopic", "-b", leader, "-t", "FlagAttrT", "-r", "2", "-w", "2", "-a", "+message.type=FIFO")
		wantLines(t, out, "attributes={+message.type=FIFO}")
		onEveryMember(t, "FlagAttrT with message.type FIFO", remoting.RequestGetTopicConfig,
			&wire.GetTopicConfigRequestHeader{Topic: "FlagAttrT"}, func(raw []byte) bool {
				var tc wire.TopicConfig
				return json.Unmarshal(raw, &tc) == nil && tc.Attributes["message.type"] == "FIFO"
			})
		// What raftmq does not implement is refused, naming the attribute.
		out, err := runAdmin(t, append(slices.Clone(n), "updateTopic", "-b", leader, "-t", "FlagAttrT", "-r", "2", "-w", "2",
			"-a", "+cleanup.policy=COMPACTION")...)
		if err == nil || !strings.Contains(out+err.Error(), "cleanup.policy") {
			t.Fatalf("updateTopic -a +cleanup.policy=COMPACTION: err %v, output:\n%s", err, out)
		}
	})

	t.Run("sendMessage -b -i", func(t *testing.T) {
		for q := range 4 {
			var sr sendResult
			body := fmt.Sprintf("to queue %d", q)
			js(t, &sr, "sendMessage", "-t", "ParT", "-p", body, "-b", "broker-a", "-i", fmt.Sprint(q))
			if sr.BrokerName != "broker-a" || sr.QueueID != q || sr.SendStatus != "SEND_OK" {
				t.Fatalf("sendMessage -i %d: %+v", q, sr)
			}
			var mv messageView
			js(t, &mv, "queryMsgByOffset", "-t", "ParT", "-b", "broker-a", "-i", fmt.Sprint(q), "-o", fmt.Sprint(sr.QueueOffset))
			if mv.Body != body || mv.MsgID != sr.MsgID {
				t.Fatalf("queue %d offset %d holds %+v, want %q (%s)", q, sr.QueueOffset, mv, body, sr.MsgID)
			}
		}
		out := run(t, "sendMessage", "-t", "ParT", "-p", "x", "-b", "broker-a", "-i", "1")
		if l := strings.Split(out, "\n"); len(l) < 2 || !strings.HasPrefix(l[0], "#Broker Name") || !slices.Equal(strings.Fields(l[1])[:2], []string{"broker-a", "1"}) {
			t.Fatalf("sendMessage -b broker-a -i 1:\n%s", out)
		}
		// SendMessageCommand sends to -b's queue only with -i; -b alone is
		// ignored and the producer picks a queue of any group.
		var sr sendResult
		if js(t, &sr, "sendMessage", "-t", "ParT", "-p", "x", "-b", "broker-z"); sr.BrokerName != "broker-a" || sr.SendStatus != "SEND_OK" {
			t.Fatalf("sendMessage -b broker-z without -i: %+v, want sent as without -b", sr)
		}
		if _, err := runAdmin(t, append(slices.Clone(n), "sendMessage", "-t", "ParT", "-p", "x", "-i", "1")...); !errors.Is(err, errAdminUsage) ||
			!strings.Contains(err.Error(), "-b") {
			t.Fatalf("-i without -b: %v, want a usage error naming -b", err)
		}
		for _, bad := range [][]string{{"-b", "broker-a", "-i", "4"}, {"-b", "broker-z", "-i", "0"}} {
			_, err := runAdmin(t, append(slices.Clone(n), append([]string{"sendMessage", "-t", "ParT", "-p", "x"}, bad...)...)...)
			if !errors.Is(err, errNotFound) || !strings.Contains(err.Error(), "writable queues of ParT: broker-a 0-3") {
				t.Fatalf("sendMessage %v: %v, want not found, listing the writable queues", bad, err)
			}
		}
	})

	t.Run("topicRoute -l", func(t *testing.T) {
		out := run(t, "topicRoute", "-t", "ParT", "-l")
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 4 {
			t.Fatalf("topicRoute -l: %d lines, want header, broker-a, dashes, total:\n%s", len(lines), out)
		}
		// TopicRouteSubCommand's columns: %-45s %-32s %-50s %-10s %-11s %-5s.
		for i, col := range []string{"#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"} {
			if at := []int{0, 46, 79, 130, 141, 153}[i]; !strings.HasPrefix(lines[0][at:], col) {
				t.Fatalf("header %q: %s not at column %d", lines[0], col, at)
			}
		}
		var addrs []string
		for _, m := range f.Members(0) {
			addrs = append(addrs, m.Addr())
		}
		// The members as Java prints a Map<Long, String>: {0=leader, id=addr, ...}.
		b := lines[1]
		members, queues, _ := strings.Cut(b[79:], "} ")
		if !strings.HasPrefix(b, "DefaultCluster ") || !strings.HasPrefix(b[46:], "broker-a ") || !strings.HasPrefix(members, "{0="+leader+", ") ||
			strings.Count(members, "=") != 3 || strings.Join(strings.Fields(queues), " ") != "4 4 6" {
			t.Fatalf("broker line %q, want DefaultCluster, broker-a, {0=%s, ...} with 3 members, 4 4 6 (members %v)", b, leader, addrs)
		}
		for _, a := range addrs {
			if !strings.Contains(members, "="+a) {
				t.Fatalf("broker line %q lacks member %s", b, a)
			}
		}
		if lines[2] != strings.Repeat("-", 158) {
			t.Fatalf("separator %q", lines[2])
		}
		if strings.Join(strings.Fields(lines[3]), " ") != "Total: 1 4 4" {
			t.Fatalf("total line %q, want Total: 1 4 4", lines[3])
		}
		var rd wire.TopicRouteData
		js(t, &rd, "topicRoute", "-t", "ParT", "-l")
		if len(rd.QueueDatas) != 1 || rd.QueueDatas[0].ReadQueueNums != 4 {
			t.Fatalf("topicRoute -l --json: %+v, want the route data", rd)
		}
	})

	t.Run("consumerProgress -s", func(t *testing.T) {
		ip, _, _ := strings.Cut(f.consumer, "@")
		var cp consumerProgress
		js(t, &cp, "consumerProgress", "-g", "ParCG", "-t", "ParT", "-s", "true")
		if len(cp.Queues) != 4 || slices.ContainsFunc(cp.Queues, func(q queueProgress) bool { return q.ClientIP != ip }) {
			t.Fatalf("consumerProgress -s: %+v, want every queue owned by %s", cp.Queues, ip)
		}
		out := run(t, "consumerProgress", "-g", "ParCG", "-t", "ParT", "-s", "true")
		wantLines(t, out, "#Client IP", ip)
		if out := run(t, "consumerProgress", "-g", "ParCG", "-t", "ParT"); strings.Contains(out, "#Client IP") {
			t.Fatalf("consumerProgress without -s shows client IPs:\n%s", out)
		}
		// A group with offsets but no client online: N/A, as mqadmin.
		run(t, "cloneGroupOffset", "-s", "ParCG", "-d", "FlagOffline", "-t", "ParT")
		out = run(t, "consumerProgress", "-g", "FlagOffline", "-t", "ParT", "-s", "true")
		if strings.Count(out, "N/A") != 4 {
			t.Fatalf("consumerProgress -s of a group with no client online: want N/A per queue:\n%s", out)
		}
		// A client that does not answer GET_CONSUMER_RUNNING_INFO (a
		// raw connection with no handler for it): mqadmin still prints
		// the progress, with N/A where it learned no owner.
		hc := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
		t.Cleanup(func() { _ = hc.Close() })
		hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "10.0.0.8@silent", ConsumerDataSet: []wire.HeartbeatConsumerData{{
			GroupName: "FlagSilent", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
			SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "ParT", SubString: "*"}}}}})
		hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := hc.InvokeSync(hctx, leader, remoting.NewRequest(remoting.RequestHeartBeat, nil, hb))
		hcancel()
		if err != nil || resp.Code != remoting.ResponseSuccess {
			t.Fatalf("consumer heartbeat: %v %+v", err, resp)
		}
		run(t, "cloneGroupOffset", "-s", "ParCG", "-d", "FlagSilent", "-t", "ParT")
		run(t, "updateSubGroup", "-c", "DefaultCluster", "-g", "FlagSilent")
		testutil.WaitFor(t, 10*time.Second, "FlagSilent's client listed", func() bool {
			out, err := runAdmin(t, append(slices.Clone(n), "consumerConnection", "-g", "FlagSilent")...)
			return err == nil && strings.Contains(out, "10.0.0.8@silent")
		})
		out, err = runAdmin(t, append(slices.Clone(n), "consumerProgress", "-g", "FlagSilent", "-t", "ParT", "-s", "true")...)
		if err != nil || strings.Count(out, "N/A") != 4 {
			t.Fatalf("consumerProgress -s with a client that does not answer running info: %v, want N/A per queue:\n%s", err, out)
		}
	})
}

// TestParseMQAdminTimeLenient: mqadmin reads its times with a lenient
// SimpleDateFormat (UtilAll.parseDate), so fields of one digit (or more
// than the pattern's count) are taken, SSS counts milliseconds ("6" is
// 6 ms), and a field past its range carries into the next larger one.
// A missing field, a sign, text after the milliseconds, a time before both
// the epoch and 1970 or after year 9999 is refused.
func TestParseMQAdminTimeLenient(t *testing.T) {
	for s, want := range map[string]time.Time{
		"2024-1-5#3:4:5:6":         time.Date(2024, 1, 5, 3, 4, 5, 6e6, time.Local),
		"2024-01-05#03:04:05:006":  time.Date(2024, 1, 5, 3, 4, 5, 6e6, time.Local),
		"2024-001-05#3:04:5:60":    time.Date(2024, 1, 5, 3, 4, 5, 60e6, time.Local),
		"2024-13-32#24:60:60:1500": time.Date(2025, 2, 2, 1, 1, 1, 500e6, time.Local),
		"2024-02-30#00:00:00:000":  time.Date(2024, 3, 1, 0, 0, 0, 0, time.Local),
		"2024-12-31#23:59:59:0999": time.Date(2024, 12, 31, 23, 59, 59, 999e6, time.Local),
	} {
		got, err := parseMQAdminTime("s", s)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q read as %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"2024-1-5#3:4:5", "2024-1-5#3:4:5:", "2024--1-5#3:4:5:6", "2024-1-5#3:4:5:+6",
		"2024-1-5 3:4:5:6", "2024-1-5#3:4:5:6Z", "2024-1-5#3:4:5:6 ", "-1-5#3:4:5:6", "2024-1-5#3:4:5:1234567890", "1-1-1#0:0:0:0", "10000-1-1#0:0:0:0"} {
		if got, err := parseMQAdminTime("s", s); !errors.Is(err, errAdminUsage) {
			t.Errorf("%q read as %v, %v; want a usage error", s, got, err)
		}
	}
}

// TestParseMQAdminDateEpochDay: "1970-01-01#00:00:00:000", the usual way to
// say "from the start", is before the epoch east of UTC (16:00 UTC the day
// before at UTC+8). mqadmin takes it, and so did raftmq's strict parser; a
// local date of 1970 or later is accepted in any zone, an earlier one only
// when it is not before the epoch.
func TestParseMQAdminDateEpochDay(t *testing.T) {
	for _, loc := range []*time.Location{time.FixedZone("UTC+8", 8*3600), time.FixedZone("UTC-5", -5*3600), time.UTC} {
		want := time.Date(1970, 1, 1, 0, 0, 0, 0, loc)
		if got, ok := parseMQAdminDate("1970-01-01#00:00:00:000", loc); !ok || !got.Equal(want) {
			t.Errorf("%s: 1970-01-01 read as %v, %v; want %v", loc, got, ok, want)
		}
		if got, ok := parseMQAdminDate("1969-12-31#19:00:00:000", loc); ok != (loc.String() == "UTC-5") {
			t.Errorf("%s: 1969-12-31#19:00:00:000 read as %v, %v", loc, got, ok)
		}
	}
}
