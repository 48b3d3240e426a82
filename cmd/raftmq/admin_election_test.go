package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
	"go.uber.org/zap"
)

// TestAdminCommandsRideOutElection: the commands mqadmin sends to a
// group's master wait out an election instead of failing, or showing
// nothing, while the group has no leader or quorum: the writes are
// answered by the leader it elects, statsAll by a member the route
// lists. Here the group loses its leader and quorum, the commands start,
// and a member comes back.
// Meanwhile the commands naming a member for what any member answers
// (brokerStatus, brokerConsumeStats, clusterAclConfigVersion -b, as
// mqadmin sends them to that address) are answered by the survivor.
func TestAdminCommandsRideOutElection(t *testing.T) {
	c := startAdminCluster(t)
	n := []string{"-n", c.nsAddr}
	mustAdmin(t, append(n, "updateTopic", "-c", "DefaultCluster", "-t", "ElT", "-r", "2", "-w", "2")...)
	mustAdmin(t, append(n, "updateSubGroup", "-c", "DefaultCluster", "-g", "ElDel")...)
	testutil.WaitFor(t, 10*time.Second, "ElT routed", func() bool {
		_, err := runAdmin(t, append(n, "topicRoute", "-t", "ElT")...)
		return err == nil
	})
	l := c.Leader(0)
	f, s := (l+1)%3, (l+2)%3
	c.Kill(0, l)
	c.Kill(0, f)
	surv := c.Member(0, s).Addr()
	// clusterAclConfigVersion -b asks every member the name server lists
	// for the group, so the killed ones must be gone from it first.
	waitOnlyListed(t, c, surv)

	leaderBound := [][]string{
		{"statsAll", "-t", "ElT", "--json"},
		{"updateTopicPerm", "-c", "DefaultCluster", "-t", "ElT", "-p", "6"},
		{"cloneGroupOffset", "-t", "ElT", "-s", "ElSrc", "-d", "ElDst"},
		{"deleteSubGroup", "-c", "DefaultCluster", "-g", "ElDel"},
	}
	type result struct {
		args []string
		out  string
		err  error
	}
	results := make(chan result, len(leaderBound))
	started := make(chan struct{}, len(leaderBound))
	for _, args := range leaderBound {
		go func() {
			started <- struct{}{}
			out, err := runAdmin(t, append(n, args...)...)
			results <- result{args, out, err}
		}()
	}
	for range leaderBound {
		<-started
	}
	for _, q := range []struct {
		args []string
		want string
	}{
		{[]string{"brokerStatus", "-b", surv}, "brokerName:"},
		{[]string{"brokerConsumeStats", "-b", surv}, "#Broker Offset"},
		{[]string{"clusterAclConfigVersion", "-b", surv}, surv},
	} {
		if out, err := runAdmin(t, append(n, q.args...)...); err != nil || !strings.Contains(out, q.want) {
			t.Errorf("%v while the group has no leader: %v\n%s", q.args, err, out)
		}
	}
	if err := c.Restart(0, f); err != nil {
		t.Fatal(err)
	}
	for range leaderBound {
		r := <-results
		if r.err != nil {
			t.Errorf("%v across the election: %v\n%s", r.args, r.err, r.out)
			continue
		}
		var rows []statsRow
		if r.args[0] == "statsAll" && (json.Unmarshal([]byte(r.out), &rows) != nil || len(rows) != 1 || rows[0].Topic != "ElT") {
			t.Errorf("statsAll across the election shows no row for ElT:\n%s", r.out)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "a leader", func() bool { return c.Leader(0) >= 0 })
	nl := c.Leader(0)
	if nl != s && nl != f {
		t.Fatalf("leader %d, want %d or %d", nl, s, f)
	}
	if _, ok := c.Member(0, nl).Group.State().SubscriptionGroup("ElDel"); ok {
		t.Error("ElDel still exists on the new leader")
	}
}

// waitOnlyListed waits until the name server lists surv, as a follower,
// as group 0's only member. Killed members leave it when their
// registration connections close, and a survivor that led without a
// quorum steps down within its leader lease; 10 s leaves room for a
// slow machine. On timeout it says what is listed.
func waitOnlyListed(t *testing.T, c *adminCluster, surv string) {
	t.Helper()
	var listed map[int64]string
	defer func() {
		if t.Failed() {
			t.Logf("the name server lists %v for %s; the survivor is %s", listed, devcluster.GroupName(0), surv)
		}
	}()
	testutil.WaitFor(t, 10*time.Second, "the name server listing only the survivor, as a follower", func() bool {
		listed = c.Namesrv().Routes().ClusterInfo().BrokerAddrTable[devcluster.GroupName(0)].BrokerAddrs
		return len(listed) == 1 && listed[wire.MasterID] == "" && slices.Contains(slices.Collect(maps.Values(listed)), surv)
	})
}

// TestAdminReadsWithoutMaster: the message-reading commands pull where
// mqadmin's DefaultMQPullConsumer does (findBrokerAddressInSubscribe):
// the group's leader when the route names one, else any member it lists;
// raftmq followers answer pulls of what they have applied. With the
// leader and a follower down (no quorum, so no master registered) they
// print the stored messages from the surviving member.
func TestAdminReadsWithoutMaster(t *testing.T) {
	c := startAdminCluster(t)
	n := []string{"-n", c.nsAddr}
	mustAdmin(t, append(n, "updateTopic", "-c", "DefaultCluster", "-t", "RdT", "-r", "1", "-w", "1")...)
	testutil.WaitFor(t, 10*time.Second, "RdT routed", func() bool {
		_, err := runAdmin(t, append(n, "topicRoute", "-t", "RdT")...)
		return err == nil
	})
	const msgs = 3
	var bodies []string
	for i := range msgs {
		bodies = append(bodies, fmt.Sprintf("read-%d", i))
		mustAdmin(t, append(n, "sendMessage", "-t", "RdT", "-p", bodies[i], "-b", "broker-a", "-i", "0")...)
	}
	l := c.Leader(0)
	f, s := (l+1)%3, (l+2)%3
	surv := c.Member(0, s).Group.Store()
	testutil.WaitFor(t, 10*time.Second, "the survivor applying every message", func() bool {
		return surv.GetMaxOffsetInQueue("RdT", 0) == msgs
	})
	c.Kill(0, l)
	c.Kill(0, f)
	// The pulls go to a member the name server lists, so the killed ones
	// must be gone from it first.
	waitOnlyListed(t, c, c.Member(0, s).Addr())

	for _, args := range [][]string{
		{"printMsg", "-t", "RdT"},
		{"printMsg", "-t", "RdT", "-b", "0", "-e", "now"},
		{"printMsgByQueue", "-t", "RdT", "-a", "broker-a", "-i", "0"},
		{"consumeMessage", "-t", "RdT", "-g", "RdG", "-c", "10"},
		{"consumeMessage", "-t", "RdT", "-b", "broker-a", "-i", "0", "-o", "0"},
	} {
		out, err := runAdmin(t, append(append(n, args...), "--json")...)
		var pm printedMessages
		if err == nil {
			err = json.Unmarshal([]byte(out), &pm)
		}
		var got []string
		for _, m := range pm.Messages {
			got = append(got, m.Body)
		}
		if err != nil || !slices.Equal(got, bodies) {
			t.Errorf("%v without a master: %v, bodies %q, want %q\n%s", args, err, got, bodies, out)
		}
	}
	var mv messageView
	out, err := runAdmin(t, append(n, "queryMsgByOffset", "-t", "RdT", "-b", "broker-a", "-i", "0", "-o", "1", "--json")...)
	if err == nil {
		err = json.Unmarshal([]byte(out), &mv)
	}
	if err != nil || mv.Body != bodies[1] || mv.QueueOffset != 1 {
		t.Errorf("queryMsgByOffset without a master: %v, %+v\n%s", err, mv, out)
	}
}

// TestStatsAllPassesOverAnUnreadableGroup: statsAll bounds each request,
// not the command, and leaves a group it cannot read out of its topics'
// sums, as mqadmin does. The name server routes seven topics, and StLive
// besides its live group, to a group whose only member hangs (it reads
// requests and never answers): StLive's row is still printed from the live
// group, the command names every unreadable topic and exits non-zero, and
// the hung group is asked once, not once per topic.
func TestStatsAllPassesOverAnUnreadableGroup(t *testing.T) {
	c := startAdminCluster(t)
	n := []string{"-n", c.nsAddr}
	mustAdmin(t, append(n, "updateTopic", "-c", "DefaultCluster", "-t", "StLive", "-r", "1", "-w", "1")...)
	gone, asked := hungServer(t)
	table := map[string]wire.TopicConfig{"StLive": {TopicName: "StLive", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}}
	var dead []string
	for i := range 7 {
		name := fmt.Sprintf("StGone%d", i)
		dead = append(dead, name)
		table[name] = wire.TopicConfig{TopicName: name, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}
	}
	body, err := wire.EncodeRegisterBrokerBody(&wire.RegisterBrokerBody{
		TopicConfigSerializeWrapper: wire.TopicConfigSerializeWrapper{TopicConfigTable: table},
		FilterServerList:            []string{},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	rc := remoting.NewClient(remoting.ClientConfig{DefaultTimeout: 5 * time.Second}, zap.NewNop())
	defer rc.Close()
	resp, err := rc.InvokeSync(context.Background(), c.nsAddr, remoting.NewRequest(remoting.RequestRegisterBroker,
		&wire.RegisterBrokerRequestHeader{BrokerName: "broker-gone", BrokerAddr: gone, ClusterName: "DefaultCluster",
			HAServerAddr: gone, BodyCrc32: int32(wire.BodyCRC32(body))}, body))
	if err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("registering broker-gone: %v %+v", err, resp)
	}
	testutil.WaitFor(t, 10*time.Second, "StLive routed to both groups", func() bool {
		out, err := runAdmin(t, append(n, "topicRoute", "-t", "StLive")...)
		return err == nil && strings.Contains(out, "broker-a") && strings.Contains(out, "broker-gone")
	})

	out, err := runAdmin(t, append(n, "statsAll", "--json", "--timeout", "500ms")...)
	if err == nil {
		t.Fatal("statsAll with broker-gone unreadable: no error")
	}
	for _, name := range append(dead, "StLive") {
		if !strings.Contains(err.Error(), "topic "+name+": group broker-gone") {
			t.Errorf("statsAll's error does not name topic %s's group broker-gone: %v", name, err)
		}
	}
	var rows []statsRow
	if jerr := json.Unmarshal([]byte(out), &rows); jerr != nil || !slices.ContainsFunc(rows, func(r statsRow) bool { return r.Topic == "StLive" }) {
		t.Errorf("statsAll printed no row for StLive (%v):\n%s", jerr, out)
	}
	for _, r := range rows {
		if strings.HasPrefix(r.Topic, "StGone") {
			t.Errorf("statsAll printed a row for %s, which no group answered for", r.Topic)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the hung group was asked %d times in one statsAll over %d of its topics, want once", n, len(dead)+1)
	}
}

// hungServer listens on a loopback port, reads remoting frames and never
// answers; asked counts the frames read.
func hungServer(t *testing.T) (addr string, asked *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	asked = new(atomic.Int64)
	var conns sync.WaitGroup
	t.Cleanup(func() {
		_ = l.Close()
		conns.Wait()
	})
	conns.Add(1)
	go func() {
		defer conns.Done()
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer nc.Close()
				stop := context.AfterFunc(t.Context(), func() { _ = nc.Close() })
				defer stop()
				var n [4]byte
				for {
					if _, err := io.ReadFull(nc, n[:]); err != nil {
						return
					}
					if _, err := io.CopyN(io.Discard, nc, int64(binary.BigEndian.Uint32(n[:]))); err != nil {
						return
					}
					asked.Add(1)
				}
			}()
		}
	}()
	return l.Addr().String(), asked
}
