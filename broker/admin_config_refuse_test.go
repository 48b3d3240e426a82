package broker

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/remoting"
)

// TestUpdateBrokerConfigRefusalSaysWhy: UPDATE_BROKER_CONFIG refuses every
// key outside RuntimeConfigKeys, and the remark must send the operator the
// right way. A RocketMQ key raftmq has no setting for (brokerPermission,
// the usual way to make a RocketMQ broker read-only in an incident) says
// raftmq does not support it and what to use instead: "edit broker.conf
// and restart" would have them restart a broker that then refuses that
// broker.conf. A raftmq key fixed at start still says to edit and restart;
// a key no broker knows says so.
func TestUpdateBrokerConfigRefusalSaysWhy(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	for _, c := range []struct {
		body    string
		want    []string
		mustNot string
	}{
		{"brokerPermission=4", []string{"brokerPermission", "not supported by raftmq", "wipeWritePerm"}, "restart"},
		{"flushIntervalCommitLog=100", []string{"flushIntervalCommitLog", "not supported by raftmq", "Raft"}, "restart"},
		{"listenPort=1", []string{"listenPort", "edit broker.conf and restart"}, "not supported"},
		{"noSuchKeyAtAll=1", []string{"noSuchKeyAtAll", "unknown"}, "restart"},
	} {
		r := tc.call(addr, remoting.RequestUpdateBrokerConfig, nil, []byte(c.body+"\n"))
		if r.Code != remoting.ResponseInvalidParameter {
			t.Errorf("%s: %d %q; want INVALID_PARAMETER", c.body, r.Code, r.Remark)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.Remark, w) {
				t.Errorf("%s: remark %q lacks %q", c.body, r.Remark, w)
			}
		}
		if strings.Contains(r.Remark, c.mustNot) {
			t.Errorf("%s: remark %q says %q", c.body, r.Remark, c.mustNot)
		}
	}
}
