package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/wire"
)

// TestAdminQueryMsgByIdSeveral: as mqadmin, queryMsgById -i takes several
// comma-separated ids (offset or client msgIds, blanks skipped) and looks
// each up in turn. Each message prints as a single lookup prints it, a
// blank line between two; --json is then an array, while one id still
// prints and encodes that message alone. An id not found fails the
// command after the others have printed. -f UTF-8 (the only charset
// raftmq prints bodies in) changes nothing.
func TestAdminQueryMsgByIdSeveral(t *testing.T) {
	f := startParity(t)
	var second []messageView
	f.js(t, &second, "queryMsgByKey", "-t", "ParT", "-k", "pk1")
	if len(second) != 1 {
		t.Fatalf("queryMsgByKey pk1: %+v", second)
	}
	one := f.run(t, "queryMsgById", "-i", f.offsetID)
	two := f.run(t, "queryMsgById", "-i", second[0].MsgID, "-t", "ParT")

	both := f.run(t, "queryMsgById", "-i", f.offsetID+", ,"+second[0].MsgID+",", "-t", "ParT")
	if want := one + "\n" + two; both != want {
		t.Fatalf("queryMsgById -i with two ids printed\n%s\nwant each as a single lookup prints it, a blank line between:\n%s", both, want)
	}
	var views []messageView
	f.js(t, &views, "queryMsgById", "-i", f.uniq+","+second[0].OffsetMsgID, "-t", "ParT")
	if len(views) != 2 || views[0].Body != "parity-0" || views[1].Body != "parity-1" {
		t.Fatalf("queryMsgById -i with two ids --json: %+v; want parity-0 then parity-1", views)
	}
	// One id, even with a trailing comma, is the message alone.
	var mv messageView
	f.js(t, &mv, "queryMsgById", "-i", f.offsetID+",")
	if mv.Body != "parity-0" {
		t.Fatalf("queryMsgById -i %s, --json: %+v", f.offsetID, mv)
	}
	if got := f.run(t, "queryMsgById", "-i", f.offsetID, "-f", "UTF-8"); got != one {
		t.Fatalf("queryMsgById -f UTF-8 printed\n%s\nwant what it prints without -f:\n%s", got, one)
	}

	const missing = "0123456789ABCDEF0123456789ABCDEF"
	out, err := runAdmin(t, append(f.n, "queryMsgById", "-i", missing+","+f.offsetID, "-t", "ParT")...)
	if !errors.Is(err, errNotFound) || !strings.Contains(err.Error(), missing) || out != one {
		t.Fatalf("queryMsgById -i with an id not found first: %v\n%s; want the found message printed, then a not-found error naming %s", err, out, missing)
	}
	if _, err := runAdmin(t, append(f.n, "queryMsgById", "-i", " , ")...); !errors.Is(err, errAdminUsage) {
		t.Fatalf("queryMsgById -i with no id: %v; want a usage error", err)
	}
}

// TestAdminQueryMsgByIdCluster: mqadmin queryMsgById -c clusterName looks
// a client msgId up on that cluster's brokers only (MQAdminImpl.queryMessage
// skips the route's brokers of other clusters). QT is routed to a group
// of each of two clusters and its message is stored in DefaultCluster's:
// -c OtherCluster does not find it, -c DefaultCluster does, with -t or
// searching every topic; an unknown cluster is an error naming it. An
// offset msgId names its broker, so -c does not apply to it.
func TestAdminQueryMsgByIdCluster(t *testing.T) {
	dc := devcluster.MustStart(t, devcluster.Options{Groups: 2, Members: 1, InMemory: true,
		Configure: func(g, _ int, cfg *broker.BrokerConfig) {
			cfg.TopicChangeCheckInterval = 50 * time.Millisecond
			if g == 1 {
				cfg.BrokerClusterName = "OtherCluster"
			}
		}})
	n := []string{"-n", dc.NamesrvAddr()}
	run := func(args ...string) string { return mustAdmin(t, append(n, args...)...) }
	routedTo := func(groups int) func() bool {
		return func() bool {
			var rd wire.TopicRouteData
			out, err := runAdmin(t, append(n, "topicRoute", "-t", "QT", "--json")...)
			return err == nil && json.Unmarshal([]byte(out), &rd) == nil && len(rd.BrokerDatas) == groups
		}
	}
	run("updateTopic", "-c", "DefaultCluster", "-t", "QT", "-r", "2", "-w", "2")
	testutil.WaitFor(t, 10*time.Second, "QT routed to DefaultCluster", routedTo(1))

	ctx := context.Background()
	p, err := client.NewProducer(client.NameServers(dc.NamesrvAddr()), client.ProducerGroup("QPG"), client.WithLogger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	res, err := p.SendSync(ctx, &client.Message{Topic: "QT", Body: []byte("in-default")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Queue.BrokerName != devcluster.GroupName(0) {
		t.Fatalf("QT's message went to %s; want %s, its only group", res.Queue.BrokerName, devcluster.GroupName(0))
	}
	run("updateTopic", "-c", "OtherCluster", "-t", "QT", "-r", "2", "-w", "2")
	testutil.WaitFor(t, 10*time.Second, "QT routed to both clusters", routedTo(2))

	for _, args := range [][]string{
		{"queryMsgById", "-i", res.MsgID, "-t", "QT", "-c", "OtherCluster"},
		{"queryMsgById", "-i", res.MsgID, "-c", "OtherCluster"},
	} {
		out, err := runAdmin(t, append(n, args...)...)
		if !errors.Is(err, errNotFound) || !strings.Contains(err.Error(), "OtherCluster") {
			t.Errorf("%s: %v\n%s; want not found in OtherCluster", strings.Join(args, " "), err, out)
		}
	}
	for _, args := range [][]string{
		{"queryMsgById", "-i", res.MsgID, "-t", "QT", "-c", "DefaultCluster"},
		{"queryMsgById", "-i", res.MsgID, "-c", "DefaultCluster"},
		{"queryMsgById", "-i", res.MsgID, "-t", "QT"},
		{"queryMsgById", "-i", res.OffsetMsgID, "-c", "OtherCluster"},
	} {
		var mv messageView
		adminJSON(t, &mv, append(n, args...)...)
		if mv.Body != "in-default" || mv.MsgID != res.MsgID {
			t.Errorf("%s: %+v; want QT's message", strings.Join(args, " "), mv)
		}
	}
	out, err := runAdmin(t, append(n, "queryMsgById", "-i", res.MsgID, "-t", "QT", "-c", "NoSuchCluster")...)
	if !errors.Is(err, errNotFound) || !strings.Contains(err.Error(), "NoSuchCluster") {
		t.Fatalf("queryMsgById -c NoSuchCluster: %v\n%s; want an error naming the unknown cluster", err, out)
	}
}
