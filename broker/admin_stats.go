package broker

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/wire"
)

// Broker statistics in RocketMQ's shape (BrokerStatsManager/StatsItem):
// counters per stats name and key (TOPIC_PUT_NUMS by topic, GROUP_GET_NUMS
// by topic@group, ...), read as the last minute, hour and day by
// VIEW_BROKER_STATS_DATA (315), as rates by GET_BROKER_RUNTIME_INFO
// (putTps, getTransferredTps) and as a group's consume TPS by
// GET_CONSUME_STATS. The tools built for RocketMQ (dashboard, exporter,
// mqadmin statsAll/clusterList) poll these.
//
// No goroutine samples the counters: an add or a read records a snapshot
// when the newest is older than the ring's step. A counter that does not
// move needs no snapshot (its delta over any span is zero), so lazy
// sampling gives the same windows as a ticker, to within one step.

// statsRing is one window's snapshots, oldest first.
type statsRing struct {
	step  time.Duration
	keep  int
	snaps []statsSnap
}

type statsSnap struct {
	at           int64 // unix ms
	value, times int64
}

// statsItem is one counter: a value (messages or bytes) and the number of
// adds (RocketMQ's "times", which avgpt divides by).
type statsItem struct {
	value, times atomic.Int64
	next         atomic.Int64 // unix ms when the next minute snapshot is due

	mu    sync.Mutex
	rings [3]statsRing // minute, hour, day
}

func newStatsItem(now time.Time) *statsItem {
	it := &statsItem{rings: [3]statsRing{
		{step: 10 * time.Second, keep: 8},
		{step: 10 * time.Minute, keep: 8},
		{step: time.Hour, keep: 26},
	}}
	ms := now.UnixMilli()
	for i := range it.rings {
		it.rings[i].snaps = []statsSnap{{at: ms}}
	}
	it.next.Store(ms + it.rings[0].step.Milliseconds())
	return it
}

func (it *statsItem) add(v int64, now time.Time) {
	it.value.Add(v)
	it.times.Add(1)
	if now.UnixMilli() >= it.next.Load() {
		it.sample(now)
	}
}

// sample appends a snapshot to every ring whose newest is a step old.
func (it *statsItem) sample(now time.Time) {
	ms := now.UnixMilli()
	it.mu.Lock()
	defer it.mu.Unlock()
	s := statsSnap{at: ms, value: it.value.Load(), times: it.times.Load()}
	for i := range it.rings {
		r := &it.rings[i]
		if ms-r.snaps[len(r.snaps)-1].at >= r.step.Milliseconds() {
			r.snaps = append(r.snaps, s)
			if len(r.snaps) > r.keep {
				r.snaps = r.snaps[len(r.snaps)-r.keep:]
			}
		}
	}
	it.next.Store(ms + it.rings[0].step.Milliseconds())
}

// window is the item over the last span, from ring r: the sum since the
// newest snapshot at least span old (else the oldest), its rate per
// second over the time actually covered, and the average per add.
func (it *statsItem) window(r int, span time.Duration, now time.Time) wire.BrokerStatsItem {
	it.sample(now)
	ms := now.UnixMilli()
	it.mu.Lock()
	snaps := it.rings[r].snaps
	base := snaps[0]
	for _, s := range snaps {
		if ms-s.at >= span.Milliseconds() {
			base = s
		}
	}
	it.mu.Unlock()
	sum, times := it.value.Load()-base.value, it.times.Load()-base.times
	out := wire.BrokerStatsItem{Sum: sum}
	if dt := ms - base.at; dt > 0 {
		out.Tps = float64(sum) * 1000 / float64(dt)
	}
	if times > 0 {
		out.Avgpt = float64(sum) / float64(times)
	}
	return out
}

// data is VIEW_BROKER_STATS_DATA's answer for the item.
func (it *statsItem) data(now time.Time) wire.BrokerStatsData {
	return wire.BrokerStatsData{
		StatsMinute: it.window(0, time.Minute, now),
		StatsHour:   it.window(1, time.Hour, now),
		StatsDay:    it.window(2, 24*time.Hour, now),
	}
}

// tps is the rate over the last span (10 s, 60 s or 600 s as RocketMQ's
// runtime info reports).
func (it *statsItem) tps(span time.Duration, now time.Time) float64 {
	r := 0
	if span > time.Minute {
		r = 1
	}
	return it.window(r, span, now).Tps
}

// brokerStats holds every item by stats name and key, and the day marks
// of the broker totals (msgPutTotalTodayMorning, ...).
type brokerStats struct {
	cluster string
	boot    time.Time

	mu    sync.RWMutex
	items map[string]map[string]*statsItem // guarded by mu; name → key → item

	// pulls counts pull requests: total, found (some message) and miss.
	pullTotal, pullFound, pullMiss *statsItem
	// putTimesTotal, putSizeTotal: messages and body bytes stored;
	// getTotal: messages pulled.
	putTimesTotal, putSizeTotal, getTotal atomic.Int64

	dayMu             sync.Mutex
	day               atomic.Int32 // yday of the marks; changed under dayMu
	putToday, putYest int64        // guarded by dayMu
	getToday, getYest int64        // guarded by dayMu
}

func newBrokerStats(cluster string, now time.Time) *brokerStats {
	s := &brokerStats{cluster: cluster, boot: now, items: map[string]map[string]*statsItem{},
		pullTotal: newStatsItem(now), pullFound: newStatsItem(now), pullMiss: newStatsItem(now)}
	s.day.Store(int32(now.YearDay()))
	return s
}

// item returns (creating) the item name/key. Keys are capped as the
// Prometheus traffic series are (metrics_topic.go): past trafficMaxTopics
// topics or trafficMaxGroupTopics topic@group pairs per name, counts go to
// the key trafficOtherLabel, so a client cycling group names cannot grow
// the table without bound.
func (s *brokerStats) item(name, key string, now time.Time) *statsItem {
	limit := trafficMaxTopics
	if strings.Contains(key, "@") {
		limit = trafficMaxGroupTopics
	}
	s.mu.RLock()
	m := s.items[name]
	it := m[key]
	if it == nil && len(m) >= limit {
		it = m[trafficOtherLabel] // past the cap: no write lock per count
	}
	s.mu.RUnlock()
	if it != nil {
		return it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m = s.items[name]
	if m == nil {
		m = map[string]*statsItem{}
		s.items[name] = m
	}
	if it = m[key]; it != nil {
		return it
	}
	if len(m) >= limit {
		if key = trafficOtherLabel; m[key] != nil {
			return m[key]
		}
	}
	it = newStatsItem(now)
	m[strings.Clone(key)] = it // key may alias a reused frame buffer
	return it
}

// lookup returns the item name/key if anything was ever counted there.
func (s *brokerStats) lookup(name, key string) *statsItem {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.items[name][key]
}

// put counts messages stored for topic.
func (s *brokerStats) put(topic string, msgs, bytes int) {
	now := time.Now()
	// The three items under one read lock: this runs for every request.
	s.mu.RLock()
	nums, size := s.items[wire.StatsTopicPutNums][topic], s.items[wire.StatsTopicPutSize][topic]
	all := s.items[wire.StatsBrokerPutNums][s.cluster]
	s.mu.RUnlock()
	if nums == nil {
		nums = s.item(wire.StatsTopicPutNums, topic, now)
	}
	if size == nil {
		size = s.item(wire.StatsTopicPutSize, topic, now)
	}
	if all == nil {
		all = s.item(wire.StatsBrokerPutNums, s.cluster, now)
	}
	nums.add(int64(msgs), now)
	size.add(int64(bytes), now)
	all.add(int64(msgs), now)
	s.putTimesTotal.Add(int64(msgs))
	s.putSizeTotal.Add(int64(bytes))
	s.rollDay(now)
}

// putAll counts a stored batch (one topic per send, but any mix works).
func (s *brokerStats) putAll(msgs []*store.Message) {
	for i := 0; i < len(msgs); {
		j, n := i, 0
		for ; j < len(msgs) && msgs[j].Topic == msgs[i].Topic; j++ {
			n += len(msgs[j].Body)
		}
		s.put(msgs[i].Topic, j-i, n)
		i = j
	}
}

// got counts one pull of group on topic that returned msgs messages.
func (s *brokerStats) got(group, topic string, msgs, bytes int) {
	now := time.Now()
	s.pullTotal.add(1, now)
	if msgs == 0 {
		s.pullMiss.add(1, now)
		return
	}
	s.pullFound.add(1, now)
	key := topic + "@" + group
	s.item(wire.StatsGroupGetNums, key, now).add(int64(msgs), now)
	s.item(wire.StatsGroupGetSize, key, now).add(int64(bytes), now)
	s.item(wire.StatsBrokerGetNums, s.cluster, now).add(int64(msgs), now)
	s.getTotal.Add(int64(msgs))
	s.rollDay(now)
}

// sentBack counts a consumer's send-back of a message of topic.
func (s *brokerStats) sentBack(group, topic string) {
	now := time.Now()
	s.item(wire.StatsSndbckPutNums, topic+"@"+group, now).add(1, now)
}

// rollDay moves the morning marks at the first count of a new local day.
func (s *brokerStats) rollDay(now time.Time) {
	d := int32(now.YearDay())
	if s.day.Load() == d {
		return
	}
	s.dayMu.Lock()
	defer s.dayMu.Unlock()
	if s.day.Load() != d {
		s.day.Store(d)
		s.putYest, s.getYest = s.putToday, s.getToday
		s.putToday, s.getToday = s.putTimesTotal.Load(), s.getTotal.Load()
	}
}

// morning returns the totals at this morning and yesterday morning (since
// boot: a counter started today has both at 0).
func (s *brokerStats) morning() (putToday, putYest, getToday, getYest int64) {
	s.rollDay(time.Now())
	s.dayMu.Lock()
	defer s.dayMu.Unlock()
	return s.putToday, s.putYest, s.getToday, s.getYest
}
