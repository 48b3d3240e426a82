package namesrv

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/raftmq/raftmq/wire"
)

// fakeClock is a settable clock for expiry tests.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// fakeChannel records Close calls.
type fakeChannel struct {
	name   string
	closed bool
}

func (f *fakeChannel) Close() error { f.closed = true; return nil }
func (f *fakeChannel) Closed() bool { return f.closed }

func topics(counter int64, tcs ...wire.TopicConfig) wire.TopicConfigSerializeWrapper {
	w := wire.TopicConfigSerializeWrapper{TopicConfigTable: map[string]wire.TopicConfig{}, DataVersion: wire.DataVersion{Timestamp: 1000, Counter: counter}}
	for _, tc := range tcs {
		w.TopicConfigTable[tc.TopicName] = tc
	}
	return w
}

func tc(name string, r, w, perm int) wire.TopicConfig {
	return wire.TopicConfig{TopicName: name, ReadQueueNums: r, WriteQueueNums: w, Perm: perm, TopicFilterType: "SINGLE_TAG"}
}

func reg(cluster, name string, id int64, addr string, t wire.TopicConfigSerializeWrapper) RegisterBrokerArgs {
	return RegisterBrokerArgs{Cluster: cluster, BrokerName: name, BrokerID: id, BrokerAddr: addr,
		HAServerAddr: addr + "-ha", Topics: t}
}

// routeStep is one operation against the tables; check inspects the result.
type routeStep struct {
	do    func(t *testing.T, r *RouteInfoManager, clk *fakeClock)
	check func(t *testing.T, r *RouteInfoManager)
}

func mustRegister(a RegisterBrokerArgs) func(*testing.T, *RouteInfoManager, *fakeClock) {
	return func(t *testing.T, r *RouteInfoManager, _ *fakeClock) {
		t.Helper()
		if _, err := r.RegisterBroker(a); err != nil {
			t.Fatalf("register %s/%d: %v", a.BrokerName, a.BrokerID, err)
		}
	}
}

func wantQueues(topic string, want ...wire.QueueData) func(*testing.T, *RouteInfoManager) {
	return func(t *testing.T, r *RouteInfoManager) {
		t.Helper()
		rd := r.PickupTopicRouteData(topic)
		if len(want) == 0 {
			if rd != nil {
				t.Fatalf("topic %s: want no route, got %+v", topic, rd)
			}
			return
		}
		if rd == nil {
			t.Fatalf("topic %s: no route", topic)
		}
		if !reflect.DeepEqual(rd.QueueDatas, want) {
			t.Fatalf("topic %s queue data:\n got %+v\nwant %+v", topic, rd.QueueDatas, want)
		}
	}
}

func wantAddrs(brokerName string, want map[int64]string) func(*testing.T, *RouteInfoManager) {
	return func(t *testing.T, r *RouteInfoManager) {
		t.Helper()
		got := r.ClusterInfo().BrokerAddrTable[brokerName].BrokerAddrs
		if len(want) == 0 && len(got) == 0 {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("broker %s addrs: got %v want %v", brokerName, got, want)
		}
	}
}

func TestRouteInfoManager(t *testing.T) {
	const c1 = "DefaultCluster"
	qd := func(name string, r, w, perm int) wire.QueueData {
		return wire.QueueData{BrokerName: name, ReadQueueNums: r, WriteQueueNums: w, Perm: perm}
	}
	tests := []struct {
		name  string
		steps []routeStep
	}{
		{
			name: "register master and slave",
			steps: []routeStep{
				{do: mustRegister(reg(c1, "b1", 0, "127.0.0.1:10911", topics(1, tc("T", 8, 4, 6))))},
				{do: func(t *testing.T, r *RouteInfoManager, _ *fakeClock) {
					// The slave reports different queue numbers: a slave never
					// changes queue data.
					res, err := r.RegisterBroker(reg(c1, "b1", 1, "127.0.0.1:10921", topics(1, tc("T", 1, 1, 6), tc("S", 1, 1, 6))))
					if err != nil {
						t.Fatalf("slave registration: %v", err)
					}
					if res.MasterAddr != "127.0.0.1:10911" || res.HAServerAddr != "127.0.0.1:10911-ha" {
						t.Fatalf("slave result %+v", res)
					}
				}},
				{check: wantQueues("T", qd("b1", 8, 4, 6))},
				{check: wantQueues("S")},
				{check: wantAddrs("b1", map[int64]string{0: "127.0.0.1:10911", 1: "127.0.0.1:10921"})},
				{check: func(t *testing.T, r *RouteInfoManager) {
					ci := r.ClusterInfo()
					if !reflect.DeepEqual(ci.ClusterAddrTable, map[string][]string{c1: {"b1"}}) {
						t.Fatalf("cluster table %v", ci.ClusterAddrTable)
					}
					rd := r.PickupTopicRouteData("T")
					if len(rd.BrokerDatas) != 1 || rd.BrokerDatas[0].Cluster != c1 {
						t.Fatalf("broker datas %+v", rd.BrokerDatas)
					}
				}},
			},
		},
		{
			name: "data version change updates queues, same version does not",
			steps: []routeStep{
				{do: mustRegister(reg(c1, "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6))))},
				{do: func(t *testing.T, r *RouteInfoManager, _ *fakeClock) {
					// Someone wipes write perm; a re-registration with the same
					// version (a periodic heartbeat) must not undo it.
					if n := r.WipeWritePermOfBroker("b1"); n != 1 {
						t.Fatalf("wiped %d topics", n)
					}
				}},
				{do: mustRegister(reg(c1, "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6))))},
				{check: wantQueues("T", qd("b1", 4, 4, 4))},
				// A new version rebuilds the queue data; the wipe stays until
				// addWritePerm.
				{do: mustRegister(reg(c1, "b1", 0, "a:1", topics(2, tc("T", 16, 16, 6))))},
				{check: wantQueues("T", qd("b1", 16, 16, 4))},
				{do: func(t *testing.T, r *RouteInfoManager, _ *fakeClock) { r.AddWritePermOfBroker("b1") }},
				{do: mustRegister(reg(c1, "b1", 0, "a:1", topics(3, tc("T", 16, 16, 6))))},
				{check: wantQueues("T", qd("b1", 16, 16, 6))},
				{check: func(t *testing.T, r *RouteInfoManager) {
					if r.IsBrokerTopicConfigChanged(c1, "a:1", wire.DataVersion{Timestamp: 1000, Counter: 3}) {
						t.Fatal("same version reported as changed")
					}
					if !r.IsBrokerTopicConfigChanged(c1, "a:1", wire.DataVersion{Timestamp: 1000, Counter: 4}) {
						t.Fatal("new version not reported as changed")
					}
				}},
			},
		},
		{
			name: "unregister slave keeps group, unregister master drops topic",
			steps: []routeStep{
				{do: mustRegister(reg(c1, "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6))))},
				{do: mustRegister(reg(c1, "b1", 1, "a:2", topics(1, tc("T", 4, 4, 6))))},
				{do: func(t *testing.T, r *RouteInfoManager, _ *fakeClock) {
					r.UnregisterBrokers([]wire.UnregisterBrokerRequestHeader{{Cluster: c1, BrokerAddr: "a:2", BrokerName: "b1", BrokerID: 1}})
				}},
				{check: wantAddrs("b1", map[int64]string{0: "a:1"})},
				{check: wantQueues("T", qd("b1", 4, 4, 6))},
				{do: func(t *testing.T, r *RouteInfoManager, _ *fakeClock) {
					r.UnregisterBrokers([]wire.UnregisterBrokerRequestHeader{{Cluster: c1, BrokerAddr: "a:1", BrokerName: "b1", BrokerID: 0}})
				}},
				{check: wantQueues("T")},
				{check: func(t *testing.T, r *RouteInfoManager) {
					ci := r.ClusterInfo()
					if len(ci.BrokerAddrTable) != 0 || len(ci.ClusterAddrTable) != 0 || len(r.AllTopics()) != 0 {
						t.Fatalf("tables not empty: %+v topics %v", ci, r.AllTopics())
					}
				}},
			},
		},
		{
			name: "two groups: wipe and add write perm touch one",
			steps: []routeStep{
				{do: mustRegister(reg(c1, "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6), tc("U", 2, 2, 6))))},
				{do: mustRegister(reg(c1, "b2", 0, "a:2", topics(1, tc("T", 4, 4, 6))))},
				{do: func(t *testing.T, r *RouteInfoManager, _ *fakeClock) {
					if n := r.WipeWritePermOfBroker("b1"); n != 2 {
						t.Fatalf("wipe count %d, want 2", n)
					}
				}},
				{check: wantQueues("T", qd("b1", 4, 4, 4), qd("b2", 4, 4, 6))},
				{do: func(t *testing.T, r *RouteInfoManager, _ *fakeClock) {
					if n := r.AddWritePermOfBroker("b1"); n != 2 {
						t.Fatalf("add count %d, want 2", n)
					}
					if n := r.WipeWritePermOfBroker("nobody"); n != 0 {
						t.Fatalf("unknown broker wipe count %d", n)
					}
				}},
				{check: wantQueues("T", qd("b1", 4, 4, 6), qd("b2", 4, 4, 6))},
			},
		},
		{
			name: "delete topic globally and per cluster",
			steps: []routeStep{
				{do: mustRegister(reg("c1", "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6), tc("U", 4, 4, 6))))},
				{do: mustRegister(reg("c2", "b2", 0, "a:2", topics(1, tc("T", 4, 4, 6))))},
				{do: func(t *testing.T, r *RouteInfoManager, _ *fakeClock) { r.DeleteTopic("T", "c1") }},
				{check: wantQueues("T", qd("b2", 4, 4, 6))},
				{check: func(t *testing.T, r *RouteInfoManager) {
					if got := r.TopicsByCluster("c1"); !reflect.DeepEqual(got, []string{"U"}) {
						t.Fatalf("topics of c1: %v", got)
					}
					if got := r.TopicsByCluster("nope"); len(got) != 0 {
						t.Fatalf("topics of unknown cluster: %v", got)
					}
				}},
				{do: func(t *testing.T, r *RouteInfoManager, _ *fakeClock) { r.DeleteTopic("U", "") }},
				{check: wantQueues("U")},
				{check: func(t *testing.T, r *RouteInfoManager) {
					if got := r.AllTopics(); !reflect.DeepEqual(got, []string{"T"}) {
						t.Fatalf("all topics %v", got)
					}
				}},
			},
		},
		{
			name: "slave promoted to master takes id 0 and frees its old id",
			steps: []routeStep{
				{do: mustRegister(reg(c1, "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6))))},
				{do: mustRegister(reg(c1, "b1", 1, "a:2", topics(1, tc("T", 4, 4, 6))))},
				{do: func(t *testing.T, r *RouteInfoManager, _ *fakeClock) {
					if !r.RemoveBroker(c1, "b1", 0) {
						t.Fatal("RemoveBroker found nothing")
					}
					if r.RemoveBroker(c1, "b1", 0) {
						t.Fatal("second RemoveBroker found something")
					}
				}},
				{do: mustRegister(reg(c1, "b1", 0, "a:2", topics(5, tc("T", 8, 8, 6))))},
				{check: wantAddrs("b1", map[int64]string{0: "a:2"})},
				{check: wantQueues("T", qd("b1", 8, 8, 6))},
			},
		},
		{
			name: "expiry removes only the silent broker and closes its channel",
			steps: []routeStep{
				{do: func(t *testing.T, r *RouteInfoManager, clk *fakeClock) {
					a := reg(c1, "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6)))
					a.Channel = &fakeChannel{name: "b1"}
					mustRegister(a)(t, r, clk)
					b := reg(c1, "b2", 0, "a:2", topics(1, tc("T", 4, 4, 6)))
					b.HeartbeatTimeout = time.Hour
					mustRegister(b)(t, r, clk)
					clk.advance(90 * time.Second)
					if !r.UpdateBrokerInfoUpdateTimestamp(c1, "a:1") {
						t.Fatal("heartbeat of a:1 not applied")
					}
					if r.UpdateBrokerInfoUpdateTimestamp(c1, "a:9") {
						t.Fatal("heartbeat of unknown broker applied")
					}
					clk.advance(90 * time.Second)
					if ch := r.ScanNotActiveBrokers(); len(ch) != 0 {
						t.Fatalf("expired too early: %v", ch)
					}
					clk.advance(31 * time.Second)
					ch := r.ScanNotActiveBrokers()
					if len(ch) != 1 || ch[0].(*fakeChannel).name != "b1" {
						t.Fatalf("expired channels %v", ch)
					}
				}},
				{check: wantQueues("T", qd("b2", 4, 4, 6))},
			},
		},
		{
			name: "stale registration for a taken id is ignored",
			steps: []routeStep{
				{do: func(t *testing.T, r *RouteInfoManager, clk *fakeClock) {
					newer := reg(c1, "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6)))
					newer.Topics.DataVersion.StateVersion = 7
					mustRegister(newer)(t, r, clk)
					stale := reg(c1, "b1", 0, "a:2", topics(1, tc("T", 1, 1, 6)))
					stale.Topics.DataVersion.StateVersion = 3
					if _, err := r.RegisterBroker(stale); !errors.Is(err, ErrRegistrationIgnored) {
						t.Fatalf("stale registration: %v, want ErrRegistrationIgnored", err)
					}
				}},
				{check: wantAddrs("b1", map[int64]string{0: "a:1"})},
				{check: wantQueues("T", qd("b1", 4, 4, 6))},
			},
		},
		{
			// A deposed leader (term 6) must not take brokerId 0 back
			// when the newer leader's (term 7) entry is gone before the
			// next leader registers; the term is remembered until the
			// newer leader's entry would have expired, then forgotten, so
			// a group restarted from wiped data (terms from 1) is routed.
			name: "deposed master stays out after the newer master's entry goes",
			steps: []routeStep{
				{do: func(t *testing.T, r *RouteInfoManager, clk *fakeClock) {
					newer := reg(c1, "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6)))
					newer.Topics.DataVersion.StateVersion = 7
					mustRegister(newer)(t, r, clk)
					follower := reg(c1, "b1", 1, "a:2", topics(1, tc("T", 4, 4, 6)))
					follower.Topics.DataVersion.StateVersion = 100
					mustRegister(follower)(t, r, clk)
					if !r.RemoveBroker(c1, "b1", 0) { // gossip declared the leader dead
						t.Fatal("leader not removed")
					}
					clk.advance(30 * time.Second)
					r.ScanNotActiveBrokers()
					deposed := reg(c1, "b1", 0, "a:2", topics(1, tc("T", 4, 4, 6)))
					deposed.Topics.DataVersion.StateVersion = 6
					if _, err := r.RegisterBroker(deposed); !errors.Is(err, ErrRegistrationIgnored) {
						t.Fatalf("deposed leader's registration: %v, want ErrRegistrationIgnored", err)
					}
				}},
				{check: wantAddrs("b1", map[int64]string{1: "a:2"})},
				{do: func(t *testing.T, r *RouteInfoManager, clk *fakeClock) {
					next := reg(c1, "b1", 0, "a:3", topics(1, tc("T", 4, 4, 6)))
					next.Topics.DataVersion.StateVersion = 8
					mustRegister(next)(t, r, clk)
				}},
				{check: wantAddrs("b1", map[int64]string{0: "a:3", 1: "a:2"})},
				{do: func(t *testing.T, r *RouteInfoManager, clk *fakeClock) {
					// The whole group stops; it comes back wiped.
					r.UnregisterBrokers([]wire.UnregisterBrokerRequestHeader{
						{Cluster: c1, BrokerName: "b1", BrokerAddr: "a:3", BrokerID: 0},
						{Cluster: c1, BrokerName: "b1", BrokerAddr: "a:2", BrokerID: 1}})
					wiped := reg(c1, "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6)))
					wiped.Topics.DataVersion.StateVersion = 1
					if _, err := r.RegisterBroker(wiped); !errors.Is(err, ErrRegistrationIgnored) {
						t.Fatalf("term 1 within term 8's expiry: %v, want ErrRegistrationIgnored", err)
					}
					clk.advance(121 * time.Second)
					r.ScanNotActiveBrokers()
					if len(r.masterTerms) != 0 {
						t.Fatalf("master terms kept past their expiry: %v", r.masterTerms)
					}
					mustRegister(wiped)(t, r, clk)
				}},
				{check: wantAddrs("b1", map[int64]string{0: "a:1"})},
			},
		},
		{
			// The removal of a closed connection's brokers is queued; a
			// broker that registered again over a new connection before
			// it is applied keeps that registration.
			name: "channel close spares a registration made since over another connection",
			steps: []routeStep{
				{do: func(t *testing.T, r *RouteInfoManager, clk *fakeClock) {
					old, fresh := &fakeChannel{name: "old"}, &fakeChannel{name: "new"}
					a := reg(c1, "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6)))
					a.Channel = old
					mustRegister(a)(t, r, clk)
					queued := r.UnregisterRequestsForChannel(old)
					a.Channel = fresh
					mustRegister(a)(t, r, clk)
					var batch []unregistration
					for _, q := range queued {
						batch = append(batch, unregistration{req: q, via: old})
					}
					r.unregister(batch)
				}},
				{check: wantAddrs("b1", map[int64]string{0: "a:1"})},
				{check: wantQueues("T", qd("b1", 4, 4, 6))},
			},
		},
		{
			// A registration read from a connection just before it closed
			// can be processed after the broker registered again over a
			// new one: it must not bind the broker back to the closed
			// connection, whose queued removal would then drop it.
			name: "stale registration from a closed connection keeps the broker on its new one",
			steps: []routeStep{
				{do: func(t *testing.T, r *RouteInfoManager, clk *fakeClock) {
					old, fresh := &fakeChannel{name: "old"}, &fakeChannel{name: "new"}
					a := reg(c1, "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6)))
					a.Channel = old
					mustRegister(a)(t, r, clk)
					batch := closeChannel(r, old)
					b := reg(c1, "b1", 0, "a:1", topics(2, tc("T", 8, 8, 6)))
					b.Channel = fresh
					mustRegister(b)(t, r, clk)
					if _, err := r.RegisterBroker(a); !errors.Is(err, ErrRegistrationIgnored) {
						t.Errorf("registration from the closed connection: %v, want ErrRegistrationIgnored", err)
					}
					r.unregister(batch)
					if got := r.UnregisterRequestsForChannel(old); len(got) != 0 {
						t.Errorf("broker bound to the closed connection: %+v", got)
					}
					if got := r.UnregisterRequestsForChannel(fresh); len(got) != 1 {
						t.Errorf("broker not bound to the new connection: %+v", got)
					}
				}},
				{check: wantAddrs("b1", map[int64]string{0: "a:1"})},
				{check: wantQueues("T", qd("b1", 8, 8, 6))},
			},
		},
		{
			// A broker shutting down with a registration in flight: its
			// connection's close removes it, and only then is that
			// registration processed. It must not route the broker again,
			// bound to a connection whose close has been handled, until
			// it expires.
			name: "registration from a closed connection after its removal routes nothing",
			steps: []routeStep{
				{do: func(t *testing.T, r *RouteInfoManager, clk *fakeClock) {
					gone, live := &fakeChannel{name: "gone"}, &fakeChannel{name: "live"}
					a := reg(c1, "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6)))
					a.Channel = gone
					mustRegister(a)(t, r, clk)
					s := reg(c1, "b1", 2, "a:2", topics(1, tc("T", 4, 4, 6)))
					s.Channel = live
					mustRegister(s)(t, r, clk)
					batch := closeChannel(r, gone)
					r.unregister(batch)
					late := reg(c1, "b1", 1, "a:1", topics(1, tc("T", 4, 4, 6)))
					late.Channel = gone
					if _, err := r.RegisterBroker(late); !errors.Is(err, ErrRegistrationIgnored) {
						t.Errorf("registration from the closed connection after its removal: %v, want ErrRegistrationIgnored", err)
					}
				}},
				{check: wantAddrs("b1", map[int64]string{2: "a:2"})},
				{do: func(t *testing.T, r *RouteInfoManager, clk *fakeClock) {
					// Nor is a:1 live, waiting for the expiry scan.
					clk.advance(time.Hour)
					mustRegister(reg(c1, "b1", 2, "a:2", topics(1, tc("T", 4, 4, 6))))(t, r, clk)
					if chans := r.ScanNotActiveBrokers(); len(chans) != 0 {
						t.Errorf("the expiry scan found the late registration live: %v", chans)
					}
				}},
			},
		},
		{
			name: "channel close finds the broker registered through it",
			steps: []routeStep{
				{do: func(t *testing.T, r *RouteInfoManager, clk *fakeClock) {
					ch := &fakeChannel{name: "x"}
					a := reg(c1, "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6), tc("U", 1, 1, 6)))
					a.Channel = ch
					mustRegister(a)(t, r, clk)
					mustRegister(reg(c1, "b1", 1, "a:2", topics(1)))(t, r, clk)
					reqs := r.UnregisterRequestsForChannel(ch)
					want := []wire.UnregisterBrokerRequestHeader{{Cluster: c1, BrokerAddr: "a:1", BrokerName: "b1", BrokerID: 0}}
					if !reflect.DeepEqual(reqs, want) {
						t.Fatalf("requests %+v", reqs)
					}
					if got := r.UnregisterRequestsForChannel(&fakeChannel{}); len(got) != 0 {
						t.Fatalf("other channel %+v", got)
					}
					r.UnregisterBrokers(reqs)
				}},
				{check: wantAddrs("b1", map[int64]string{1: "a:2"})},
				// The group still exists (slave), so its queue data stays.
				{check: wantQueues("T", qd("b1", 4, 4, 6))},
			},
		},
		{
			name: "register topic needs known brokers",
			steps: []routeStep{
				{do: mustRegister(reg(c1, "b1", 0, "a:1", topics(1, tc("T", 4, 4, 6), tc("U", 1, 1, 6))))},
				{do: func(t *testing.T, r *RouteInfoManager, _ *fakeClock) {
					if r.RegisterTopic("V", []wire.QueueData{{BrokerName: "b1", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}, {BrokerName: "zz"}}) {
						t.Fatal("registered with unknown broker")
					}
					if !r.RegisterTopic("V", []wire.QueueData{{BrokerName: "b1", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}}) {
						t.Fatal("register topic failed")
					}
				}},
				{check: wantQueues("V", qd("b1", 2, 2, 6))},
				// A group whose write permission is wiped gets read-only
				// queue data from REGISTER_TOPIC_IN_NAMESRV too.
				{do: func(t *testing.T, r *RouteInfoManager, _ *fakeClock) {
					r.WipeWritePermOfBroker("b1")
					r.RegisterTopic("W", []wire.QueueData{{BrokerName: "b1", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}})
				}},
				{check: wantQueues("W", qd("b1", 2, 2, 4))},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
			r := NewRouteInfoManager(120*time.Second, nil, WithClock(clk.now))
			for _, s := range tt.steps {
				if s.do != nil {
					s.do(t, r, clk)
				}
				if s.check != nil {
					s.check(t, r)
				}
			}
		})
	}
}

// closeChannel closes ch and returns the removals its close queues (what
// was bound to it when the close is seen), for the test to run when it
// wants: a request worker may process a registration in between.
func closeChannel(r *RouteInfoManager, ch *fakeChannel) []unregistration {
	_ = ch.Close()
	var batch []unregistration
	for _, q := range r.UnregisterRequestsForChannel(ch) {
		batch = append(batch, unregistration{req: q, via: ch})
	}
	return batch
}
