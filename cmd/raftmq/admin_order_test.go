package main

import (
	"strings"
	"testing"
)

// TestAdminUpdateTopicOrderConf: mqadmin updateTopic -o true also writes
// the topic's order config on the name servers (ORDER_TOPIC_CONFIG KV,
// which routes carry under orderMessageEnable): with -c the cluster's
// groups at the topic's write queue count, with -b that broker's group
// merged into the entries already there. Storing the order flag alone
// would leave producers routing the topic as an unordered one.
func TestAdminUpdateTopicOrderConf(t *testing.T) {
	f := startParity(t)
	getConf := func(topic string) string {
		var oc orderConf
		f.js(t, &oc, "updateOrderConf", "-t", topic, "-m", "get")
		return oc.OrderConf
	}
	out := f.run(t, "updateTopic", "-c", "DefaultCluster", "-t", "ParOrd", "-r", "2", "-w", "2", "-o", "true")
	wantLines(t, out, "set cluster orderConf. isOrder=true, orderConf=[broker-a:2]")
	if got := getConf("ParOrd"); got != "broker-a:2" {
		t.Fatalf("order conf after updateTopic -c -o true: %q, want broker-a:2", got)
	}

	f.run(t, "updateOrderConf", "-t", "ParOrd2", "-m", "put", "-v", "broker-x:3")
	out = f.run(t, "updateTopic", "-b", f.leader, "-t", "ParOrd2", "-r", "4", "-w", "4", "-o", "true")
	wantLines(t, out, "set broker orderConf. isOrder=true, orderConf=[broker-a:4]")
	got := getConf("ParOrd2")
	if parts := strings.Split(got, ";"); len(parts) != 2 || !strings.Contains(got, "broker-x:3") || !strings.Contains(got, "broker-a:4") {
		t.Fatalf("order conf after updateTopic -b -o true over broker-x:3: %q, want both groups", got)
	}
	// Without -o true nothing is written.
	f.run(t, "updateTopic", "-c", "DefaultCluster", "-t", "ParPlain", "-r", "2", "-w", "2")
	if _, err := runAdmin(t, append(f.n, "updateOrderConf", "-t", "ParPlain", "-m", "get")...); err == nil {
		t.Fatalf("updateTopic without -o wrote an order conf")
	}
}
