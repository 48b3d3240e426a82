package jepsen

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/raftmq/raftmq/wire"
)

// position is one entry of one group's queue of one topic.
type position struct {
	topic, broker string
	queue         int
	offset        int64
}

func comparePositions(a, b position) int {
	return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.broker, b.broker), cmp.Compare(a.queue, b.queue), cmp.Compare(a.offset, b.offset))
}

// String names p; the main topic's positions as "broker qQ@O" (the
// verdict's long-standing form), the others with their topic.
func (p position) String() string {
	if p.topic == Topic {
		return fmt.Sprintf("%s q%d@%d", p.broker, p.queue, p.offset)
	}
	return fmt.Sprintf("%s %s q%d@%d", p.broker, p.topic, p.queue, p.offset)
}

// sighting is one observation of the value at a position: who saw it (an
// acknowledgement, a consumer, a node's final read), the CommitLog offset
// it came with (0: unknown) and, for a delivery, the member that served it.
// stored says the offset was read from the entry itself (a delivery or a
// read), not from a send's answer.
type sighting struct {
	value, who, servedBy string
	clo                  int64
	stored               bool
}

func (s sighting) String() string {
	out := s.who
	if s.servedBy != "" {
		out += " via " + s.servedBy
	}
	if s.clo != 0 {
		out += fmt.Sprintf(" clo %d", s.clo)
	}
	return out
}

// orTopic is topic, or def when topic is "" (a record of the list's own
// topic).
func orTopic(topic, def string) string {
	if topic == "" {
		return def
	}
	return topic
}

// eachSighting calls f for every value the history places at a position:
// acknowledged sends, deliveries and final reads of the main, ordered,
// retry (RetryTopic and %RETRY%), dead-letter and timer topics. Timer
// sends are not placed: their acknowledgement names the timer wheel's
// topic, not TimerTopic. Transactional sends are not either: theirs names
// the half-message topic.
func eachSighting(h History, okOps []Op, f func(position, sighting)) {
	ack := func(topic string, o Op) {
		f(position{topic, o.Broker, o.Queue, o.Offset}, sighting{value: o.Value, who: "ack", clo: o.CommitLogOffset})
	}
	del := func(topic string, d Delivery) {
		f(position{orTopic(d.Topic, topic), d.Broker, d.Queue, d.Offset},
			sighting{value: d.Value, who: "consumer " + d.Consumer, servedBy: d.ServedBy, clo: d.CommitLogOffset, stored: true})
	}
	read := func(topic string, r Read) {
		f(position{orTopic(r.Topic, topic), r.Broker, r.Queue, r.Offset}, sighting{value: r.Value, who: "read " + r.Node, clo: r.CommitLogOffset, stored: true})
	}
	for _, o := range okOps {
		ack(Topic, o)
	}
	for _, d := range h.Deliveries {
		del(Topic, d)
	}
	for _, r := range h.Reads {
		read(Topic, r)
	}
	x := h.Chaos
	for _, o := range x.OrderOps {
		if o.Result == ResultOK {
			ack(OrderTopic, o.Op)
		}
	}
	for _, d := range x.OrderDeliveries {
		del(OrderTopic, d)
	}
	for _, r := range x.OrderReads {
		read(OrderTopic, r)
	}
	for _, o := range x.RetryOps {
		if o.Result == ResultOK {
			ack(RetryTopic, o)
		}
	}
	for _, d := range x.RetryDeliveries {
		del(RetryTopic, d)
	}
	for _, r := range x.RetryReads {
		read(RetryTopic, r)
	}
	for _, r := range x.DLQReads {
		read(wire.DLQGroupTopicPrefix+RetryGroup, r)
	}
	for _, d := range h.TimerDeliveries {
		del(TimerTopic, d)
	}
	if h.TimerRead != nil {
		for _, r := range h.TimerRead.Reads {
			read(TimerTopic, r)
		}
	}
}

// Bounds of an offset conflict's example: values listed, observers listed
// per value.
const (
	maxValuesShown    = 4
	maxSightingsShown = 4
)

// offsetConflicts counts the positions seen holding two values (across
// acks, consumers, replicas and time), or one value stored at two
// CommitLog offsets (every replica holds the same bytes at the same
// offsets, so a copy elsewhere is another entry: a shift that happened to
// land on a copy of the same message), and describes some: each value
// with who saw it there, the member that served it and the CommitLog
// offset it came with. A replica serving a shifted queue shows as a run
// of such positions whose values the other replicas hold one position
// on; the shifted copies' CommitLog offsets tell whether its CommitLog or
// only its ConsumeQueue differs. The history is walked twice so that only
// the conflicting positions' observers are kept.
func offsetConflicts(h History, okOps []Op) (int, []string) {
	type firstSeen struct {
		value string
		clo   int64 // the first stored CommitLog offset seen, 0: none yet
	}
	first := map[position]firstSeen{}
	bad := map[position]bool{}
	eachSighting(h, okOps, func(p position, s sighting) {
		f, ok := first[p]
		switch {
		case !ok:
			f.value = s.value
		case f.value != s.value:
			bad[p] = true
		}
		if s.stored && s.clo != 0 {
			if f.clo == 0 {
				f.clo = s.clo
			} else if f.clo != s.clo {
				bad[p] = true
			}
		}
		first[p] = f
	})
	if len(bad) == 0 {
		return 0, nil
	}
	seen := map[position]map[string][]string{} // value → observers, in order
	eachSighting(h, okOps, func(p position, s sighting) {
		if !bad[p] {
			return
		}
		m := seen[p]
		if m == nil {
			m = map[string][]string{}
			seen[p] = m
		}
		if d := s.String(); !slices.Contains(m[s.value], d) {
			m[s.value] = append(m[s.value], d)
		}
	})
	var ex []string
	for _, p := range examplePositions(bad) {
		var parts []string
		values := slices.Sorted(maps.Keys(seen[p]))
		for _, v := range values[:min(len(values), maxValuesShown)] {
			who := seen[p][v]
			shown := strings.Join(who[:min(len(who), maxSightingsShown)], ", ")
			if len(who) > maxSightingsShown {
				shown += fmt.Sprintf(" and %d more", len(who)-maxSightingsShown)
			}
			parts = append(parts, fmt.Sprintf("%s by %s", v, shown))
		}
		if len(values) > maxValuesShown {
			parts = append(parts, fmt.Sprintf("%d more values", len(values)-maxValuesShown))
		}
		ex = append(ex, fmt.Sprintf("%s: %s", p, strings.Join(parts, " | ")))
	}
	return len(bad), ex
}

// examplePositions picks up to maxExamples of the positions, in order,
// taking one of each topic in turn so that a run of conflicts in one topic
// does not hide another topic's.
func examplePositions(set map[position]bool) []position {
	all := slices.SortedFunc(maps.Keys(set), comparePositions)
	byTopic := map[string][]position{}
	var topics []string
	for _, p := range all {
		if byTopic[p.topic] == nil {
			topics = append(topics, p.topic)
		}
		byTopic[p.topic] = append(byTopic[p.topic], p)
	}
	var out []position
	for round := 0; len(out) < min(maxExamples, len(all)); round++ {
		for _, t := range topics {
			if round < len(byTopic[t]) && len(out) < maxExamples {
				out = append(out, byTopic[t][round])
			}
		}
	}
	slices.SortFunc(out, comparePositions)
	return out
}

// queueGaps checks that every node's final read of every topic read holds
// a dense run of offsets per queue (a replica that skipped or repeated an
// entry in its ConsumeQueue); nodes and queues in order.
func queueGaps(h History) (int, []string) {
	type nodeTopicQueue struct {
		node, topic string
		queue       int
	}
	offs := map[nodeTopicQueue][]int64{}
	add := func(topic string, rs []Read) {
		for _, r := range rs {
			k := nodeTopicQueue{r.Node, orTopic(r.Topic, topic), r.Queue}
			offs[k] = append(offs[k], r.Offset)
		}
	}
	x := h.Chaos
	add(Topic, h.Reads)
	add(OrderTopic, x.OrderReads)
	add(RetryTopic, x.RetryReads)
	add(wire.DLQGroupTopicPrefix+RetryGroup, x.DLQReads)
	if h.TimerRead != nil {
		add(TimerTopic, h.TimerRead.Reads)
	}
	keys := make([]nodeTopicQueue, 0, len(offs))
	for k := range offs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b nodeTopicQueue) int {
		return cmp.Or(cmp.Compare(a.node, b.node), cmp.Compare(a.topic, b.topic), cmp.Compare(a.queue, b.queue))
	})
	n := 0
	var ex []string
	for _, k := range keys {
		o := offs[k]
		slices.Sort(o)
		where := fmt.Sprintf("%s q%d", k.node, k.queue)
		if k.topic != Topic {
			where = fmt.Sprintf("%s %s q%d", k.node, k.topic, k.queue)
		}
		for i := 1; i < len(o); i++ {
			if o[i] != o[i-1]+1 {
				n++
				ex = addEx(ex, "%s: offset %d follows %d", where, o[i], o[i-1])
			}
		}
	}
	return n, ex
}
