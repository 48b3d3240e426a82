package console

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/wire"
)

// startNamesrv starts a bare name server (no brokers) on loopback ports.
func startNamesrv(t *testing.T) *namesrv.NameServer {
	t.Helper()
	cfg := namesrv.DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort = "127.0.0.1", testutil.FreePort(t)
	cfg.MetricsPort = -1
	cfg.KVConfigPath = filepath.Join(t.TempDir(), "kv.json")
	ns, err := namesrv.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	return ns
}

// A group whose leader left the routes (it died; the next one has not
// registered as brokerId 0 yet) cannot be asked for its offsets. Its
// queues were left out of the topic's sums and its consumer groups' lag
// without a word: the topic read as holding fewer messages and the lag as
// smaller than they are. Both views now name the group.
func TestLeaderlessGroupNamed(t *testing.T) {
	ns := startNamesrv(t)
	r := ns.Routes()
	topics := wire.TopicConfigSerializeWrapper{TopicConfigTable: map[string]wire.TopicConfig{
		"T": {TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}}, DataVersion: wire.DataVersion{Counter: 1, Timestamp: 1}}
	for id, addr := range []string{"127.0.0.1:1", "127.0.0.1:2"} {
		if _, err := r.RegisterBroker(namesrv.RegisterBrokerArgs{Cluster: "C", BrokerAddr: addr, BrokerName: "broker-a",
			BrokerID: int64(id), Topics: topics}); err != nil {
			t.Fatal(err)
		}
	}
	if !r.RemoveBroker("C", "broker-a", wire.MasterID) {
		t.Fatal("the leader was not registered")
	}
	if rd := r.PickupTopicRouteData("T"); rd == nil || len(rd.BrokerDatas) != 1 {
		t.Fatalf("route of T: %+v", rd)
	}

	c, err := New(ns, Options{ReadTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tv, _ := c.collectTopics(context.Background(), nil, time.Now())
	var found bool
	for _, s := range tv.Topics {
		if s.Topic == "T" {
			found = true
			if !strings.Contains(s.Error, "broker-a") || !strings.Contains(s.Error, "no leader") {
				t.Errorf("topic T with a leaderless group: error %q, want one naming broker-a", s.Error)
			}
		}
	}
	if !found {
		t.Fatalf("topic T not listed: %+v", tv.Topics)
	}
	gv, _ := c.collectGroups(context.Background(), nil, time.Now())
	if e := gv.Errors["broker-a"]; !strings.Contains(e, "no leader") {
		t.Errorf("groups with a leaderless broker group: errors %v, want broker-a's", gv.Errors)
	}
}

// Past the first maxTopicStats topics no offsets are collected: those
// topics were listed with 0 messages, 0 max offset and no error, which
// reads as empty topics. They now carry an error saying why.
func TestTopicsPastCapSayNotCollected(t *testing.T) {
	ns := startNamesrv(t)
	table := map[string]wire.TopicConfig{}
	for i := range maxTopicStats + 1 {
		name := fmt.Sprintf("T%04d", i)
		table[name] = wire.TopicConfig{TopicName: name, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	}
	// A registered follower and no leader: no topic's offsets are asked
	// of an address that does not answer.
	r := ns.Routes()
	for id, addr := range []string{"127.0.0.1:1", "127.0.0.1:2"} {
		if _, err := r.RegisterBroker(namesrv.RegisterBrokerArgs{Cluster: "C", BrokerAddr: addr, BrokerName: "broker-a", BrokerID: int64(id),
			Topics: wire.TopicConfigSerializeWrapper{TopicConfigTable: table, DataVersion: wire.DataVersion{Counter: 1, Timestamp: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	r.RemoveBroker("C", "broker-a", wire.MasterID)
	c, err := New(ns, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tv, _ := c.collectTopics(context.Background(), nil, time.Now())
	if !tv.Truncated || len(tv.Topics) != maxTopicStats+1 {
		t.Fatalf("truncated %v, %d topics", tv.Truncated, len(tv.Topics))
	}
	last := tv.Topics[maxTopicStats]
	if last.Topic != fmt.Sprintf("T%04d", maxTopicStats) || !strings.Contains(last.Error, "not collected") {
		t.Errorf("topic past the cap: %+v, want an error saying its offsets were not collected", last)
	}
}
