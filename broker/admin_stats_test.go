package broker

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestStatsItemWindows checks the minute/hour/day windows and rates of a
// counter fed at known times, including a quiet spell (no snapshots) and
// traffic older than the window.
func TestStatsItemWindows(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	it := newStatsItem(t0)
	// 10 messages per second for 60 s, one add per second.
	for s := 1; s <= 60; s++ {
		it.add(10, t0.Add(time.Duration(s)*time.Second))
	}
	now := t0.Add(60 * time.Second)
	d := it.data(now)
	if d.StatsMinute.Sum != 600 || math.Abs(d.StatsMinute.Tps-10) > 0.01 || d.StatsMinute.Avgpt != 10 {
		t.Fatalf("minute after 60 s at 10/s: %+v", d.StatsMinute)
	}
	if d.StatsHour.Sum != 600 || d.StatsDay.Sum != 600 {
		t.Fatalf("hour %+v day %+v, want 600 each", d.StatsHour, d.StatsDay)
	}
	// Five quiet minutes: the last minute saw nothing, the hour all of it.
	later := now.Add(5 * time.Minute)
	d = it.data(later)
	if d.StatsMinute.Sum != 0 || d.StatsMinute.Tps != 0 {
		t.Fatalf("minute after 5 quiet minutes: %+v", d.StatsMinute)
	}
	if d.StatsHour.Sum != 600 {
		t.Fatalf("hour after 5 quiet minutes: %+v", d.StatsHour)
	}
	if got := it.tps(10*time.Second, later); got != 0 {
		t.Fatalf("10 s rate after a quiet spell: %v", got)
	}
}

// TestBrokerStatsKeys checks the keys the tools ask for: topic, topic@group
// and the cluster name, and the day marks.
func TestBrokerStatsKeys(t *testing.T) {
	s := newBrokerStats("C", time.Now())
	s.put("T", 3, 30)
	s.got("G", "T", 2, 20)
	s.got("G", "T", 0, 0)
	s.sentBack("G", "T")
	for _, k := range [][2]string{{"TOPIC_PUT_NUMS", "T"}, {"TOPIC_PUT_SIZE", "T"}, {"GROUP_GET_NUMS", "T@G"}, {"GROUP_GET_SIZE", "T@G"},
		{"SNDBCK_PUT_NUMS", "T@G"}, {"BROKER_PUT_NUMS", "C"}, {"BROKER_GET_NUMS", "C"}} {
		if s.lookup(k[0], k[1]) == nil {
			t.Errorf("no item %s %s", k[0], k[1])
		}
	}
	if s.lookup("TOPIC_PUT_NUMS", "X") != nil {
		t.Error("an item for a topic nothing was put to")
	}
	if n := s.lookup("GROUP_GET_SIZE", "T@G").data(time.Now()).StatsDay.Sum; n != 20 {
		t.Errorf("GROUP_GET_SIZE day sum %d, want 20", n)
	}
	if s.pullTotal.value.Load() != 2 || s.pullMiss.value.Load() != 1 || s.pullFound.value.Load() != 1 {
		t.Errorf("pull counts total %d found %d miss %d", s.pullTotal.value.Load(), s.pullFound.value.Load(), s.pullMiss.value.Load())
	}
	// A new day moves the marks: today's morning is the total so far.
	s.day.Store(s.day.Load() - 1)
	s.rollDay(time.Now())
	putToday, putYest, getToday, _ := s.morning()
	if putToday != 3 || putYest != 0 || getToday != 2 {
		t.Errorf("marks after a day change: put today %d yesterday %d, get today %d", putToday, putYest, getToday)
	}
}

// TestBrokerStatsKeysCapped: pulls under ever new group names stop adding
// items at trafficMaxGroupTopics pairs; later ones count under
// trafficOtherLabel.
func TestBrokerStatsKeysCapped(t *testing.T) {
	s := newBrokerStats("C", time.Now())
	for i := range trafficMaxGroupTopics + 50 {
		s.got(fmt.Sprintf("G%d", i), "T", 1, 10)
	}
	s.mu.RLock()
	n := len(s.items["GROUP_GET_NUMS"])
	s.mu.RUnlock()
	if n != trafficMaxGroupTopics+1 {
		t.Fatalf("%d GROUP_GET_NUMS items, want %d plus %s", n, trafficMaxGroupTopics, trafficOtherLabel)
	}
	if got := s.lookup("GROUP_GET_NUMS", trafficOtherLabel).value.Load(); got != 50 {
		t.Fatalf("%s counted %d pulls, want 50", trafficOtherLabel, got)
	}
}

// BenchmarkStatsPut is the cost the send path pays per stored batch.
func BenchmarkStatsPut(b *testing.B) {
	s := newBrokerStats("C", time.Now())
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.put("T", 1, 128)
		}
	})
}

// TestRuntimeInfoLeavesBrokerStatsAbsent: GET_BROKER_RUNTIME_INFO on a
// broker that stored and served nothing reports zero rates without
// creating the broker-wide items, so VIEW_BROKER_STATS_DATA still answers
// "not exist" for them, as RocketMQ does.
func TestRuntimeInfoLeavesBrokerStatsAbsent(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	c := tc.nodes[0]
	r := tc.call(c.Addr(), remoting.RequestGetBrokerRuntimeInfo, nil, nil)
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("GET_BROKER_RUNTIME_INFO: %d %q", r.Code, r.Remark)
	}
	if !strings.Contains(string(r.Body), `"putTps":"0.00 0.00 0.00"`) {
		t.Fatalf("an idle broker's runtime info has no zero putTps: %s", r.Body)
	}
	for _, name := range []string{wire.StatsBrokerPutNums, wire.StatsBrokerGetNums} {
		r := tc.call(c.Addr(), remoting.RequestViewBrokerStatsData,
			map[string]string{"statsName": name, "statsKey": c.cfg.BrokerClusterName}, nil)
		if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "not exist") {
			t.Fatalf("VIEW_BROKER_STATS_DATA %s after runtime info: %d %q, want SYSTEM_ERROR not exist", name, r.Code, r.Remark)
		}
	}
}
