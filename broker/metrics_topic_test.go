package broker

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestTrafficStatsCountsAndCaps(t *testing.T) {
	s := newTrafficStats()
	s.put.max, s.get.max = 2, 2
	s.countPut("A", 2, 20)
	s.countPut("A", 1, 10)
	s.countPut("B", 1, 5)
	s.countPut("C", 4, 40) // past the cap
	s.countPut("D", 1, 1)  // past the cap
	s.countGet("g1", "A", 3, 300)
	s.countGet("g2", "A", 1, 100)
	s.countGet("g1", "B", 1, 50) // past the cap
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	want := `
# HELP raftmq_broker_topic_put_messages_total Messages acknowledged to producers, by topic (__other__: topics past the series cap).
# TYPE raftmq_broker_topic_put_messages_total counter
raftmq_broker_topic_put_messages_total{topic="A"} 3
raftmq_broker_topic_put_messages_total{topic="B"} 1
raftmq_broker_topic_put_messages_total{topic="__other__"} 5
# HELP raftmq_broker_group_get_bytes_total Stored-message bytes returned to pulls, by consumer group and topic (__other__: pairs past the series cap).
# TYPE raftmq_broker_group_get_bytes_total counter
raftmq_broker_group_get_bytes_total{group="__other__",topic="__other__"} 50
raftmq_broker_group_get_bytes_total{group="g1",topic="A"} 300
raftmq_broker_group_get_bytes_total{group="g2",topic="A"} 100
# HELP raftmq_broker_traffic_series_overflow_total Requests counted under __other__ because their topic (table=topic) or group/topic pair (table=group) came after the series cap.
# TYPE raftmq_broker_traffic_series_overflow_total counter
raftmq_broker_traffic_series_overflow_total{table="group"} 1
raftmq_broker_traffic_series_overflow_total{table="topic"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "raftmq_broker_topic_put_messages_total",
		"raftmq_broker_group_get_bytes_total", "raftmq_broker_traffic_series_overflow_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(s, "raftmq_broker_topic_put_bytes_total"); n != 3 {
		t.Fatalf("%d put-bytes series, want 3 (two topics and __other__)", n)
	}
}

// TestTrafficStatsOtherLabelIsNotASeries: a topic or group named like the
// overflow label goes to the overflow series instead of a duplicate one
// (a duplicate would make the whole scrape fail).
func TestTrafficStatsOtherLabelIsNotASeries(t *testing.T) {
	s := newTrafficStats()
	s.countPut(trafficOtherLabel, 1, 1)
	s.countGet(trafficOtherLabel, "T", 1, 1)
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(s, "raftmq_broker_topic_put_messages_total"); n != 1 {
		t.Fatalf("%d series", n)
	}
}

// TestTrafficStatsNoAllocation: counting for a key already seen allocates
// nothing (the send and pull paths call it once per request).
func TestTrafficStatsNoAllocation(t *testing.T) {
	s := newTrafficStats()
	topic := strings.Repeat("T", 3)
	s.countPut(topic, 1, 1)
	s.countGet("G", topic, 1, 1)
	if n := testing.AllocsPerRun(1000, func() {
		s.countPut(topic, 1, 100)
		s.countGet("G", topic, 1, 100)
	}); n != 0 {
		t.Fatalf("%v allocations per request", n)
	}
}

// TestTrafficStatsConcurrent: concurrent first uses of many keys lose no
// counts and keep one counter per key (run with -race).
func TestTrafficStatsConcurrent(t *testing.T) {
	s := newTrafficStats()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				s.countPut(fmt.Sprintf("T%d", i%50), 1, w+1)
				if i%10 == 0 {
					_ = testutil.CollectAndCount(s)
				}
			}
		}()
	}
	wg.Wait()
	var msgs uint64
	for _, c := range *s.put.m.Load() {
		msgs += c.msgs.Load()
	}
	if got := len(*s.put.m.Load()); got != 50 || msgs != 2000 {
		t.Fatalf("%d keys, %d messages; want 50 and 2000", got, msgs)
	}
}

func BenchmarkTrafficStatsCountPut(b *testing.B) {
	s := newTrafficStats()
	for i := range 500 {
		s.countPut(fmt.Sprintf("T%d", i), 1, 1)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.countPut("T250", 1, 1024)
	}
}
