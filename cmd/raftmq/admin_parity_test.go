package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	rmqadmin "github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/rlog"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// parityFixture is the live state the mqadmin-parity commands run
// against: topic ParT with parityMsgs messages consumed by group ParCG
// (still online), a producer of group ParPG still connected.
type parityFixture struct {
	*adminCluster
	n        []string
	leader   string
	uniq     string // client msgId (UNIQ_KEY) of the first message
	offsetID string
	queueID  int
	queueOff int64
	consumer string // ParCG's client id
	consumed *atomic.Int64
}

const parityMsgs = 12

// startParity builds the fixture. Raft timeouts are longer than the
// 300 ms default so that leadership stays put under -race on a loaded
// machine: the tools' statistics are the leader's own counters.
// run runs an admin command against the fixture's name server and
// returns its output.
func (f *parityFixture) run(t *testing.T, args ...string) string {
	t.Helper()
	return mustAdmin(t, append(slices.Clone(f.n), args...)...)
}

// js runs an admin command with --json and decodes its output into v.
func (f *parityFixture) js(t *testing.T, v any, args ...string) {
	t.Helper()
	adminJSON(t, v, append(slices.Clone(f.n), args...)...)
}

func startParity(t *testing.T) *parityFixture {
	dc := devcluster.MustStart(t, devcluster.Options{SegmentBytes: 8 << 20, ConsumeQueueEntries: 10_000, InMemory: true,
		Configure: func(_, _ int, cfg *broker.BrokerConfig) {
			cfg.TopicChangeCheckInterval = 50 * time.Millisecond
			cfg.SendMessageThreadPoolNums, cfg.PullMessageThreadPoolNums = 2, 2
			cfg.Raft.HeartbeatTimeout, cfg.Raft.ElectionTimeout, cfg.Raft.LeaderLeaseTimeout = time.Second, time.Second, time.Second
		}})
	c := &adminCluster{Cluster: dc, nsAddr: dc.NamesrvAddr()}
	f := &parityFixture{adminCluster: c, n: []string{"-n", c.nsAddr}, leader: c.routedLeader()}
	mustAdmin(t, append(f.n, "updateTopic", "-c", "DefaultCluster", "-t", "ParT", "-r", "4", "-w", "4")...)
	testutil.WaitFor(t, 10*time.Second, "ParT routed", func() bool {
		out, err := runAdmin(t, append(f.n, "topicList")...)
		return err == nil && strings.Contains(out, "ParT\n")
	})
	// A producer of group ParPG as RocketMQ clients announce one: a
	// HEART_BEAT with its producer data, on a connection kept open (the
	// SDK's producer sends no heartbeats).
	hc := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = hc.Close() })
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "10.0.0.9@parity-producer", ProducerDataSet: []wire.HeartbeatProducerData{{GroupName: "ParPG"}}})
	hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
	resp, err := hc.InvokeSync(hctx, f.leader, remoting.NewRequest(remoting.RequestHeartBeat, nil, hb))
	hcancel()
	if err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("producer heartbeat: %v %+v", err, resp)
	}
	ctx := context.Background()
	p, err := client.NewProducer(client.NameServers(c.nsAddr), client.ProducerGroup("ParSDK"), client.WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	for i := range parityMsgs {
		tag := []string{"TagA", "TagB"}[i%2]
		res, err := p.SendSync(ctx, &client.Message{Topic: "ParT", Body: []byte(fmt.Sprintf("parity-%d", i)), Tags: tag, Keys: []string{fmt.Sprintf("pk%d", i)}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			f.uniq, f.offsetID, f.queueID, f.queueOff = res.MsgID, res.OffsetMsgID, res.Queue.QueueID, res.QueueOffset
		}
	}
	got := &atomic.Int64{}
	f.consumed = got
	cons, err := client.NewPushConsumer(client.NameServers(c.nsAddr), client.ConsumerGroup("ParCG"), client.ConsumeFrom(client.ConsumeFromFirstOffset),
		client.PersistInterval(50*time.Millisecond), client.WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	_ = cons.Subscribe("ParT", "*")
	_ = cons.RegisterConcurrentListener(func(_ context.Context, _ *client.ConsumeConcurrentlyContext, msgs []*client.MessageExt) client.ConsumeResult {
		got.Add(int64(len(msgs)))
		return client.ConsumeSuccess
	})
	if err := cons.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cons.Close(context.Background()) })
	testutil.WaitFor(t, 20*time.Second, "ParCG consumed and committed everything", func() bool {
		var cp consumerProgress
		out, err := runAdmin(t, append(f.n, "consumerProgress", "-g", "ParCG", "-t", "ParT", "--json")...)
		return got.Load() >= parityMsgs && err == nil && json.Unmarshal([]byte(out), &cp) == nil && len(cp.Queues) == 4 && cp.DiffTotal == 0
	})
	var cc wire.ConsumerConnection
	adminJSON(t, &cc, append(f.n, "consumerConnection", "-g", "ParCG")...)
	if len(cc.ConnectionSet) != 1 {
		t.Fatalf("consumerConnection: %+v", cc)
	}
	f.consumer = cc.ConnectionSet[0].ClientID
	return f
}

// TestAdminParity runs every mqadmin command added for parity against one
// live cluster (a name server and a 3-member Raft group), checking the
// table output and the outcome; then the official Go admin client, the
// tooling answers as RocketMQ's tools decode them, and the exit codes.
func TestAdminParity(t *testing.T) {
	f := startParity(t)
	n, leader := f.n, f.leader
	run, js := f.run, f.js

	cases := []struct {
		name string
		test func(t *testing.T)
	}{
		{"updateTopicPerm", func(t *testing.T) {
			wantLines(t, run(t, "updateTopicPerm", "-t", "ParT", "-c", "DefaultCluster", "-p", "4"), "update topic perm to "+leader)
			testutil.WaitFor(t, 10*time.Second, "perm 4 routed", func() bool {
				var rd wire.TopicRouteData
				out, err := runAdmin(t, append(n, "topicRoute", "-t", "ParT", "--json")...)
				return err == nil && json.Unmarshal([]byte(out), &rd) == nil && len(rd.QueueDatas) == 1 && rd.QueueDatas[0].Perm == 4 &&
					rd.QueueDatas[0].ReadQueueNums == 4
			})
			run(t, "updateTopicPerm", "-t", "ParT", "-b", leader, "-p", "6")
			if _, err := runAdmin(t, append(n, "updateTopicPerm", "-t", "ParT", "-b", leader, "-p", "3")...); !errors.Is(err, errAdminUsage) {
				t.Fatalf("perm 3: %v", err)
			}
		}},
		{"topicClusterList", func(t *testing.T) {
			if out := run(t, "topicClusterList", "-t", "ParT"); out != "DefaultCluster\n" {
				t.Fatalf("topicClusterList: %q", out)
			}
		}},
		{"topicList -c", func(t *testing.T) {
			out := run(t, "topicList", "-c")
			wantLines(t, out, "#Cluster Name", "#Topic", "#Consumer Group")
			if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
				return strings.HasPrefix(l, "DefaultCluster") && strings.Contains(l, " ParT ") && strings.HasSuffix(strings.TrimSpace(l), "ParCG")
			}) {
				t.Fatalf("topicList -c lacks DefaultCluster / ParT / ParCG:\n%s", out)
			}
		}},
		{"clusterList -m", func(t *testing.T) {
			wantLines(t, run(t, "clusterList", "-m"), "#InTotalYest", "#OutTotalToday", "broker-a")
			var rows []clusterMoreStats
			js(t, &rows, "clusterList", "-m")
			if len(rows) != 3 || !slices.ContainsFunc(rows, func(r clusterMoreStats) bool {
				return r.Addr == leader && r.InTotalToday >= parityMsgs && r.OutTotalToday >= parityMsgs
			}) {
				t.Fatalf("clusterList -m: %+v, want the leader with >= %d in and out today", rows, parityMsgs)
			}
		}},
		{"brokerConsumeStats", func(t *testing.T) {
			wantLines(t, run(t, "brokerConsumeStats", "-b", leader), "#Topic", "#Group", "ParT", "ParCG")
			var rows []consumeStatsRow
			js(t, &rows, "brokerConsumeStats", "-b", leader)
			var sum int64
			for _, r := range rows {
				if r.Group == "ParCG" && r.Topic == "ParT" {
					sum += r.ConsumerOffset
					if r.ConsumerOffset > 0 && r.LastTimestamp == 0 {
						t.Errorf("queue %d: no lastTimestamp", r.QueueID)
					}
				}
			}
			if sum != parityMsgs {
				t.Fatalf("brokerConsumeStats: ParCG offsets sum to %d, want %d: %+v", sum, parityMsgs, rows)
			}
			js(t, &rows, "brokerConsumeStats", "-b", leader, "-l", "1")
			if slices.ContainsFunc(rows, func(r consumeStatsRow) bool { return r.Group == "ParCG" }) {
				t.Fatalf("brokerConsumeStats -l 1 shows ParCG, which has no lag: %+v", rows)
			}
		}},
		{"statsAll", func(t *testing.T) {
			wantLines(t, run(t, "statsAll", "-t", "ParT"), "#Topic", "#InTPS", "ParCG")
			var rows []statsRow
			js(t, &rows, "statsAll", "-t", "ParT")
			if len(rows) != 1 || rows[0].Group != "ParCG" || rows[0].InMsg24Hour != parityMsgs || rows[0].OutMsg24Hour != parityMsgs ||
				rows[0].InTPS <= 0 || rows[0].Accumulation != 0 {
				t.Fatalf("statsAll: %+v, want ParCG with %d in and out, a positive in TPS, no accumulation", rows, parityMsgs)
			}
		}},
		{"consumerConnection", func(t *testing.T) {
			wantLines(t, run(t, "consumerConnection", "-g", "ParCG"), f.consumer, "Topic: ParT", "ConsumeType: CONSUME_PASSIVELY", "MessageModel: CLUSTERING")
		}},
		{"producerConnection", func(t *testing.T) {
			var pc wire.ProducerConnection
			js(t, &pc, "producerConnection", "-g", "ParPG", "-t", "ParT")
			if len(pc.ConnectionSet) != 1 || pc.ConnectionSet[0].ClientID != "10.0.0.9@parity-producer" || pc.ConnectionSet[0].Language != "GO" {
				t.Fatalf("producerConnection: %+v", pc)
			}
			wantLines(t, run(t, "producerConnection", "-g", "ParPG", "-t", "ParT"), "0001", pc.ConnectionSet[0].ClientID)
			if _, err := runAdmin(t, append(n, "producerConnection", "-g", "NoSuchPG", "-t", "ParT")...); !errors.Is(err, errNotFound) {
				t.Fatalf("producerConnection of an unknown group: %v", err)
			}
		}},
		{"consumerStatus", func(t *testing.T) {
			wantLines(t, run(t, "consumerStatus", "-g", "ParCG"), f.consumer, "#Consumer Properties#", "PROP_CONSUME_TYPE:", "CONSUME_PASSIVELY",
				"#Consumer Subscription#", "ParT", "#Consumer Offset#")
			var st []consumerStatus
			js(t, &st, "consumerStatus", "-g", "ParCG", "-i", f.consumer)
			if len(st) != 1 || st[0].Info.Properties[wire.PropConsumerStartTimestamp] == "" {
				t.Fatalf("consumerStatus -i: %+v", st)
			}
			var commit int64
			parT := 0
			for _, q := range st[0].Queues {
				if q.Queue.Topic == "ParT" {
					commit += q.State.CommitOffset
					parT++
				}
			}
			if parT != 4 {
				t.Fatalf("consumerStatus: %d queues of ParT, want 4: %+v", parT, st[0].Queues)
			}
			if commit != parityMsgs {
				t.Fatalf("consumerStatus: commit offsets sum to %d, want %d", commit, parityMsgs)
			}
		}},
		{"cloneGroupOffset", func(t *testing.T) {
			// The consumer commits its offsets to the broker on its own
			// schedule; the clone copies what the broker holds.
			testutil.WaitFor(t, 15*time.Second, "ParCG's offsets on the broker", func() bool {
				var cp consumerProgress
				js(t, &cp, "consumerProgress", "-g", "ParCG", "-t", "ParT")
				return len(cp.Queues) == 4 && cp.DiffTotal == 0
			})
			wantLines(t, run(t, "cloneGroupOffset", "-s", "ParCG", "-d", "ParClone", "-t", "ParT"), "clone group offset success")
			var cp consumerProgress
			js(t, &cp, "consumerProgress", "-g", "ParClone", "-t", "ParT")
			if len(cp.Queues) != 4 || cp.DiffTotal != 0 {
				t.Fatalf("consumerProgress of the clone: %+v", cp)
			}
		}},
		{"skipAccumulatedMessage", func(t *testing.T) {
			run(t, "updateSubGroup", "-c", "DefaultCluster", "-g", "ParSkip")
			run(t, "resetOffsetByTime", "-g", "ParSkip", "-t", "ParT", "-s", "0")
			var cp consumerProgress
			testutil.WaitFor(t, 5*time.Second, "ParSkip at 0", func() bool {
				out, err := runAdmin(t, append(n, "consumerProgress", "-g", "ParSkip", "-t", "ParT", "--json")...)
				return err == nil && json.Unmarshal([]byte(out), &cp) == nil && len(cp.Queues) == 4 && cp.DiffTotal >= parityMsgs
			})
			wantLines(t, run(t, "skipAccumulatedMessage", "-g", "ParSkip", "-t", "ParT"), "#brokerName", "broker-a")
			testutil.WaitFor(t, 5*time.Second, "ParSkip at the end", func() bool {
				out, err := runAdmin(t, append(n, "consumerProgress", "-g", "ParSkip", "-t", "ParT", "--json")...)
				return err == nil && json.Unmarshal([]byte(out), &cp) == nil && cp.DiffTotal == 0
			})
		}},
		{"resetOffsetByTime with a live consumer", func(t *testing.T) {
			// The broker relays the reset to ParCG's consumer (220), which
			// consumes everything again instead of committing over it.
			before := f.consumed.Load()
			run(t, "resetOffsetByTime", "-g", "ParCG", "-t", "ParT", "-s", "0")
			testutil.WaitFor(t, 20*time.Second, "ParCG consumed ParT again", func() bool {
				var cp consumerProgress
				out, err := runAdmin(t, append(n, "consumerProgress", "-g", "ParCG", "-t", "ParT", "--json")...)
				return f.consumed.Load()-before >= parityMsgs && err == nil && json.Unmarshal([]byte(out), &cp) == nil && cp.DiffTotal == 0
			})
		}},
		{"deleteSubGroup", func(t *testing.T) {
			run(t, "updateSubGroup", "-c", "DefaultCluster", "-g", "ParDel")
			wantLines(t, run(t, "deleteSubGroup", "-g", "ParDel", "-c", "DefaultCluster"),
				"delete subscription group [ParDel] from broker ["+leader+"] in cluster [DefaultCluster] success.")
			if _, err := runAdmin(t, append(n, "deleteSubGroup", "-g", "ParDel")...); !errors.Is(err, errAdminUsage) {
				t.Fatalf("deleteSubGroup without -b/-c: %v", err)
			}
		}},
		{"queryMsgById by client msgId", func(t *testing.T) {
			var mv messageView
			js(t, &mv, "queryMsgById", "-i", f.uniq)
			if mv.MsgID != f.uniq || mv.Body != "parity-0" {
				t.Fatalf("queryMsgById %s (UNIQ_KEY): %+v", f.uniq, mv)
			}
			js(t, &mv, "queryMsgById", "-i", f.uniq, "-t", "ParT")
			js(t, &mv, "queryMsgById", "-i", f.offsetID)
			if mv.OffsetMsgID != f.offsetID || mv.Body != "parity-0" {
				t.Fatalf("queryMsgById %s (offset id): %+v", f.offsetID, mv)
			}
		}},
		{"queryMsgByUniqueKey", func(t *testing.T) {
			wantLines(t, run(t, "queryMsgByUniqueKey", "-i", f.uniq, "-t", "ParT"), "MsgID:", f.uniq, "parity-0")
			if _, err := runAdmin(t, append(n, "queryMsgByUniqueKey", "-i", "0A0000000000000000000000000000FF", "-t", "ParT")...); !errors.Is(err, errNotFound) {
				t.Fatalf("unknown unique key: %v", err)
			}
		}},
		{"queryMsgByOffset", func(t *testing.T) {
			var mv messageView
			js(t, &mv, "queryMsgByOffset", "-t", "ParT", "-b", "broker-a", "-i", fmt.Sprint(f.queueID), "-o", fmt.Sprint(f.queueOff))
			if mv.Body != "parity-0" || mv.MsgID != f.uniq {
				t.Fatalf("queryMsgByOffset: %+v", mv)
			}
			if _, err := runAdmin(t, append(n, "queryMsgByOffset", "-t", "ParT", "-b", "broker-a", "-i", "0", "-o", "999")...); !errors.Is(err, errNotFound) {
				t.Fatalf("offset past the end: %v", err)
			}
		}},
		{"printMsg", func(t *testing.T) {
			var pm printedMessages
			js(t, &pm, "printMsg", "-t", "ParT")
			if len(pm.Messages) != parityMsgs {
				t.Fatalf("printMsg: %d messages, want %d", len(pm.Messages), parityMsgs)
			}
			js(t, &pm, "printMsg", "-t", "ParT", "-s", "TagA", "-b", "0", "-e", "now")
			if len(pm.Messages) != parityMsgs/2 || slices.ContainsFunc(pm.Messages, func(m messageView) bool { return m.Tags != "TagA" }) {
				t.Fatalf("printMsg -s TagA: %+v", pm.Messages)
			}
			wantLines(t, run(t, "printMsg", "-t", "ParT", "-d", "true"), "BODY: parity-", fmt.Sprintf("%d message(s)", parityMsgs))
		}},
		{"printMsgByQueue", func(t *testing.T) {
			out := run(t, "printMsgByQueue", "-t", "ParT", "-a", "broker-a", "-i", fmt.Sprint(f.queueID), "-f", "true")
			wantLines(t, out, "Tag: ", "Count:")
			var pm printedMessages
			js(t, &pm, "printMsgByQueue", "-t", "ParT", "-a", "broker-a", "-i", fmt.Sprint(f.queueID))
			if len(pm.Messages) == 0 || slices.ContainsFunc(pm.Messages, func(m messageView) bool { return int(m.QueueID) != f.queueID }) {
				t.Fatalf("printMsgByQueue: %+v", pm.Messages)
			}
		}},
		{"consumeMessage", func(t *testing.T) {
			var pm printedMessages
			js(t, &pm, "consumeMessage", "-t", "ParT", "-c", "3")
			if len(pm.Messages) != 3 {
				t.Fatalf("consumeMessage -c 3: %d messages", len(pm.Messages))
			}
			js(t, &pm, "consumeMessage", "-t", "ParT", "-b", "broker-a", "-i", fmt.Sprint(f.queueID), "-o", fmt.Sprint(f.queueOff), "-c", "1")
			if len(pm.Messages) != 1 || pm.Messages[0].Body != "parity-0" {
				t.Fatalf("consumeMessage -o: %+v", pm.Messages)
			}
		}},
		{"checkMsgSendRT", func(t *testing.T) {
			wantLines(t, run(t, "checkMsgSendRT", "-t", "ParT", "-a", "3", "-s", "16"), "#RT", "broker-a", "true", "Avg RT:")
		}},
		{"clusterRT", func(t *testing.T) {
			var rows []clusterRTRow
			js(t, &rows, "clusterRT", "-t", "ParT", "-a", "3")
			if len(rows) != 1 || rows[0].Success != 3 || rows[0].Fail != 0 || rows[0].BrokerName != "broker-a" {
				t.Fatalf("clusterRT: %+v", rows)
			}
			// mqadmin's default topic is the broker name; the broker
			// creates it on the first send (autoCreateTopicEnable).
			js(t, &rows, "clusterRT", "-a", "2")
			if len(rows) != 1 || rows[0].Success != 2 {
				t.Fatalf("clusterRT to the broker-a topic: %+v", rows)
			}
		}},
		{"getNamesrvConfig and updateNamesrvConfig", func(t *testing.T) {
			wantLines(t, run(t, "getNamesrvConfig"), "============"+f.nsAddr, "enableTopicList", "=")
			run(t, "updateNamesrvConfig", "-k", "enableAllTopicList", "-v", "false")
			if _, err := runAdmin(t, append(n, "topicList")...); err == nil || !strings.Contains(err.Error(), "disable") {
				t.Fatalf("topicList with enableAllTopicList=false: %v", err)
			}
			var cfgs []map[string]string
			js(t, &cfgs, "getNamesrvConfig")
			if len(cfgs) != 1 || cfgs[0]["enableAllTopicList"] != "false" {
				t.Fatalf("getNamesrvConfig after the update: %v", cfgs)
			}
			run(t, "updateNamesrvConfig", "-k", "enableAllTopicList", "-v", "true")
			if _, err := runAdmin(t, append(n, "updateNamesrvConfig", "-k", "kvConfigPath", "-v", "/tmp/x")...); err == nil ||
				!strings.Contains(err.Error(), "cannot change at runtime") {
				t.Fatalf("updateNamesrvConfig kvConfigPath: %v", err)
			}
			// RocketMQ writes config text unescaped (properties2String): a
			// line break cannot be carried and is refused before sending.
			for _, cmd := range [][]string{{"updateNamesrvConfig"}, {"updateBrokerConfig", "-b", f.leader}} {
				_, err := runAdmin(t, append(slices.Clone(n), append(cmd, "-k", "enableAllTopicList", "-v", "true\nx")...)...)
				if !errors.Is(err, errAdminUsage) || !strings.Contains(err.Error(), "line break") {
					t.Fatalf("%s with a line break: %v, want a usage error", cmd[0], err)
				}
			}
		}},
		{"updateKvConfig, updateOrderConf and deleteKvConfig", func(t *testing.T) {
			run(t, "updateKvConfig", "-s", wire.NamespaceOrderTopicConfig, "-k", "ParT", "-v", "broker-a:4")
			wantLines(t, run(t, "updateOrderConf", "-t", "ParT", "-m", "get"), "orderConf=[broker-a:4]")
			run(t, "updateOrderConf", "-t", "ParT", "-m", "put", "-v", "broker-a:2")
			wantLines(t, run(t, "updateOrderConf", "-t", "ParT", "-m", "get"), "orderConf=[broker-a:2]")
			run(t, "deleteKvConfig", "-s", wire.NamespaceOrderTopicConfig, "-k", "ParT")
			if _, err := runAdmin(t, append(n, "updateOrderConf", "-t", "ParT", "-m", "get")...); err == nil {
				t.Fatal("order conf still there after deleteKvConfig")
			}
			run(t, "updateOrderConf", "-t", "ParT", "-m", "put", "-v", "broker-a:2")
			run(t, "updateOrderConf", "-t", "ParT", "-m", "delete")
		}},
		{"maintenance", func(t *testing.T) {
			wantLines(t, run(t, "cleanExpiredCQ", "-c", "DefaultCluster"), "cleanExpiredCQ success on "+leader)
			wantLines(t, run(t, "cleanUnusedTopic", "-b", leader), "cleanUnusedTopic success on "+leader)
			out := run(t, "deleteExpiredCommitLog", "-c", "DefaultCluster")
			if strings.Count(out, "deleteExpiredCommitLog success on") != 3 {
				t.Fatalf("deleteExpiredCommitLog -c: %s", out)
			}
			// ParT's messages are still there.
			var pm printedMessages
			js(t, &pm, "printMsg", "-t", "ParT")
			if len(pm.Messages) < parityMsgs {
				t.Fatalf("after maintenance: %d messages", len(pm.Messages))
			}
		}},
		{"allocateMQ", func(t *testing.T) {
			var r map[string][]client.MessageQueue
			js(t, &r, "allocateMQ", "-t", "ParT", "-i", "10.0.0.1@a,10.0.0.2@b")
			if len(r) != 2 || len(r["10.0.0.1@a"]) != 2 || len(r["10.0.0.2@b"]) != 2 {
				t.Fatalf("allocateMQ: %+v", r)
			}
			wantLines(t, run(t, "allocateMQ", "-t", "ParT", "-i", "x"), `{"result":{"x":[`)
		}},
		{"updateBrokerConfig in the group, across a restart", func(t *testing.T) {
			run(t, "updateBrokerConfig", "-b", leader, "-k", "maxReconsumeTimes", "-v", "7")
			for _, m := range f.Members(0) {
				var kv map[string]string
				js(t, &kv, "getBrokerConfig", "-b", m.Addr())
				if kv["maxReconsumeTimes"] != "7" {
					t.Fatalf("member %s after updateBrokerConfig on the leader: maxReconsumeTimes=%q", m.ID(), kv["maxReconsumeTimes"])
				}
			}
			follower := (f.Leader(0) + 1) % 3
			if err := f.Stop(0, follower); err != nil {
				t.Fatal(err)
			}
			if err := f.Restart(0, follower); err != nil {
				t.Fatal(err)
			}
			var kv map[string]string
			js(t, &kv, "getBrokerConfig", "-b", f.Member(0, follower).Addr())
			if kv["maxReconsumeTimes"] != "7" {
				t.Fatalf("restarted member: maxReconsumeTimes=%q, want 7", kv["maxReconsumeTimes"])
			}
		}},
		{"wipeWritePerm and addWritePerm", func(t *testing.T) {
			wantLines(t, run(t, "wipeWritePerm", "-b", "broker-a"), "wipe write perm of broker[broker-a] in name server["+f.nsAddr+"] OK")
			var rd wire.TopicRouteData
			js(t, &rd, "topicRoute", "-t", "ParT")
			if rd.QueueDatas[0].Perm&wire.PermWrite != 0 {
				t.Fatalf("ParT still writable after wipeWritePerm: %+v", rd.QueueDatas)
			}
			wantLines(t, run(t, "addWritePerm", "-b", "broker-a"), "add write perm of broker[broker-a]")
			js(t, &rd, "topicRoute", "-t", "ParT")
			if rd.QueueDatas[0].Perm&wire.PermWrite == 0 {
				t.Fatalf("ParT not writable after addWritePerm: %+v", rd.QueueDatas)
			}
		}},
		{"NAMESRV_ADDR", func(t *testing.T) {
			t.Setenv("NAMESRV_ADDR", f.nsAddr)
			wantLines(t, mustAdmin(t, "clusterList"), "broker-a", leader)
		}},
		{"official admin client", func(t *testing.T) { testOfficialAdmin(t, f) }},
		{"tooling answers", func(t *testing.T) { testToolingAnswers(t, f) }},
		{"exit codes", func(t *testing.T) {
			for _, args := range [][]string{{"admin", "topiclst"}, {"admin", "clusterList", "-n", "127.0.0.1:1", "--timeout", "300ms"}} {
				cmd := exec.Command(os.Args[0])
				cmd.Env = mainEnv(args...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				err := cmd.Run()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() == 0 {
					t.Fatalf("raftmq %v: %v, want a non-zero exit", args, err)
				}
				if args[1] == "topiclst" && !strings.Contains(stderr.String(), "did you mean topicList") {
					t.Fatalf("raftmq admin topiclst: stderr lacks the suggestion:\n%s", stderr.String())
				}
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, c.test)
	}
}

// testOfficialAdmin drives raftmq with the official Go admin client:
// create, list and delete a topic; read the subscription groups.
func testOfficialAdmin(t *testing.T, f *parityFixture) {
	rlog.SetLogLevel("error")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := rmqadmin.NewAdmin(rmqadmin.WithResolver(primitive.NewPassthroughResolver([]string{f.nsAddr})))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Close() }()
	if err := a.CreateTopic(ctx, rmqadmin.WithTopicCreate("OffAdminT"), rmqadmin.WithBrokerAddrCreate(f.leader),
		rmqadmin.WithReadQueueNums(2), rmqadmin.WithWriteQueueNums(2)); err != nil {
		t.Fatalf("official CreateTopic: %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, "OffAdminT listed", func() bool {
		tl, err := a.FetchAllTopicList(ctx)
		return err == nil && slices.Contains(tl.TopicList, "OffAdminT")
	})
	sg, err := a.GetAllSubscriptionGroup(ctx, f.leader, 3*time.Second)
	if err != nil {
		t.Fatalf("official GetAllSubscriptionGroup: %v", err)
	}
	if g, ok := sg.SubscriptionGroupTable["ParCG"]; !ok || g.GroupName != "ParCG" || !g.ConsumeEnable {
		t.Fatalf("official GetAllSubscriptionGroup: ParCG = %+v (%v)", g, ok)
	}
	if err := a.DeleteTopic(ctx, rmqadmin.WithTopicDelete("OffAdminT"), rmqadmin.WithBrokerAddrDelete(f.leader),
		rmqadmin.WithNameSrvAddr([]string{f.nsAddr})); err != nil {
		t.Fatalf("official DeleteTopic: %v", err)
	}
	tl, err := a.FetchAllTopicList(ctx)
	if err != nil || slices.Contains(tl.TopicList, "OffAdminT") {
		t.Fatalf("after official DeleteTopic: %v, %v", tl, err)
	}
}
