package broker

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// timerProps is a properties string with one timer property.
func timerProps(name string, v int64) string {
	return name + "\x01" + strconv.FormatInt(v, 10) + "\x02"
}

// delivered reads every message of topic's queues on g's replica: body →
// store times (one per copy) and TIMER_OUT_MS.
type deliveredMsg struct {
	copies    int
	storedMs  int64
	timerOut  int64
	realTopic string
}

func readTopic(t *testing.T, g *Group, topic string, queues int) map[string]*deliveredMsg {
	t.Helper()
	out := map[string]*deliveredMsg{}
	for q := 0; q < queues; q++ {
		for off := int64(0); ; {
			res, err := g.Store().GetMessage("", topic, int32(q), off, 32, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != store.Found {
				break
			}
			for i, b := range res.Messages {
				m, _, err := wire.DecodeMessage(b, true)
				if err != nil {
					t.Fatal(err)
				}
				d := out[string(m.Body)]
				if d == nil {
					d = &deliveredMsg{storedMs: m.StoreTimestamp, realTopic: m.Topic}
					d.timerOut, _ = strconv.ParseInt(m.Properties[wire.PropertyTimerOutMs], 10, 64)
					out[string(m.Body)] = d
				}
				d.copies++
				off = res.QueueOffsets[i] + 1
			}
		}
	}
	return out
}

// TestTimerSendChecks: malformed and too-distant timer properties are
// refused with MESSAGE_ILLEGAL and a remark; a due time in the past stores
// a normal message; a timer property in a batch is refused; nobody may send
// to rmq_sys_wheel_timer.
func TestTimerSendChecks(t *testing.T) {
	pc := startRealCluster(t, func(c *BrokerConfig) { c.TimerMaxDelaySec = 60 })
	leader := pc.nodes[pc.leader()].Addr()
	pc.createTopic(leader, "TC", 1)
	now := time.Now().UnixMilli()
	for _, c := range []struct {
		props, remark string
	}{
		{wire.PropertyTimerDeliverMs + "\x01soon\x02", "is not an integer"},
		{timerProps(wire.PropertyTimerDelaySec, 61), "beyond the max delay 60000 ms (timerMaxDelaySec=60)"},
		{timerProps(wire.PropertyStartDeliverTime, now+120_000), "beyond the max delay"},
		{timerProps(wire.PropertyTimerDelayMs, 1<<62), "beyond the max delay"},
		{timerProps(wire.PropertyTimerDelaySec, 1<<62), "beyond the max delay"},
		{timerProps(wire.PropertyTimerDeliverMs, now+5000) + wire.PropertyTimerDelUniqKey + "\x01abc\x02", "TIMER_DEL_UNIQKEY=abc) is not supported"},
	} {
		r := pc.call(leader, remoting.RequestSendMessage, sendExt("TC", 0, c.props), []byte("x"))
		if r.Code != remoting.ResponseMessageIllegal || !strings.Contains(r.Remark, c.remark) {
			t.Errorf("%q: code %d remark %q", c.props, r.Code, r.Remark)
		}
	}
	r := pc.call(leader, remoting.RequestSendMessage, sendExt("TC", 0, timerProps(wire.PropertyTimerDeliverMs, now-5000)), []byte("past"))
	if r.Code != remoting.ResponseSuccess || r.ExtFields["queueOffset"] != "0" {
		t.Fatalf("past due time: %d %s %v", r.Code, r.Remark, r.ExtFields)
	}
	// A delay level wins over the timer properties (dropped), as in RocketMQ 5.
	r = pc.call(leader, remoting.RequestSendMessage, sendExt("TC", 0, "DELAY\x011\x02"+timerProps(wire.PropertyTimerDelaySec, 1<<40)), []byte("lvl"))
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("delay level with a timer property: %d %s", r.Code, r.Remark)
	}
	r = pc.call(leader, remoting.RequestSendMessage, sendExt(wire.TopicTimer, 0, ""), []byte("x"))
	if r.Code != remoting.ResponseNoPermission {
		t.Fatalf("send to the timer topic: %d %s", r.Code, r.Remark)
	}
	batch, err := wire.EncodeBatch([]wire.BatchEntry{{Body: []byte("b"), Properties: timerProps(wire.PropertyTimerDelaySec, 5)}})
	if err != nil {
		t.Fatal(err)
	}
	ext := sendExt("TC", 0, "")
	ext["batch"] = "true"
	r = pc.call(leader, remoting.RequestSendBatchMessage, ext, batch)
	if r.Code != remoting.ResponseMessageIllegal || !strings.Contains(r.Remark, "timer property") {
		t.Fatalf("batch with a timer: %d %s", r.Code, r.Remark)
	}
}

// TestTimerAcrossLeaderChange: timer messages due over three seconds, the
// leader killed while they fire: every one reaches its real topic and
// queue, none before its time, on every replica.
func TestTimerAcrossLeaderChange(t *testing.T) {
	t.Parallel()
	// Production timings: a leader may lose its lease on a loaded
	// machine before the kill too, so requests go to the current leader.
	pc := startRealCluster(t, withProdRaftTimings)
	const topic, n = "TL", 60
	pc.createTopicOnLeader(topic, 4)
	start := time.Now().UnixMilli()
	for i := 0; i < n; i++ {
		at := start + 500 + int64(i)*50
		props := timerProps([]string{wire.PropertyTimerDeliverMs, wire.PropertyStartDeliverTime}[i%2], at)
		if i%3 == 2 {
			props = timerProps(wire.PropertyTimerDelayMs, at-time.Now().UnixMilli())
		}
		if _, r := pc.callOnLeader(remoting.RequestSendMessage, sendExt(topic, i%4, props), []byte(fmt.Sprintf("t%d", i))); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send %d: %d %s", i, r.Code, r.Remark)
		}
	}
	old := pc.leader()
	testutil.WaitFor(t, 20*time.Second, "a third of the timers delivered", func() bool {
		return len(readTopic(t, pc.groups[old], topic, 4)) >= n/3
	})
	old = pc.leader()
	pc.stopNode(old)
	l := pc.leader()
	testutil.WaitFor(t, 30*time.Second, "every timer delivered after the leader change", func() bool {
		return len(readTopic(t, pc.groups[l], topic, 4)) == n
	})
	got := readTopic(t, pc.groups[l], topic, 4)
	dups := 0
	for i := 0; i < n; i++ {
		d := got[fmt.Sprintf("t%d", i)]
		due := start + 500 + int64(i)*50
		switch {
		case d.timerOut == 0:
			// Its send reached the broker after its due time (a loaded
			// box): stored as a plain message, as RocketMQ does.
			if d.storedMs < due {
				t.Errorf("t%d stored at %d as a plain message, before its due time %d", i, d.storedMs, due)
			}
		case d.storedMs < d.timerOut || d.timerOut < due-5:
			t.Errorf("t%d stored at %d, due %d", i, d.storedMs, d.timerOut)
		}
		if d.realTopic != topic {
			t.Errorf("t%d in %s", i, d.realTopic)
		}
		dups += d.copies - 1
	}
	t.Logf("%d timers delivered, %d re-delivered across the leader change", n, dups)
	pc.startNode(old)
	testutil.WaitFor(t, 20*time.Second, "the restarted member holds every timer", func() bool {
		return len(readTopic(t, pc.groups[old], topic, 4)) == n
	})
	// The cursor passed every bucket but its own, whose file goes when
	// it moves on.
	for i, g := range pc.groups {
		if b := g.TimerIndex().Buckets(); b > 1 {
			t.Errorf("member %d's index holds %d buckets", i, b)
		}
	}
}

// TestTimerRetentionPin: a pending timer's message pins the CommitLog
// against retention on every replica.
func TestTimerRetentionPin(t *testing.T) {
	pc := startRealCluster(t, nil)
	leader := pc.nodes[pc.leader()].Addr()
	pc.createTopic(leader, "TP", 1)
	for i := 0; i < 3; i++ {
		if r := pc.call(leader, remoting.RequestSendMessage, sendExt("TP", 0, ""), []byte("plain")); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send: %d %s", r.Code, r.Remark)
		}
	}
	for _, g := range pc.groups {
		if pin := g.timerPin(); pin != math.MaxInt64 {
			t.Fatalf("pin %d without timers", pin)
		}
	}
	due := time.Now().Add(time.Hour).UnixMilli()
	if r := pc.call(leader, remoting.RequestSendMessage, sendExt("TP", 0, timerProps(wire.PropertyTimerDeliverMs, due)), []byte("later")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	for i, g := range pc.groups {
		gi := g
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("member %d pins its timer message", i), func() bool {
			cq := gi.Store().ConsumeQueues().Get(wire.TopicTimer, 0)
			if cq == nil {
				return false
			}
			u, err := cq.Get(0)
			return err == nil && gi.timerPin() == u.PhyOffset
		})
	}
}

// TestTimerDeliveredPinsNothing: once its timers have fired, no member's
// timer index pins the CommitLog. The cursor stayed on the last delivered
// bucket until a later timer came due, and that bucket's records kept the
// segment holding their message, and every later one, from retention
// (fileReservedTime and disk-full deletion alike) for as long as no timer
// followed.
func TestTimerDeliveredPinsNothing(t *testing.T) {
	t.Parallel()
	pc := startRealCluster(t, nil)
	leader := pc.nodes[pc.createTopicOnLeader("TD", 1)].Addr()
	due := time.Now().Add(time.Second).UnixMilli()
	if r := pc.call(leader, remoting.RequestSendMessage, sendExt("TD", 0, timerProps(wire.PropertyTimerDeliverMs, due)), []byte("once")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	for i, g := range pc.groups {
		gi := g
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("member %d holds the delivered timer", i), func() bool {
			return len(readTopic(t, gi, "TD", 1)) == 1
		})
		testutil.WaitFor(t, 10*time.Second, fmt.Sprintf("member %d's index pins nothing once its timer fired", i), func() bool {
			return gi.timerPin() == math.MaxInt64 && gi.TimerIndex().Buckets() == 0
		})
	}
	// A timer sent after the cursor moved on is still delivered.
	due = time.Now().Add(time.Second).UnixMilli()
	if r := pc.call(leader, remoting.RequestSendMessage, sendExt("TD", 0, timerProps(wire.PropertyTimerDeliverMs, due)), []byte("again")); r.Code != remoting.ResponseSuccess {
		t.Fatalf("send: %d %s", r.Code, r.Remark)
	}
	g := pc.groups[pc.leader()]
	testutil.WaitFor(t, 10*time.Second, "the second timer delivered", func() bool { return len(readTopic(t, g, "TD", 1)) == 2 })
	for body, d := range readTopic(t, g, "TD", 1) {
		if d.copies != 1 || d.storedMs < d.timerOut {
			t.Errorf("%s: %d copies, stored at %d, due %d", body, d.copies, d.storedMs, d.timerOut)
		}
	}
}

// TestTimerIdempotentProducer: an idempotent producer numbers its sends
// per real queue; two timer messages with the same number for two queues
// are both delivered, a retry of one is recognised, and both are re-put
// without the idempotence properties.
func TestTimerIdempotentProducer(t *testing.T) {
	t.Parallel()
	pc := startRealCluster(t, nil)
	leader := pc.nodes[pc.createTopicOnLeader("TI", 2)].Addr()
	// Far enough ahead that all three sends (slow under -race on a loaded
	// machine) arrive before it: a due time already past makes a plain
	// message, which the timer metrics below would not count.
	due := time.Now().Add(2 * time.Second).UnixMilli()
	props := timerProps(wire.PropertyTimerDeliverMs, due) + wire.PropertyProducerID + "\x01p1\x02" + wire.PropertySequence + "\x011\x02"
	var offsets []string
	for i, send := range []struct {
		queue int
		body  string
	}{{0, "a"}, {1, "b"}, {0, "a"}} {
		r := pc.call(leader, remoting.RequestSendMessage, sendExt("TI", send.queue, props), []byte(send.body))
		if r.Code != remoting.ResponseSuccess {
			t.Fatalf("send %d: %d %s", i, r.Code, r.Remark)
		}
		offsets = append(offsets, r.ExtFields["queueOffset"])
	}
	if offsets[0] != offsets[2] || offsets[0] == offsets[1] {
		t.Fatalf("timer-topic offsets %v: the retry must repeat the first, the other queue's must differ", offsets)
	}
	g := pc.groups[pc.leader()]
	testutil.WaitFor(t, 10*time.Second, "both timers delivered", func() bool { return len(readTopic(t, g, "TI", 2)) == 2 })
	for body, d := range readTopic(t, g, "TI", 2) {
		if d.copies != 1 {
			t.Errorf("%s delivered %d times", body, d.copies)
		}
	}
	// Summed over the members: on a loaded machine leadership (and with it
	// the timer service) can move while the timers fire. The service counts
	// a delivery after its re-put is applied, so a replica can show the
	// messages a moment before the counters do.
	sum := func() map[string]float64 {
		s := map[string]float64{}
		for _, n := range pc.nodes {
			fams, err := n.metrics.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			mf := map[string]*dto.MetricFamily{}
			for _, f := range fams {
				mf[f.GetName()] = f
			}
			for _, name := range []string{"raftmq_broker_timer_delivered_total", "raftmq_broker_timer_fire_delay_seconds", "raftmq_broker_timer_skipped_total"} {
				v, _ := metricValue(mf, name)
				s[name] += v
			}
		}
		return s
	}
	testutil.WaitFor(t, 10*time.Second, "both deliveries counted", func() bool {
		return sum()["raftmq_broker_timer_delivered_total"] >= 2
	})
	got := sum()
	for name, want := range map[string]float64{"raftmq_broker_timer_delivered_total": 2, "raftmq_broker_timer_fire_delay_seconds": 2,
		"raftmq_broker_timer_skipped_total": 0} {
		if got[name] != want {
			t.Errorf("%s summed over the members = %v, want %v", name, got[name], want)
		}
	}
	for q := int32(0); q < 2; q++ {
		res, err := g.Store().GetMessage("", "TI", q, 0, 1, nil)
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("queue %d: %v %v", q, res.Status, err)
		}
		m, _, _ := wire.DecodeMessage(res.Messages[0], false)
		if m.Properties[wire.PropertyProducerID] != "" || m.Properties[wire.PropertySequence] != "" {
			t.Errorf("re-put keeps the idempotence properties: %v", m.Properties)
		}
	}
}

// TestTimerDueDelayLevelWinsOnlyAboveZero: as in RocketMQ
// (getDelayTimeLevel() > 0), only a DELAY level above 0 takes precedence
// over a timer property; "-1", "0" or "00" leave the timer in force.
func TestTimerDueDelayLevelWinsOnlyAboveZero(t *testing.T) {
	c := &Controller{}
	c.cfg.TimerMaxDelaySec = 3600
	for level, want := range map[string]timerVerdict{"": timerHeld, "0": timerHeld, "00": timerHeld, "-1": timerHeld, "3": timerOverridden, "x": timerOverridden} {
		props := map[string]string{wire.PropertyTimerDelaySec: "60"}
		if level != "" {
			props[wire.PropertyDelayTimeLevel] = level
		}
		if _, got, r := c.timerDue(props); got != want || r != nil {
			t.Errorf("DELAY=%q with a timer: verdict %v (%v), want %v", level, got, r, want)
		}
	}
}

// TestTimerDueNegativeDelayIsNormal: a relative delay below zero, of any
// size, is due already (RocketMQ: deliverMs <= now is a normal message),
// never refused as too far ahead.
func TestTimerDueNegativeDelayIsNormal(t *testing.T) {
	c := &Controller{}
	c.cfg.TimerMaxDelaySec = 3600
	for _, name := range []string{wire.PropertyTimerDelaySec, wire.PropertyTimerDelayMs} {
		for _, v := range []string{"-1", "-1099511627777", "-1125899906842625", "-9223372036854775808"} {
			if _, verdict, r := c.timerDue(map[string]string{name: v}); verdict != timerNone || r != nil {
				t.Errorf("%s=%s: verdict %v, %v; want a normal message", name, v, verdict, r)
			}
		}
	}
}
