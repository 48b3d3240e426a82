package broker

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// lockTableSize counts the group maps and the entries the lock table holds.
func lockTableSize(l *lockManager) (groups, entries int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, g := range l.table {
		groups++
		entries += len(g)
	}
	return groups, entries
}

// lockTestController is a leader of broker-a holding topic T (4 queues)
// and the configured group G, with a lock table on a clock the test moves.
func lockTestController(t *testing.T) (c *Controller, now *time.Time) {
	t.Helper()
	r := newPathReplica(wire.TopicConfig{TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: wire.PermRead | wire.PermWrite})
	r.st.groups["G"] = wire.DefaultSubscriptionGroupConfig("G")
	c = newPathController(t, r)
	clock := time.Unix(1_700_000_000, 0)
	c.locks = newLockManager(c.cfg.RebalanceLockMaxLiveTime, func() time.Time { return clock })
	return c, &clock
}

func lockBody(t *testing.T, group, clientID string, mqs ...wire.MessageQueue) []byte {
	t.Helper()
	b, err := json.Marshal(wire.LockBatchBody{ConsumerGroup: group, ClientID: clientID, MQSet: mqs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lockBatch sends LOCK_BATCH_MQ and returns the answer and the queues it
// granted.
func lockBatch(t *testing.T, c *Controller, group, clientID string, mqs ...wire.MessageQueue) (*remoting.RemotingCommand, []wire.MessageQueue) {
	t.Helper()
	resp, err := c.processLockBatch(context.Background(), nil,
		remoting.NewRequest(remoting.RequestLockBatchMQ, nil, lockBody(t, group, clientID, mqs...)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != remoting.ResponseSuccess {
		return resp, nil
	}
	var got wire.LockBatchResponse
	if err := json.Unmarshal(resp.Body, &got); err != nil {
		t.Fatalf("lock answer %q: %v", resp.Body, err)
	}
	return resp, got.LockOKMQSet
}

func lockRefusals(t *testing.T, c *Controller) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.metrics.limitRefusals.WithLabelValues("lockBatch").Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestLockBatchOnlyQueuesOfThisBroker: LOCK_BATCH_MQ locks the queues
// this broker group has and leaves the rest out of lockOKMQSet, as
// RocketMQ leaves out a queue it could not lock; the answer's remark says
// why, and only the granted queues are in the table.
func TestLockBatchOnlyQueuesOfThisBroker(t *testing.T) {
	c, _ := lockTestController(t)
	bn := c.cfg.BrokerName
	mq := func(topic, broker string, q int32) wire.MessageQueue {
		return wire.MessageQueue{Topic: topic, BrokerName: broker, QueueID: q}
	}
	want := []wire.MessageQueue{mq("T", bn, 0), mq("T", bn, 3)}
	for _, tc := range []struct {
		name   string
		bad    wire.MessageQueue
		remark string
	}{
		{"unknown topic", mq("NOPE", bn, 0), "topic NOPE does not exist on broker " + bn},
		{"queue out of range", mq("T", bn, 4), "queueId 4 out of 0..3 of topic T"},
		{"negative queue", mq("T", bn, -1), "queueId -1 out of 0..3 of topic T"},
		{"another broker's queue", mq("T", "broker-z", 0), "queue of broker broker-z sent to broker " + bn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer c.locks.reset()
			before := lockRefusals(t, c)
			resp, got := lockBatch(t, c, "G", "c1", want[0], tc.bad, want[1])
			if resp.Code != remoting.ResponseSuccess {
				t.Fatalf("lock answered %d %q", resp.Code, resp.Remark)
			}
			slices.SortFunc(got, func(a, b wire.MessageQueue) int { return int(a.QueueID - b.QueueID) })
			if !slices.Equal(got, want) {
				t.Fatalf("granted %+v, want %+v", got, want)
			}
			if !strings.Contains(resp.Remark, "1 of 3 queues not locked") || !strings.Contains(resp.Remark, tc.remark) {
				t.Fatalf("remark %q, want one naming %q", resp.Remark, tc.remark)
			}
			if _, n := lockTableSize(c.locks); n != len(want) {
				t.Fatalf("table holds %d entries, want %d", n, len(want))
			}
			if got := lockRefusals(t, c) - before; got != 1 {
				t.Fatalf("lockBatch refusals = %v, want 1", got)
			}
		})
	}
}

// TestLockBatchRefusesBadRequests: a lock for an illegal or unknown group
// or without a usable client id is refused whole with a RocketMQ code and
// a remark naming what was wrong, and takes nothing.
func TestLockBatchRefusesBadRequests(t *testing.T) {
	c, _ := lockTestController(t)
	q0 := wire.MessageQueue{Topic: "T", BrokerName: c.cfg.BrokerName, QueueID: 0}
	for _, tc := range []struct {
		name, group, clientID string
		code                  int16
		remark                string
	}{
		{"empty group", "", "c1", remoting.ResponseInvalidParameter, "the group name is empty"},
		{"long group", strings.Repeat("g", 1<<20), "c1", remoting.ResponseInvalidParameter, "longer than 255"},
		{"illegal group", "bad group!", "c1", remoting.ResponseInvalidParameter, "illegal characters"},
		{"unknown group", "NOBODY", "c1", remoting.ResponseSubscriptionGroupNotExist, "NOBODY is neither configured nor connected on broker " + c.cfg.BrokerName},
		{"empty client id", "G", "", remoting.ResponseInvalidParameter, "the clientId is empty"},
		{"long client id", "G", strings.Repeat("c", 1<<20), remoting.ResponseInvalidParameter, "clientId is 1048576 bytes, longer than 255"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := lockRefusals(t, c)
			resp, _ := lockBatch(t, c, tc.group, tc.clientID, q0)
			if resp.Code != tc.code || !strings.Contains(resp.Remark, tc.remark) || !strings.HasPrefix(resp.Remark, "lock refused: ") {
				t.Fatalf("code %d remark %.200q; want %d with \"lock refused: …%s\"", resp.Code, resp.Remark, tc.code, tc.remark)
			}
			if g, n := lockTableSize(c.locks); g != 0 || n != 0 {
				t.Fatalf("refused lock left %d groups, %d entries", g, n)
			}
			if got := lockRefusals(t, c) - before; got != 1 {
				t.Fatalf("lockBatch refusals = %v, want 1", got)
			}
		})
	}
}

// TestLockBatchAbuseLeavesTableEmpty: a client naming queues that do not
// exist here, under groups that do not exist here, grows nothing, and a
// well-behaved lock still works afterwards.
func TestLockBatchAbuseLeavesTableEmpty(t *testing.T) {
	c, _ := lockTestController(t)
	bn := c.cfg.BrokerName
	for i := range 2000 {
		s := strconv.Itoa(i)
		mqs := []wire.MessageQueue{
			{Topic: "FLOOD" + s, BrokerName: bn, QueueID: 0},
			{Topic: "T", BrokerName: bn, QueueID: int32(4 + i)},
			{Topic: "T", BrokerName: "other-" + s, QueueID: 0},
		}
		lockBatch(t, c, "G", "evil@"+s, mqs...)
		lockBatch(t, c, "EVIL"+s, "evil@"+s, wire.MessageQueue{Topic: "T", BrokerName: bn, QueueID: 0})
	}
	if g, n := lockTableSize(c.locks); g != 0 || n != 0 {
		t.Fatalf("abusive locks left %d groups, %d entries", g, n)
	}
	q := wire.MessageQueue{Topic: "T", BrokerName: bn, QueueID: 1}
	if _, got := lockBatch(t, c, "G", "good@1", q); !slices.Equal(got, []wire.MessageQueue{q}) {
		t.Fatalf("after the abuse a good lock got %+v", got)
	}
	if _, got := lockBatch(t, c, "G", "good@2", q); len(got) != 0 {
		t.Fatalf("a queue good@1 holds was granted to good@2 too: %+v", got)
	}
}

// TestLockExpiredPruned: expired entries leave the table, with their
// group's map, once lock rounds run after them (a sweep over every group
// at most once per TTL, and the locking group's own entries on each of its
// calls), while live ones stay; an unlock that frees a group's last queue
// drops its map.
func TestLockExpiredPruned(t *testing.T) {
	ttl := time.Minute
	now := time.Unix(1_700_000_000, 0)
	l := newLockManager(ttl, func() time.Time { return now })
	b := func(q int32) wire.MessageQueue { return wire.MessageQueue{Topic: "B", BrokerName: "b", QueueID: q} }
	gone := make([]wire.MessageQueue, 8)
	for i := range gone {
		gone[i] = wire.MessageQueue{Topic: "A", BrokerName: "b", QueueID: int32(i)}
	}
	expect := func(what string, groups, entries int) {
		t.Helper()
		if g, n := lockTableSize(l); g != groups || n != entries {
			t.Fatalf("%s: table holds %d groups, %d entries; want %d, %d", what, g, n, groups, entries)
		}
	}
	if got := l.tryLockBatch("gone", "departed@1", gone); len(got) != len(gone) {
		t.Fatalf("locked %d of %d", len(got), len(gone))
	}
	if got := l.tryLockBatch("live", "c@1", []wire.MessageQueue{b(0), b(1)}); len(got) != 2 {
		t.Fatalf("locked %d of 2", len(got))
	}
	expect("start", 2, 10)

	// live renews within the TTL; departed never comes back.
	now = now.Add(ttl / 2)
	l.tryLockBatch("live", "c@1", []wire.MessageQueue{b(0), b(1)})
	now = now.Add(ttl/2 + time.Second)
	l.tryLockBatch("live", "c@1", []wire.MessageQueue{b(0)})
	expect("after departed@1's locks expired", 1, 2)

	// The sweep ran just now; live's queue 1 expires before the next one
	// is due and goes on live's next call.
	now = now.Add(ttl / 2)
	l.tryLockBatch("live", "c@1", []wire.MessageQueue{b(0)})
	expect("after live's queue 1 expired", 1, 1)

	l.unlockBatch("live", "c@1", []wire.MessageQueue{b(0)})
	expect("after the last unlock", 0, 0)
}

// TestLocksGoWithLeadership: a member that stops leading drops its locks,
// and becoming leader again does not clear what the new term granted.
func TestLocksGoWithLeadership(t *testing.T) {
	c, _ := lockTestController(t)
	q0 := wire.MessageQueue{Topic: "T", BrokerName: c.cfg.BrokerName, QueueID: 0}
	if _, got := lockBatch(t, c, "G", "c1", q0); len(got) != 1 {
		t.Fatalf("granted %+v, want q0", got)
	}
	c.onRoleChange(true, c.term.Load())
	if _, n := lockTableSize(c.locks); n != 1 {
		t.Fatalf("becoming leader cleared the locks granted since: %d entries, want 1", n)
	}
	c.onRoleChange(false, c.term.Load())
	if groups, n := lockTableSize(c.locks); groups != 0 || n != 0 {
		t.Fatalf("after losing leadership the table holds %d groups, %d entries; want none", groups, n)
	}
}
