package client

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestRebalanceScenarios drives the allocation strategies from
// testdata/rebalance/*.txt.
//
//	allocate strategy=avg|circle|config|room|nearby|hash [topic=T]
//	         queues=broker:count,... consumers=c1,c2,...
//	         [inner=avg|circle|hash] [vnodes=N] [idcs=a,b]
//	         [config=c1:broker/0+broker/1|c2:...]
//
// prints each consumer's queues (queues and consumers are sorted first,
// as a rebalance does), a coverage line (every queue exactly once, or
// what is unassigned / duplicated) and, when the previous allocate of the
// file had the same queues, how many queues changed owner. The nearby
// strategy's resolver reads the machine room as the text before the first
// '-' of a broker name or consumer id. Strategies that promise full
// coverage (all but config and room) must report "coverage: ok" whatever
// the golden file says.
func TestRebalanceScenarios(t *testing.T) {
	for _, f := range globScenarios(t, "rebalance") {
		t.Run(f, func(t *testing.T) {
			var prev map[MessageQueue]string
			var prevKey string
			var prevConsumers []string
			runScenarioFile(t, f, func(cmd string) string {
				out, owners, queues := execAllocate(t, cmd)
				key, consumers := splitConsumers(cmd)
				if prev != nil && key == prevKey {
					moved := 0
					for _, q := range queues {
						if prev[q] == owners[q] {
							continue
						}
						moved++
						// Consistent hashing only moves queues to a
						// joining consumer or away from a leaving one.
						if strings.Contains(cmd, "strategy=hash") && slices.Contains(prevConsumers, owners[q]) && slices.Contains(consumers, prev[q]) {
							t.Errorf("%s: %s moved from %s to %s, both present before and after", cmd, q, prev[q], owners[q])
						}
					}
					out += fmt.Sprintf("\nmoved: %d of %d", moved, len(queues))
				}
				prev, prevKey, prevConsumers = owners, key, consumers
				return out
			})
		})
	}
}

// splitConsumers returns cmd without its consumers= argument, and that
// argument's list: two allocations are comparable when the rest is equal.
func splitConsumers(cmd string) (string, []string) {
	var rest []string
	var consumers []string
	for _, f := range strings.Fields(cmd) {
		if v, ok := strings.CutPrefix(f, "consumers="); ok {
			consumers = strings.Split(v, ",")
			continue
		}
		rest = append(rest, f)
	}
	return strings.Join(rest, " "), consumers
}

func roomOf(s string) string { room, _, _ := strings.Cut(s, "-"); return room }

func strategyByName(t *testing.T, name string, a map[string]string, consumer string) AllocateStrategy {
	t.Helper()
	switch name {
	case "avg":
		return AllocateAveragely()
	case "circle":
		return AllocateAveragelyByCircle()
	case "hash":
		n := DefaultVirtualNodes
		if a["vnodes"] != "" {
			n = atoi(t, a["vnodes"])
		}
		s, err := AllocateConsistentHash(n, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	case "room":
		return AllocateByMachineRoom(strings.Split(a["idcs"], ","))
	case "nearby":
		s, err := AllocateMachineRoomNearby(strategyByName(t, a["inner"], a, consumer), MachineRoomResolverFuncs{
			Broker:   func(mq MessageQueue) string { return roomOf(mq.BrokerName) },
			Consumer: roomOf,
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	case "config":
		for _, spec := range strings.Split(a["config"], "|") {
			cid, list, _ := strings.Cut(spec, ":")
			if cid != consumer {
				continue
			}
			var qs []MessageQueue
			for _, q := range strings.Split(list, "+") {
				b, id, _ := strings.Cut(q, "/")
				qs = append(qs, MessageQueue{Topic: orDefault(a["topic"], "T"), BrokerName: b, QueueID: atoi(t, id)})
			}
			return AllocateByConfig(qs)
		}
		return AllocateByConfig(nil)
	}
	t.Fatalf("unknown strategy %q", name)
	return nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func execAllocate(t *testing.T, cmd string) (string, map[MessageQueue]string, []MessageQueue) {
	fields := strings.Fields(cmd)
	if fields[0] != "allocate" {
		t.Fatalf("unknown command %q", fields[0])
	}
	a := scenarioArgs(t, fields[1:])
	topic := orDefault(a["topic"], "T")
	var queues []MessageQueue
	for _, spec := range strings.Split(a["queues"], ",") {
		b, n, _ := strings.Cut(spec, ":")
		for i := 0; i < atoi(t, n); i++ {
			queues = append(queues, MessageQueue{Topic: topic, BrokerName: b, QueueID: i})
		}
	}
	consumers := strings.Split(a["consumers"], ",")
	SortQueues(queues)
	slices.Sort(consumers)
	var b strings.Builder
	owners := map[MessageQueue]string{}
	count := map[MessageQueue]int{}
	for _, c := range consumers {
		s := strategyByName(t, a["strategy"], a, c)
		got, err := s.Allocate("G", c, slices.Clone(queues), slices.Clone(consumers))
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		fmt.Fprintf(&b, "%s:", c)
		for _, q := range got {
			fmt.Fprintf(&b, " %s/%d", q.BrokerName, q.QueueID)
			owners[q] = c
			count[q]++
		}
		b.WriteByte('\n')
	}
	var unassigned, dup []string
	for _, q := range queues {
		switch n := count[q]; {
		case n == 0:
			unassigned = append(unassigned, fmt.Sprintf("%s/%d", q.BrokerName, q.QueueID))
		case n > 1:
			dup = append(dup, fmt.Sprintf("%s/%d", q.BrokerName, q.QueueID))
		}
	}
	if len(unassigned)+len(dup) == 0 {
		b.WriteString("coverage: ok")
	} else {
		fmt.Fprintf(&b, "coverage: unassigned=%v duplicated=%v", unassigned, dup)
		if s := a["strategy"]; s != "config" && s != "room" {
			t.Errorf("%s: strategy %s must assign every queue exactly once: unassigned %v duplicated %v", cmd, s, unassigned, dup)
		}
	}
	return b.String(), owners, queues
}

func TestAllocateInputErrors(t *testing.T) {
	hash, _ := AllocateConsistentHash(3, nil)
	room := AllocateByMachineRoom([]string{"a"})
	nearby, _ := AllocateMachineRoomNearby(AllocateAveragely(), MachineRoomResolverFuncs{
		Broker: func(MessageQueue) string { return "r" }, Consumer: func(string) string { return "r" }})
	qs := []MessageQueue{{Topic: "T", BrokerName: "b", QueueID: 0}}
	for _, s := range []AllocateStrategy{AllocateAveragely(), AllocateAveragelyByCircle(), hash, room, nearby} {
		for _, in := range []struct {
			cid  string
			qs   []MessageQueue
			cids []string
		}{{"", qs, []string{"c"}}, {"c", nil, []string{"c"}}, {"c", qs, nil}} {
			if _, err := s.Allocate("G", in.cid, in.qs, in.cids); !errors.Is(err, ErrInvalidStrategyInput) {
				t.Errorf("%s %+v: err %v", s.Name(), in, err)
			}
		}
		// A consumer not in the list gets nothing and no error.
		if got, err := s.Allocate("G", "x", qs, []string{"c"}); err != nil || len(got) != 0 {
			t.Errorf("%s: stranger got %v, %v", s.Name(), got, err)
		}
	}
	if _, err := AllocateConsistentHash(0, nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("0 vnodes: %v", err)
	}
	if _, err := AllocateMachineRoomNearby(nil, nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("nil inner: %v", err)
	}
	bad, _ := AllocateMachineRoomNearby(AllocateAveragely(), MachineRoomResolverFuncs{
		Broker: func(MessageQueue) string { return "" }, Consumer: func(string) string { return "r" }})
	if _, err := bad.Allocate("G", "c", qs, []string{"c"}); !errors.Is(err, ErrInvalidStrategyInput) {
		t.Errorf("empty room: %v", err)
	}
	names := []string{AllocateAveragely().Name(), AllocateAveragelyByCircle().Name(), AllocateByConfig(nil).Name(), room.Name(), nearby.Name(), hash.Name()}
	if want := []string{"AVG", "AVG_BY_CIRCLE", "CONFIG", "MACHINE_ROOM", "MACHINE_ROOM_NEARBY-AVG", "CONSISTENT_HASH"}; !slices.Equal(names, want) {
		t.Errorf("names %v", names)
	}
}

// TestHashRing checks the ring against hand-computed MD5 points and the
// add/remove bookkeeping.
func TestHashRing(t *testing.T) {
	if got := MD5Hash("hello"); got != 0x5d41402a {
		t.Fatalf("MD5Hash(hello) = %#x, want 0x5d41402a", got)
	}
	r := NewHashRing(nil)
	if _, ok := r.Route("k"); ok {
		t.Fatal("empty ring routed")
	}
	r.Add("c1", 5)
	r.Add("c2", 5)
	r.Add("c1", 2) // numbered c1-5, c1-6
	if r.replicas("c1") != 7 || len(r.points) != 12 {
		t.Fatalf("replicas %d points %d", r.replicas("c1"), len(r.points))
	}
	if !slices.IsSorted(r.points) {
		t.Fatal("points unsorted")
	}
	r.Remove("c1")
	for i := 0; i < 100; i++ {
		if n, _ := r.Route(fmt.Sprint(i)); n != "c2" {
			t.Fatalf("after removing c1, key %d routed to %s", i, n)
		}
	}
	// Collisions: a constant hash puts everything on one point, and the
	// node added last owns it, as a TreeMap put would.
	r = NewHashRing(func(string) uint32 { return 7 })
	r.Add("a", 3)
	r.Add("b", 1)
	if n, _ := r.Route("x"); n != "b" || len(r.points) != 1 {
		t.Fatalf("collision owner %s, points %d", n, len(r.points))
	}
}

// TestConsistentHashMatchesReference compares with the output of an
// independent Python re-implementation of AllocateMessageQueueConsistentHash
// and ConsistentHashRouter (MD5, first four digest bytes as an unsigned
// value, TreeMap ceiling with wrap-around), written from the Java sources.
func TestConsistentHashMatchesReference(t *testing.T) {
	cases := []struct {
		vnodes    int
		perBroker int
		consumers []string
		want      map[string]string
	}{
		{10, 4, []string{"c1", "c2", "c3"}, map[string]string{
			"c1": "broker-a/0 broker-b/3", "c2": "broker-a/1 broker-b/0 broker-b/1", "c3": "broker-a/2 broker-a/3 broker-b/2"}},
		{10, 4, []string{"c1", "c2", "c3", "c4"}, map[string]string{
			"c1": "broker-a/0 broker-b/3", "c2": "", "c3": "broker-a/2 broker-a/3", "c4": "broker-a/1 broker-b/0 broker-b/1 broker-b/2"}},
		{100, 8, []string{"c1", "c2", "c3", "c4"}, map[string]string{
			"c1": "broker-a/0 broker-a/1 broker-a/3 broker-a/4 broker-b/0", "c2": "broker-a/2 broker-a/5 broker-a/6 broker-b/4",
			"c3": "broker-a/7 broker-b/6 broker-b/7", "c4": "broker-b/1 broker-b/2 broker-b/3 broker-b/5"}},
	}
	for _, c := range cases {
		var qs []MessageQueue
		for _, b := range []string{"broker-a", "broker-b"} {
			for i := 0; i < c.perBroker; i++ {
				qs = append(qs, MessageQueue{Topic: "TopicTest", BrokerName: b, QueueID: i})
			}
		}
		s, _ := AllocateConsistentHash(c.vnodes, nil)
		for _, cid := range c.consumers {
			got, err := s.Allocate("G", cid, qs, c.consumers)
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, q := range got {
				parts = append(parts, fmt.Sprintf("%s/%d", q.BrokerName, q.QueueID))
			}
			if g := strings.Join(parts, " "); g != c.want[cid] {
				t.Errorf("vnodes %d %v: %s got %q, want %q", c.vnodes, c.consumers, cid, g, c.want[cid])
			}
		}
	}
}
