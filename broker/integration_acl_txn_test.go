package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestACLSDKTransactionCheckBack: with aclEnable, the SDK's transaction
// producer answers a check-back with a signed END_TRANSACTION (it goes on
// the connection the check came on, past the client's signing hook), so
// a half whose local transaction was unknown at first is committed by the
// check-back and stored, not refused and left to be discarded.
func TestACLSDKTransactionCheckBack(t *testing.T) {
	pc := startACLCluster(t, officialTxnConfig)
	pc.createTopicOnLeader("AclTopic", 2)
	l := newSDKTxListener()
	tp, err := client.NewTransactionProducer(l, client.NameServers(pc.nsAddr), client.WithLogger(testLogger()),
		client.ProducerGroup("AclTxPG"), client.InstanceName("acltx"+strconv.FormatInt(instanceSeq.Add(1), 10)),
		client.SendTimeout(5*time.Second), client.WithCredentials(aclApp.AccessKey, aclApp.SecretKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Close(context.Background()) })
	if res := sdkSendTx(t, tp, "AclTopic", "commit-direct"); res.State != client.TransactionCommit || res.EndErr != nil {
		t.Fatalf("direct commit: state %v end error %v", res.State, res.EndErr)
	}
	sdkSendTx(t, tp, "AclTopic", "unknown-then-checked")
	storedExactly(t, pc, "AclTopic", []string{"commit-direct", "unknown-then-checked"})
	if l.checks("unknown-then-checked") == 0 {
		t.Fatal("committed without a check-back")
	}
}

// TestACLEndTransactionNeedsPubOnTopic: END_TRANSACTION writes the half's
// message into its real topic (commit) or decides it away (rollback), so
// with aclEnable it needs PUB on that topic, as a send does, and on the
// topic its header names (RocketMQ 5's check). An account without PUB on
// a half's topic can neither commit nor roll back another producer's half
// by knowing its producer group and offsets, even naming a topic it may
// publish to (or the trace topic, open to every account) in the header;
// the half stays undecided. With PUB on the real
// topic the same account commits.
func TestACLEndTransactionNeedsPubOnTopic(t *testing.T) {
	pc := startACLCluster(t)
	li := pc.leader()
	leader := pc.nodes[li].Addr()
	pc.createTopic(leader, "Guarded", 1)
	pc.createTopic(leader, "AclTopic", 1)
	guarded := sendHalf(t, pc, leader, "Guarded", "guarded half", "GH1") // signed as the admin
	own := sendHalf(t, pc, leader, "AclTopic", "own half", "OH1")

	rc := remoting.NewClient(remoting.DefaultClientConfig(), nil)
	t.Cleanup(func() { _ = rc.Close() })
	rc.AddHook(remoting.SigningHook(remoting.Credentials{AccessKey: aclApp.AccessKey, SecretKey: aclApp.SecretKey}))
	end := func(h halfSent, decision int32, topic string) error {
		req := remoting.NewRequest(remoting.RequestEndTransaction, nil, nil)
		for k, v := range endExt(h, decision, false) {
			req.ExtFields[k] = v
		}
		if topic != "" {
			req.ExtFields["topic"] = topic
		}
		resp, err := rc.InvokeSync(context.Background(), leader, req)
		if err != nil {
			t.Fatal(err)
		}
		return remoting.ResponseError(leader, resp)
	}
	tr := transactionReplica(pc.groups[li])
	for _, c := range []struct {
		name     string
		decision int32
		topic    string
	}{
		{"commit", wire.SysFlagTransCommit, ""},
		{"rollback", wire.SysFlagTransRollback, ""},
		{"commit naming an allowed topic", wire.SysFlagTransCommit, "AclTopic"},
		{"rollback naming the real topic", wire.SysFlagTransRollback, "Guarded"},
		// Every account may publish traces; naming the trace topic must not
		// lift the check on the half's real topic.
		{"commit naming the trace topic", wire.SysFlagTransCommit, "RMQ_SYS_TRACE_TOPIC"},
	} {
		wantNoPermission(t, c.name+" of a Guarded half", end(guarded, c.decision, c.topic), "no PUB permission on topic:Guarded")
		if tr.TxnDecided(guarded.phy) {
			t.Fatalf("%s: the Guarded half was decided by a refused END_TRANSACTION", c.name)
		}
	}
	wantNoPermission(t, "commit of an AclTopic half naming Guarded", end(own, wire.SysFlagTransCommit, "Guarded"),
		"no PUB permission on topic:Guarded")
	if err := end(own, wire.SysFlagTransCommit, "AclTopic"); err != nil {
		t.Fatalf("commit of an AclTopic half: %v", err)
	}
	if r := pc.call(leader, remoting.RequestEndTransaction, endExt(guarded, wire.SysFlagTransCommit, false), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("admin commit: %d %s", r.Code, r.Remark)
	}
	storedExactly(t, pc, "AclTopic", []string{"own half"})
	storedExactly(t, pc, "Guarded", []string{"guarded half"})
}
