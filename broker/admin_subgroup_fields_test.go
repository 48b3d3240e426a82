package broker

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
)

// TestUpdateSubGroupUnsupportedFields: RocketMQ 5's updateSubGroup
// (--attributes, -p groupRetryPolicy) and the dashboard send a
// SubscriptionGroupConfig body with fields raftmq has nothing behind.
// RocketMQ itself refuses every group attribute (its
// SubscriptionGroupAttributes table is empty); a retry policy other than
// the default applies to the proxy's gRPC clients, which raftmq does not
// serve. Either is refused, naming the field, and the group is not
// created; the defaults the Java tools always send are accepted.
func TestUpdateSubGroupUnsupportedFields(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	for _, c := range []struct{ body, want string }{
		{`{"groupName":"SGA","attributes":{"+x":"y"}}`, "+x"},
		{`{"groupName":"SGP","groupRetryPolicy":{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":60000,"multiplier":2}}}`, "groupRetryPolicy"},
		{`{"groupName":"SGC","groupRetryPolicy":{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,2000]}}}`, "groupRetryPolicy"},
	} {
		r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(c.body))
		if r.Code == remoting.ResponseSuccess || !strings.Contains(r.Remark, c.want) {
			t.Errorf("update with %s: %d %q; want a refusal naming %s", c.body, r.Code, r.Remark, c.want)
		}
		name := c.body[len(`{"groupName":"`):][:3]
		if g := tc.call(addr, remoting.RequestGetSubscriptionGroupConfig, map[string]string{"group": name}, nil); g.Code == remoting.ResponseSuccess {
			t.Errorf("refused update of %s created it: %s", name, g.Body)
		}
	}
	def := `{"groupName":"SGD","consumeEnable":true,"groupRetryPolicy":{"type":"CUSTOMIZED"},"attributes":{},"consumeTimeoutMinute":15,"subscriptionDataSet":null}`
	if r := tc.call(addr, remoting.RequestUpdateAndCreateSubscriptionGroup, nil, []byte(def)); r.Code != remoting.ResponseSuccess {
		t.Fatalf("update with the Java tools' defaults: %d %s", r.Code, r.Remark)
	}
}
