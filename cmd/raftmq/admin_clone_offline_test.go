package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestAdminCloneGroupOffsetOffline: cloneGroupOffset's -o says the source
// group is offline. Without it the broker, as RocketMQ's, does not clone
// a topic the group's online consumers do not subscribe to; the command
// then fails naming -o instead of printing success over nothing, and
// -o true clones it.
func TestAdminCloneGroupOffsetOffline(t *testing.T) {
	f := startParity(t)
	progress := func(group string) consumerProgress {
		var cp consumerProgress
		f.js(t, &cp, "consumerProgress", "-g", group, "-t", "ParT")
		return cp
	}
	f.run(t, "cloneGroupOffset", "-s", "ParCG", "-d", "ParOnline", "-t", "ParT")
	// ParOnline comes online subscribed to another topic only.
	hc := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = hc.Close() })
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: "10.0.0.7@elsewhere", ConsumerDataSet: []wire.HeartbeatConsumerData{{
		GroupName: "ParOnline", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_LAST_OFFSET",
		SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "ParElsewhere", SubString: "*"}}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	resp, err := hc.InvokeSync(ctx, f.leader, remoting.NewRequest(remoting.RequestHeartBeat, nil, hb))
	cancel()
	if err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("consumer heartbeat: %v %+v", err, resp)
	}

	out, err := runAdmin(t, append(f.n, "cloneGroupOffset", "-s", "ParOnline", "-d", "ParClone2", "-t", "ParT")...)
	if err == nil || !strings.Contains(err.Error(), "-o true") {
		t.Fatalf("cloneGroupOffset of an online group not subscribed to the topic: %v\n%s; want a failure naming -o true", err, out)
	}
	if cp := progress("ParClone2"); cp.DiffTotal != parityMsgs {
		t.Fatalf("ParClone2 has offsets after a refused clone: %+v", cp)
	}
	f.run(t, "cloneGroupOffset", "-s", "ParOnline", "-d", "ParClone2", "-t", "ParT", "-o", "true")
	testutil.WaitFor(t, 5*time.Second, "ParClone2 at ParOnline's offsets", func() bool {
		cp := progress("ParClone2")
		return len(cp.Queues) == 4 && cp.DiffTotal == 0
	})
}
