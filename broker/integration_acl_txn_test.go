package broker

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
)

// TestACLSDKTransactionCheckBack: with aclEnable, the SDK's transaction
// producer answers a check-back with a signed END_TRANSACTION (it goes on
// the connection the check came on, past the client's signing hook), so
// a half whose local transaction was unknown at first is committed by the
// check-back and stored, not refused and left to be discarded.
func TestACLSDKTransactionCheckBack(t *testing.T) {
	pc := startACLCluster(t, officialTxnConfig)
	pc.createTopic(pc.nodes[pc.leader()].Addr(), "AclTopic", 2)
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
