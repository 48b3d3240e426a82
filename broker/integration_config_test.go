package broker

import (
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/internal/testutil"
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

// TestUpdateBrokerConfigNamesDownMember: a member that is down when
// UPDATE_BROKER_CONFIG is sent is no longer registered with the name
// server (its connection closed), so forwarding to the registered members
// alone cannot reach it. The change then applied on part of the group
// only, and the answer must say so, naming the member, so that the
// operator repeats it once the member is back.
func TestUpdateBrokerConfigNamesDownMember(t *testing.T) {
	pc := startRealCluster(t, nil)
	l := pc.leader()
	down := (l + 1) % 3
	downID := pc.cfgs[down].Raft.DLegerSelfID
	pc.stopNode(down)
	testutil.WaitFor(t, 10*time.Second, "the name server drops the stopped member", func() bool {
		return len(pc.ns.Routes().ClusterInfo().BrokerAddrTable[pc.cfgs[l].BrokerName].BrokerAddrs) == 2
	})
	r := pc.call(pc.nodes[l].Addr(), remoting.RequestUpdateBrokerConfig, nil, []byte("maxReconsumeTimes=5\n"))
	if r.Code == remoting.ResponseSuccess || !strings.Contains(r.Remark, downID) {
		t.Fatalf("update with member %s down: code %d %q; want a failure naming %s", downID, r.Code, r.Remark, downID)
	}
	// The members that were up have it.
	for i, n := range pc.nodes {
		if n == nil {
			continue
		}
		g := pc.call(n.Addr(), remoting.RequestGetBrokerConfig, nil, nil)
		if !strings.Contains(string(g.Body), "maxReconsumeTimes=5\n") {
			t.Fatalf("member %d lacks the change", i)
		}
	}
}

// TestUnappliedCountsAnonymousAnswers: during a rolling upgrade a member of
// the older build applies a forwarded change without naming itself; it
// covers one missing id, never more.
func TestUnappliedCountsAnonymousAnswers(t *testing.T) {
	ids := []string{"n0", "n1", "n2"}
	for _, c := range []struct {
		applied   []string
		anonymous int
		want      []string
	}{
		{[]string{"n1", "n2"}, 0, nil},
		{[]string{"n1"}, 0, []string{"n2"}},
		{[]string{"n1"}, 1, nil},
		{nil, 1, []string{"n1", "n2"}},
		{nil, 2, nil},
	} {
		applied := map[string]bool{}
		for _, id := range c.applied {
			applied[id] = true
		}
		if got := unapplied(ids, "n0", applied, c.anonymous); !slices.Equal(got, c.want) {
			t.Errorf("applied %v, %d anonymous: unapplied %v, want %v", c.applied, c.anonymous, got, c.want)
		}
	}
}
