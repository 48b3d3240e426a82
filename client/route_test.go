package client

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// fakeNameServer answers GET_ROUTEINFO_BY_TOPIC with a fixed body.
func fakeNameServer(t *testing.T, body string, calls *atomic.Int32) string {
	t.Helper()
	srv := remoting.NewServer(remoting.ServerConfig{}, nil)
	srv.Register(remoting.RequestGetRouteInfoByTopic, func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		calls.Add(1)
		if req.ExtFields["topic"] != "T" {
			return remoting.NewResponse(remoting.ResponseTopicNotExist, "no route"), nil
		}
		resp := remoting.NewResponse(remoting.ResponseSuccess, "")
		resp.Body = []byte(body)
		return resp, nil
	}, 1, 16)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv.Addr().String()
}

func newTestRoutes(t *testing.T, nameServers ...string) *routeManager {
	rc := remoting.NewClient(remoting.ClientConfig{ConnectTimeout: time.Second}, nil)
	t.Cleanup(func() { _ = rc.Close() })
	return newRouteManager(rc, zap.NewNop(), nameServers, 2*time.Second, time.Now)
}

func TestRouteParsesLegacyAndStandardJSON(t *testing.T) {
	legacy := `{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"b","cluster":"C"}],` +
		`"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":2}]}`
	standard := `{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},"brokerName":"b","cluster":"C"}],` +
		`"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":2}]}`
	for name, body := range map[string]string{"legacy": legacy, "standard": standard} {
		var calls atomic.Int32
		r := newTestRoutes(t, fakeNameServer(t, body, &calls))
		info, err := r.publishInfo(context.Background(), "T", false, 4)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(info.Queues) != 2 || info.Queues[1] != (MessageQueue{"T", "b", 1}) {
			t.Fatalf("%s: queues %v", name, info.Queues)
		}
		if addr := r.brokerAddr("b"); addr != "127.0.0.1:10911" {
			t.Fatalf("%s: master %s", name, addr)
		}
		sub, err := r.subscribeInfo(context.Background(), "T")
		if err != nil || len(sub) != 4 {
			t.Fatalf("%s: subscribe queues %v %v", name, sub, err)
		}
		// Cached: no second lookup.
		if _, err := r.publishInfo(context.Background(), "T", false, 4); err != nil || calls.Load() != 1 {
			t.Fatalf("%s: %d lookups", name, calls.Load())
		}
	}
}

func TestRouteRotatesNameServers(t *testing.T) {
	dead := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	body := `{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:1"},"brokerName":"b","cluster":"C"}],"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":1,"writeQueueNums":1}]}`
	var calls atomic.Int32
	live := fakeNameServer(t, body, &calls)
	r := newTestRoutes(t, dead, live)
	if _, _, err := r.fetchRoute(context.Background(), "T"); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	idx := r.nsIndex
	r.mu.Unlock()
	if idx != 1 {
		t.Fatalf("name server index %d after the first one failed", idx)
	}
	// A topic the name server does not know is final, not a reason to rotate.
	if _, _, err := r.fetchRoute(context.Background(), "Other"); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("unknown topic: %v", err)
	}
	if calls.Load() != 2 {
		t.Fatalf("%d calls to the live name server", calls.Load())
	}
	r2 := newTestRoutes(t, dead)
	if _, _, err := r2.fetchRoute(context.Background(), "T"); !errors.Is(err, ErrNoNameServer) {
		t.Fatalf("all dead: %v", err)
	}
}

func TestRoutePeriodicRefresh(t *testing.T) {
	ns := startNameServer(t)
	a := startFakeBroker(t, "broker-a", &requestLog{})
	a.register(t, ns, 0, 1, map[string]int{"T": 2})
	p := newTestProducer(t, ns, RouteRefreshInterval(20*time.Millisecond))
	qs, err := p.PublishQueues(context.Background(), "T")
	if err != nil || len(qs) != 2 {
		t.Fatalf("%v %v", qs, err)
	}
	a.register(t, ns, 0, 2, map[string]int{"T": 5})
	testutil.WaitFor(t, 5*time.Second, "the refresh loop picks up 5 queues", func() bool {
		qs, err := p.PublishQueues(context.Background(), "T")
		return err == nil && len(qs) == 5
	})
	// With the name server gone the cached route keeps serving.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ns.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := p.routes.refresh(context.Background(), "T", true, 4)
	if err != nil || len(info.Queues) != 5 {
		t.Fatalf("after name server loss: %v %v", info, err)
	}
}

func TestPublishInfoFromRoute(t *testing.T) {
	rd := &wire.TopicRouteData{
		QueueDatas: []wire.QueueData{
			{BrokerName: "c", Perm: wire.PermRead | wire.PermWrite, ReadQueueNums: 2, WriteQueueNums: 2},
			{BrokerName: "a", Perm: wire.PermRead | wire.PermWrite, ReadQueueNums: 3, WriteQueueNums: 1},
			{BrokerName: "ro", Perm: wire.PermRead, ReadQueueNums: 2, WriteQueueNums: 2},
			{BrokerName: "nomaster", Perm: 6, ReadQueueNums: 1, WriteQueueNums: 1},
			{BrokerName: "gone", Perm: 6, ReadQueueNums: 1, WriteQueueNums: 1},
		},
		BrokerDatas: []wire.BrokerData{
			{BrokerName: "a", BrokerAddrs: map[int64]string{0: "A"}},
			{BrokerName: "c", BrokerAddrs: map[int64]string{0: "C", 1: "C1"}},
			{BrokerName: "ro", BrokerAddrs: map[int64]string{0: "R"}},
			{BrokerName: "nomaster", BrokerAddrs: map[int64]string{1: "N1"}},
		},
	}
	info := newPublishInfo("T", rd)
	want := []MessageQueue{{"T", "a", 0}, {"T", "c", 0}, {"T", "c", 1}}
	if fmt.Sprint(info.Queues) != fmt.Sprint(want) || info.OrderTopic {
		t.Fatalf("queues %v", info.Queues)
	}
	if sub := subscribeQueues("T", rd); len(sub) != 3+2+2+1+1 {
		t.Fatalf("subscribe %v", sub)
	}
	// Mid-election, when no group has a master, masterless groups stand in.
	only := &wire.TopicRouteData{QueueDatas: rd.QueueDatas[3:4], BrokerDatas: rd.BrokerDatas[3:4]}
	if q := newPublishInfo("T", only).Queues; len(q) != 1 || q[0].BrokerName != "nomaster" {
		t.Fatalf("masterless fallback %v", q)
	}
	// An orderTopicConf wins.
	rd.OrderTopicConf = "a:2;c:1;bad"
	info = newPublishInfo("T", rd)
	if fmt.Sprint(info.Queues) != fmt.Sprint([]MessageQueue{{"T", "a", 0}, {"T", "a", 1}, {"T", "c", 0}}) || !info.OrderTopic {
		t.Fatalf("order conf queues %v", info.Queues)
	}
	// Rotation visits every queue once per round; filters skip.
	seen := map[MessageQueue]int{}
	for i := 0; i < 6; i++ {
		mq, _ := info.selectQueue()
		seen[mq]++
	}
	if len(seen) != 3 || seen[MessageQueue{"T", "a", 0}] != 2 {
		t.Fatalf("rotation %v", seen)
	}
	if _, ok := info.selectQueue(func(MessageQueue) bool { return false }); ok {
		t.Fatal("a filter rejecting everything selected a queue")
	}
}

func TestBrokerAddrChoice(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRouteManager(nil, zap.NewNop(), []string{"x:1"}, time.Second, func() time.Time { return now })
	rd := &wire.TopicRouteData{
		QueueDatas:  []wire.QueueData{{BrokerName: "g", Perm: 6, ReadQueueNums: 1, WriteQueueNums: 1}},
		BrokerDatas: []wire.BrokerData{{BrokerName: "g", BrokerAddrs: map[int64]string{0: "m", 1: "f1", 2: "f2"}}},
	}
	r.storeFresh("T", rd)
	if a := r.brokerAddr("g"); a != "m" {
		t.Fatal(a)
	}
	r.markDown("g", "m", r.downFor)
	if a := r.brokerAddr("g"); a != "f1" {
		t.Fatalf("master down: %s", a)
	}
	r.markDown("g", "f1", r.downFor)
	if a := r.brokerAddr("g"); a != "f2" {
		t.Fatalf("master and f1 down: %s", a)
	}
	r.markDown("g", "f2", noLeaderBackoff)
	if a := r.brokerAddr("g"); a != "f2" {
		t.Fatalf("all down: %s, want the one back first", a)
	}
	now = now.Add(4 * time.Second) // down marks expire
	if a := r.brokerAddr("g"); a != "m" {
		t.Fatalf("after expiry: %s", a)
	}
	r.learnLeader("g", "m", "f2")
	if a := r.brokerAddr("g"); a != "f2" {
		t.Fatalf("learned leader: %s", a)
	}
	// The same route again (name server not updated): the learned leader stays.
	r.storeFresh("T", rd)
	if a := r.brokerAddr("g"); a != "f2" {
		t.Fatalf("stale route overrode the learned leader: %s", a)
	}
	// A leader change reported by the route lifts fault isolation.
	var changed []string
	r.onLeaderChange = func(name string) { changed = append(changed, name) }
	rd2 := cloneRoute(rd)
	rd2.BrokerDatas[0].BrokerAddrs = map[int64]string{0: "f2", 1: "f1"}
	r.storeFresh("T", rd2)
	if a := r.brokerAddr("g"); a != "f2" || len(changed) != 1 {
		t.Fatalf("route caught up: %s, changes %v", a, changed)
	}
	if r.brokerAddr("unknown") != "" {
		t.Fatal("unknown group has an address")
	}
}

// TestRouteNewMasterLiftsDownMark: a member whose connection failed (a
// killed process) restarts and wins an election. A route naming it master
// makes it the group's address at once, though its down mark (3 s) and
// the distrust of hints naming it (1 s) would still hold — unless that
// route may be stale: a leader that died is listed until the name server
// drops it, so it needs a route that named another master in between.
func TestRouteNewMasterLiftsDownMark(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRouteManager(nil, zap.NewNop(), []string{"x:1"}, time.Second, func() time.Time { return now })
	var moved []string
	r.onAddrChange = func(name string) { moved = append(moved, name) }
	route := func(addrs map[int64]string) {
		rd := &wire.TopicRouteData{
			QueueDatas:  []wire.QueueData{{BrokerName: "g", Perm: 6, ReadQueueNums: 1, WriteQueueNums: 1}},
			BrokerDatas: []wire.BrokerData{{BrokerName: "g", BrokerAddrs: addrs}},
		}
		r.storeFresh("T", rd)
	}
	want := func(step, addr string, distrusted ...string) {
		t.Helper()
		if a := r.brokerAddr("g"); a != addr {
			t.Fatalf("%s: brokerAddr %s, want %s", step, a, addr)
		}
		for _, d := range distrusted {
			if !r.distrusted("g", d) {
				t.Fatalf("%s: a hint naming %s is followed", step, d)
			}
		}
	}

	// A follower fails, restarts, and wins after the leader dies.
	route(map[int64]string{0: "a", 1: "b", 2: "c"})
	r.markDown("g", "b", r.downFor)
	r.markDown("g", "a", r.downFor)
	want("a and b failed", "c", "a", "b")
	route(map[int64]string{0: "a", 1: "c"}) // the same master: no news
	want("stale route", "c", "a")
	moved = nil
	route(map[int64]string{0: "b", 1: "c"})
	want("b named master", "b")
	if r.distrusted("g", "b") {
		t.Fatal("a hint naming the route's new master b is still ignored")
	}
	if !slices.Contains(moved, "g") {
		t.Fatal("no address change reported: parked long polls would stay")
	}

	// The leader b hands over to c, learned from a hint before any route
	// shows it; c dies and a is learned. A route fetched before the name
	// server dropped c names it (changed from the cached b, so it looks
	// new): c stays avoided and a stays followed.
	now = now.Add(10 * time.Second)
	r.markUp("g", "b")
	r.learnLeader("g", "b", "c")
	r.markDown("g", "c", r.downFor)
	r.markDown("g", "c", r.downFor) // a second call in flight fails too
	r.learnLeader("g", "b", "a")
	route(map[int64]string{0: "c", 1: "b", 2: "a"})
	want("stale master c", "a", "c")
	// A route that named another master first makes c's return news.
	route(map[int64]string{0: "a", 1: "b"})
	route(map[int64]string{0: "c", 1: "a", 2: "b"})
	want("c named master after a", "c")
}

// TestRouteRefutationEnds: a master a not-leader answer refuted is
// followed again once a route named another master since, also when the
// leader learned from that answer failed in between; and a hint naming the
// route's own master refutes nothing.
func TestRouteRefutationEnds(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRouteManager(nil, zap.NewNop(), []string{"x:1"}, time.Second, func() time.Time { return now })
	var moved int
	r.onAddrChange = func(string) { moved++ }
	route := func(addrs map[int64]string) {
		rd := &wire.TopicRouteData{
			QueueDatas:  []wire.QueueData{{BrokerName: "g", Perm: 6, ReadQueueNums: 1, WriteQueueNums: 1}},
			BrokerDatas: []wire.BrokerData{{BrokerName: "g", BrokerAddrs: addrs}},
		}
		r.storeFresh("T", rd)
	}
	want := func(step, addr string) {
		t.Helper()
		if a := r.brokerAddr("g"); a != addr {
			t.Fatalf("%s: brokerAddr %s, want %s", step, a, addr)
		}
	}

	route(map[int64]string{0: "a", 1: "b", 2: "c"})
	r.learnLeader("g", "a", "b") // a refuted, b learned
	r.markDown("g", "b", r.downFor)
	want("b failed, a refuted", "c")
	route(map[int64]string{0: "c", 1: "a", 2: "b"})
	want("c named master", "c")
	now = now.Add(4 * time.Second)
	moved = 0
	route(map[int64]string{0: "a", 1: "b", 2: "c"})
	want("a named master again after c", "a")
	if moved == 0 {
		t.Fatal("the refutation ended without an address change: parked long polls would stay")
	}

	// A follower names the route's master as the leader: nothing is
	// refuted, so once a's mark ends the route's master a is used again.
	r = newRouteManager(nil, zap.NewNop(), []string{"x:1"}, time.Second, func() time.Time { return now })
	route(map[int64]string{0: "a", 1: "b"})
	r.learnLeader("g", "b", "a")
	r.markDown("g", "a", r.downFor)
	want("a failed", "b")
	if !r.markedDown("g", "a") || r.markedDown("g", "b") {
		t.Fatal("markedDown does not match the marks")
	}
	now = now.Add(4 * time.Second)
	want("a's mark ended, no new route", "a")
	if r.markedDown("g", "a") {
		t.Fatal("a's ended mark still counts")
	}
}

// TestRouteSharedFetchOutlivesFirstCaller has a second caller join the
// route fetch of a first one whose context is then cancelled: the second,
// whose own context is alive, must still get the route, not the first
// caller's cancellation.
func TestRouteSharedFetchOutlivesFirstCaller(t *testing.T) {
	body := `{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:1"},"brokerName":"b","cluster":"C"}],"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":1,"writeQueueNums":1}]}`
	var calls atomic.Int32
	gate := make(chan struct{})
	srv := remoting.NewServer(remoting.ServerConfig{}, nil)
	srv.Register(remoting.RequestGetRouteInfoByTopic, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		if calls.Add(1) == 1 {
			<-gate
		}
		resp := remoting.NewResponse(remoting.ResponseSuccess, "")
		resp.Body = []byte(body)
		return resp, nil
	}, 2, 16)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	r := newTestRoutes(t, srv.Addr().String())

	ctx1, cancel1 := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, _, err := r.fetchRoute(ctx1, "T"); first <- err }()
	testutil.WaitFor(t, 5*time.Second, "first fetch at the name server", func() bool { return calls.Load() == 1 })
	second := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _, err := r.fetchRoute(ctx, "T")
		second <- err
	}()
	testutil.WaitFor(t, 5*time.Second, "second caller waits on the first's fetch", func() bool {
		return strings.Count(allStacks(), "(*routeManager).fetchRoute(") == 2
	})
	cancel1()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first fetch: %v", err)
	}
	close(gate)
	if err := <-second; err != nil {
		t.Fatalf("second fetch failed with the first caller's context: %v", err)
	}
}

// TestRouteForgetsOnlyGroupsNoRouteNames: a broker group is forgotten once
// no cached route names it at two successive rounds
// (MQClientInstance.cleanOfflineBroker, which forgets at the first), not
// while one topic's route still does though another's dropped it (a
// group leaving one topic), nor when a route names it again in between,
// and a failed lookup, which keeps the cached route, forgets nothing.
func TestRouteForgetsOnlyGroupsNoRouteNames(t *testing.T) {
	r := newTestRoutes(t, "127.0.0.1:1") // nothing listens: every lookup fails
	route := func(topic string, groups ...string) {
		rd := &wire.TopicRouteData{}
		for i, g := range groups {
			rd.BrokerDatas = append(rd.BrokerDatas, wire.BrokerData{Cluster: "C", BrokerName: g,
				BrokerAddrs: map[int64]string{wire.MasterID: fmt.Sprintf("127.0.0.1:%d", 2+i)}})
			rd.QueueDatas = append(rd.QueueDatas, wire.QueueData{BrokerName: g, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6})
		}
		r.storeFresh(topic, rd)
	}
	route("T1", "a", "b")
	route("T2", "a")
	route("T1", "b")
	if gone := r.forgetOffline(); len(gone) != 0 || r.brokerAddr("a") == "" {
		t.Fatalf("a, still in T2's route: forgot %v, address %q", gone, r.brokerAddr("a"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.refresh(ctx, "T2", false, 0); err != nil {
		t.Fatalf("a failed lookup with a cached route: %v", err)
	}
	if gone := r.forgetOffline(); len(gone) != 0 || r.brokerAddr("a") == "" {
		t.Fatalf("after T2's lookup failed: forgot %v, address %q", gone, r.brokerAddr("a"))
	}
	route("T2", "b")
	if gone := r.forgetOffline(); len(gone) != 0 || r.brokerAddr("a") == "" {
		t.Fatalf("no route names a, for one round: forgot %v, address %q", gone, r.brokerAddr("a"))
	}
	route("T2", "a", "b") // a registered again
	if gone := r.forgetOffline(); len(gone) != 0 || r.brokerAddr("a") == "" {
		t.Fatalf("a named again: forgot %v, address %q", gone, r.brokerAddr("a"))
	}
	route("T2", "b")
	if gone := r.forgetOffline(); len(gone) != 0 || r.brokerAddr("a") == "" {
		t.Fatalf("no route names a, for one round since it was named: forgot %v, address %q", gone, r.brokerAddr("a"))
	}
	if gone := r.forgetOffline(); !slices.Equal(gone, []string{"a"}) || r.brokerAddr("a") != "" || r.brokerAddr("b") == "" {
		t.Fatalf("no route names a, for two rounds: forgot %v, a's address %q, b's %q", gone, r.brokerAddr("a"), r.brokerAddr("b"))
	}
}

// scriptedNameServer answers GET_ROUTEINFO_BY_TOPIC with answer's reply to
// the topic asked and how many lookups of it came before (0 for the first);
// answer may block to hold a reply back.
func scriptedNameServer(t *testing.T, answer func(topic string, n int) *remoting.RemotingCommand) string {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	srv := remoting.NewServer(remoting.ServerConfig{}, nil)
	srv.Register(remoting.RequestGetRouteInfoByTopic, func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		topic := req.ExtFields["topic"]
		mu.Lock()
		n := seen[topic]
		seen[topic]++
		mu.Unlock()
		return answer(topic, n), nil
	}, 4, 16)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv.Addr().String()
}

// routeReply is a route answer naming group g with master and one queue.
func routeReply(g, master string) *remoting.RemotingCommand {
	resp := remoting.NewResponse(remoting.ResponseSuccess, "")
	resp.Body = []byte(fmt.Sprintf(`{"brokerDatas":[{"brokerAddrs":{"0":%q},"brokerName":%q,"cluster":"C"}],`+
		`"queueDatas":[{"brokerName":%q,"perm":6,"readQueueNums":1,"writeQueueNums":1}]}`, master, g, g))
	return resp
}

// TestRouteNotReplacedByEarlierLookup: a producer's first send of T finds
// no route and asks for TBW102's, whose answer is slow; meanwhile T was
// created and another lookup stored its route. The default route, standing
// for T's earlier TOPIC_NOT_EXIST answer, must not replace it.
func TestRouteNotReplacedByEarlierLookup(t *testing.T) {
	held := make(chan struct{})
	var defaultAsked atomic.Bool
	r := newTestRoutes(t, scriptedNameServer(t, func(topic string, n int) *remoting.RemotingCommand {
		switch {
		case topic == wire.TopicAutoCreate:
			defaultAsked.Store(true)
			<-held
			return routeReply("default", "127.0.0.1:2")
		case n == 0:
			return remoting.NewResponse(remoting.ResponseTopicNotExist, "no route")
		default:
			return routeReply("b", "127.0.0.1:3")
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	first := make(chan *TopicPublishInfo, 1)
	go func() {
		info, err := r.refresh(ctx, "T", true, 4)
		if err != nil {
			t.Error(err)
		}
		first <- info
	}()
	testutil.WaitFor(t, 5*time.Second, "the first lookup waiting for TBW102", defaultAsked.Load)
	if info, err := r.refresh(ctx, "T", true, 4); err != nil || info.fromDefault {
		t.Fatalf("second lookup: %v %v", info, err)
	}
	close(held)
	info := <-first
	if r.isDefaultRoute("T") || r.cachedPublishInfo("T").Queues[0].BrokerName != "b" {
		t.Fatalf("T's route %v replaced by the default one of a lookup begun earlier", r.cachedPublishInfo("T").Queues)
	}
	if info == nil || info.fromDefault {
		t.Errorf("the earlier lookup returned %v, want the route cached since", info)
	}
}

// TestRouteGroupNotRegressedByEarlierLookup: T1's route, answered with
// the group's master before an election, is stored by its caller only
// after T2's lookup, answered later, stored the new master (a caller of a
// shared lookup stores when it gets to it). T2's newer master stays the
// group's; T1's route is still T1's.
func TestRouteGroupNotRegressedByEarlierLookup(t *testing.T) {
	r := newTestRoutes(t, scriptedNameServer(t, func(topic string, n int) *remoting.RemotingCommand {
		if topic == "T1" {
			return routeReply("g", "127.0.0.1:2")
		}
		return routeReply("g", "127.0.0.1:3")
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rd, seq, err := r.fetchRoute(ctx, "T1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.refresh(ctx, "T2", false, 0); err != nil {
		t.Fatal(err)
	}
	r.store("T1", rd, newPublishInfo("T1", rd), seq)
	if addr := r.brokerAddr("g"); addr != "127.0.0.1:3" {
		t.Fatalf("g's address %s: an earlier answer's master replaced the later one's", addr)
	}
	if qs := r.cachedPublishInfo("T1"); qs == nil || qs.Queues[0].BrokerName != "g" {
		t.Fatalf("T1's own route not cached: %v", qs)
	}
}

// storeFresh stores rd as topic's route from an answer arrived now.
func (r *routeManager) storeFresh(topic string, rd *wire.TopicRouteData) {
	r.mu.Lock()
	r.fetches++
	seq := r.fetches
	r.mu.Unlock()
	r.store(topic, rd, newPublishInfo(topic, rd), seq)
}

// TestRouteGroupTakesLookupAnsweredAfterFailOver: name server 1 is
// failing, slowly for T1's lookup; T2's lookup, begun later, fails there
// at once and name server 2 answers with g's master before an election.
// T1's lookup then moves on to name server 2, which has heard of the new
// master since: its answer is the newest and g's members must be its own.
func TestRouteGroupTakesLookupAnsweredAfterFailOver(t *testing.T) {
	held := make(chan struct{})
	var t1Asked, elected atomic.Bool
	failing := scriptedNameServer(t, func(topic string, _ int) *remoting.RemotingCommand {
		if topic == "T1" {
			t1Asked.Store(true)
			<-held
		}
		return remoting.NewResponse(remoting.ResponseSystemError, "failing")
	})
	live := scriptedNameServer(t, func(string, int) *remoting.RemotingCommand {
		if elected.Load() {
			return routeReply("g", "127.0.0.1:3")
		}
		return routeReply("g", "127.0.0.1:2")
	})
	r := newTestRoutes(t, failing, live)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() { _, err := r.refresh(ctx, "T1", false, 0); first <- err }()
	testutil.WaitFor(t, 5*time.Second, "T1's lookup at the failing name server", t1Asked.Load)
	if _, err := r.refresh(ctx, "T2", false, 0); err != nil {
		t.Fatal(err)
	}
	if addr := r.brokerAddr("g"); addr != "127.0.0.1:2" {
		t.Fatalf("g's address after T2's lookup: %s", addr)
	}
	elected.Store(true)
	close(held)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if addr := r.brokerAddr("g"); addr != "127.0.0.1:3" {
		t.Fatalf("g's address %s: the answer of T1's lookup, given after T2's, was refused", addr)
	}
}

// An orderTopicConf of separators alone, as the name server's KV table may
// hand every client of the topic, builds no queue and no string per item.
func TestPublishInfoOrderConfBounded(t *testing.T) {
	const size = 8 << 20
	rd := &wire.TopicRouteData{OrderTopicConf: strings.Repeat(";", size)}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	info := newPublishInfo("T", rd)
	runtime.ReadMemStats(&after)
	if len(info.Queues) != 0 {
		t.Fatalf("%d queues", len(info.Queues))
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > size {
		t.Fatalf("an orderTopicConf of %d separators allocated %d MiB", size, got>>20)
	}
}
