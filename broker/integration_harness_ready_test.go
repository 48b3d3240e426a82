package broker

import (
	"testing"

	"github.com/raftmq/raftmq/wire"
)

// TestHarnessGroupRoutedNeedsMaster: the start-up wait of the test
// clusters reports the group routed only when the route a client's first
// send reads serves it: a leader that lost its lease right after the
// election and registered again as a follower leaves every member
// registered but none as brokerId 0, and an official producer's first
// send to a new topic then fails with "route info not found".
func TestHarnessGroupRoutedNeedsMaster(t *testing.T) {
	const name, a0, a1, a2 = "broker-a", "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"
	bd := func(addrs map[int64]string) *wire.ClusterInfo {
		return &wire.ClusterInfo{BrokerAddrTable: map[string]wire.BrokerData{
			name: {Cluster: "DefaultCluster", BrokerName: name, BrokerAddrs: addrs}}}
	}
	tbw := func(ci *wire.ClusterInfo, perm int) *wire.TopicRouteData {
		return &wire.TopicRouteData{
			QueueDatas:  []wire.QueueData{{BrokerName: name, ReadQueueNums: 8, WriteQueueNums: 8, Perm: perm}},
			BrokerDatas: []wire.BrokerData{ci.BrokerAddrTable[name]}}
	}
	rw := wire.PermRead | wire.PermWrite | wire.PermInherit
	routed := bd(map[int64]string{0: a0, 2: a1, 3: a2})
	deposed := bd(map[int64]string{1: a0, 2: a1, 3: a2})
	for _, c := range []struct {
		what       string
		ci         *wire.ClusterInfo
		tbw        *wire.TopicRouteData
		autoCreate bool
		leader     string
		want       bool
	}{
		{"leader routed as master, every member, TBW102 writable", routed, tbw(routed, rw), true, a0, true},
		{"leader routed as master, auto-create off", routed, nil, false, a0, true},
		{"deposed leader registered as a follower, no leader yet", deposed, tbw(deposed, rw), true, "", false},
		{"deposed leader registered as a follower, new leader not yet", deposed, tbw(deposed, rw), true, a1, false},
		{"brokerId 0 is a member that no longer leads", routed, tbw(routed, rw), true, a1, false},
		{"a member not registered yet", bd(map[int64]string{0: a0, 2: a1}), nil, false, a0, false},
		{"no TBW102 route with auto-create on", routed, nil, true, a0, false},
		{"TBW102 not writable", routed, tbw(routed, wire.PermRead), true, a0, false},
	} {
		if got := groupRouted(c.ci, c.tbw, name, c.leader, 3, c.autoCreate); got != c.want {
			t.Errorf("%s: groupRouted = %v, want %v", c.what, got, c.want)
		}
	}
}
