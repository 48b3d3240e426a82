package broker

import (
	"sort"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/remoting"
)

// TestRuntimeConfigKeysExist: every whitelisted key is a BrokerConfig key.
func TestRuntimeConfigKeysExist(t *testing.T) {
	keys, err := config.Keys(&BrokerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range RuntimeConfigKeys {
		if i := sort.SearchStrings(keys, k); i == len(keys) || keys[i] != k {
			t.Errorf("runtime key %q is not a BrokerConfig key", k)
		}
	}
}

// TestUpdateBrokerConfig: UPDATE_BROKER_CONFIG (25) changes whitelisted
// keys at once (auto-create off → unknown topics refused; a lower
// maxMessageSize → bigger bodies refused), GET_BROKER_CONFIG shows the
// change, and any other key is refused with INVALID_PARAMETER naming it.
func TestUpdateBrokerConfig(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	update := func(body string) *remoting.RemotingCommand {
		return tc.call(addr, remoting.RequestUpdateBrokerConfig, nil, []byte(body))
	}
	if r := tc.call(addr, remoting.RequestSendMessage, sendExt("AUTO1", 0, ""), []byte("x")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("auto-create on: %d %s", r.Code, r.Remark)
	}
	if r := update("autoCreateTopicEnable=false\nmaxMessageSize=1000\n"); r.Code != remoting.ResponseSuccess {
		t.Fatalf("update: %d %s", r.Code, r.Remark)
	}
	if r := tc.call(addr, remoting.RequestSendMessage, sendExt("AUTO2", 0, ""), []byte("x")); r.Code != remoting.ResponseTopicNotExist {
		t.Fatalf("auto-create off: %d %s", r.Code, r.Remark)
	}
	if r := tc.call(addr, remoting.RequestSendMessage, sendExt("AUTO1", 0, ""), make([]byte, 1001)); r.Code != remoting.ResponseMessageIllegal {
		t.Fatalf("1001-byte body after maxMessageSize=1000: %d %s", r.Code, r.Remark)
	}
	g := tc.call(addr, remoting.RequestGetBrokerConfig, nil, nil)
	if !strings.Contains(string(g.Body), "autoCreateTopicEnable=false") || !strings.Contains(string(g.Body), "maxMessageSize=1000") {
		t.Fatalf("GET_BROKER_CONFIG does not show the change:\n%s", g.Body)
	}

	cases := []struct{ body, remark string }{
		{"listenPort=1\nautoCreateTopicEnable=true", "listenPort cannot change at runtime"},
		{"noSuchKey=1", "noSuchKey"},
		{"maxMessageSize=99999999", "maxMessageSize"},
		{"defaultTopicQueueNums=abc", "defaultTopicQueueNums"},
		{"", "no key given"},
	}
	for _, c := range cases {
		r := update(c.body)
		if r.Code != remoting.ResponseInvalidParameter || !strings.Contains(r.Remark, c.remark) {
			t.Errorf("update %q: %d %q; want INVALID_PARAMETER naming %q", c.body, r.Code, r.Remark, c.remark)
		}
	}
	// A refused update changed nothing.
	if r := tc.call(addr, remoting.RequestSendMessage, sendExt("AUTO3", 0, ""), []byte("x")); r.Code != remoting.ResponseTopicNotExist {
		t.Fatalf("refused update leaked autoCreateTopicEnable=true: %d %s", r.Code, r.Remark)
	}
}
