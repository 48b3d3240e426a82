package broker

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/testutil"
)

// Availability benchmarks (each iteration is one whole
// measurement series; run with -benchtime 1x):
//
//	go test -run '^$' -bench 'GroupLeaderKill|GroupTransferGap|GroupRestart' -benchtime 1x -v ./broker/

// ackStream keeps a steady stream of idempotent sends going to whoever
// leads and records when each ack arrived and from which node.
type ackStream struct {
	c    *testCluster
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	acks []streamAck
}

type streamAck struct {
	at   time.Time
	node string
}

func (c *testCluster) startStream(senders int) *ackStream {
	s := &ackStream{c: c, stop: make(chan struct{})}
	round := sendRound.Add(1)
	for i := 0; i < senders; i++ {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			pid := fmt.Sprintf("s%dp%d", round, i)
			for seq := int64(0); ; seq++ {
				select {
				case <-s.stop:
					return
				default:
				}
				m := testMessage("T", int32(seq%4), fmt.Sprintf("s%d-%d-%d", round, i, seq), pid, seq, 256)
				for {
					n, g := c.currentLeaderGroup()
					if g == nil {
						select {
						case <-s.stop:
							return
						case <-time.After(2 * time.Millisecond): // client retry delay
						}
						continue
					}
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					_, err := g.PutMessages(ctx, []*store.Message{m})
					cancel()
					if err == nil {
						s.mu.Lock()
						s.acks = append(s.acks, streamAck{at: time.Now(), node: n.id})
						s.mu.Unlock()
						break
					}
					select {
					case <-s.stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
				}
			}
		}()
	}
	return s
}

func (s *ackStream) close() {
	close(s.stop)
	s.wg.Wait()
}

// firstAckAfter returns the first ack after t from a node other than skip.
func (s *ackStream) firstAckAfter(t time.Time, skip string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.acks {
		if a.at.After(t) && a.node != skip {
			return a.at, true
		}
	}
	return time.Time{}, false
}

// maxGap is the longest interval without an ack within [from, to].
func (s *ackStream) maxGap(from, to time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := from
	var gap time.Duration
	for _, a := range s.acks {
		if a.at.Before(from) {
			continue
		}
		if a.at.After(to) {
			break
		}
		gap = max(gap, a.at.Sub(prev))
		prev = a.at
	}
	return max(gap, to.Sub(prev))
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func indexOf(c *testCluster, n *testNode) int {
	for i, x := range c.nodes {
		if x == n {
			return i
		}
	}
	return -1
}

// BenchmarkGroupLeaderKill: a steady stream of sends; the leader is killed
// (process-style) and the time to the first ack from another node is taken.
// Seven kills; reports the median and the worst.
func BenchmarkGroupLeaderKill(b *testing.B) {
	for it := 0; it < b.N; it++ {
		c := newTestCluster(b, clusterOpts{prodTimings: true, disk: true, sync: true})
		c.createTopic("T", 4)
		s := c.startStream(8)
		var ds []time.Duration
		for k := 0; k < 7; k++ {
			l := c.leader()
			c.waitCaughtUp()
			testutil.WaitFor(b, 5*time.Second, "acks flowing", func() bool {
				_, ok := s.firstAckAfter(time.Now().Add(-50*time.Millisecond), "")
				return ok
			})
			i := indexOf(c, l)
			killedAt := time.Now()
			c.kill(i)
			var first time.Time
			testutil.WaitFor(b, 10*time.Second, "an ack from a new leader", func() bool {
				var ok bool
				first, ok = s.firstAckAfter(killedAt, l.id)
				return ok
			})
			ds = append(ds, first.Sub(killedAt))
			b.Logf("kill %d: %s killed, first ack after %v", k, l.id, first.Sub(killedAt).Round(time.Millisecond))
			c.start(i)
		}
		s.close()
		b.ReportMetric(float64(median(ds).Milliseconds()), "median-ms")
		b.ReportMetric(float64(slicesMax(ds).Milliseconds()), "max-ms")
		for i := range c.nodes {
			c.stop(i)
		}
	}
}

func slicesMax(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// BenchmarkGroupTransferGap: a steady stream of sends across a leadership
// transfer; the gap is the longest interval without any ack from the
// transfer's start until 500 ms after it returned. Seven transfers.
func BenchmarkGroupTransferGap(b *testing.B) {
	for it := 0; it < b.N; it++ {
		c := newTestCluster(b, clusterOpts{prodTimings: true, disk: true, sync: true})
		c.createTopic("T", 4)
		s := c.startStream(8)
		var gaps []time.Duration
		for k := 0; k < 7; k++ {
			l := c.leader()
			c.waitCaughtUp()
			start := time.Now()
			if err := l.g().TransferLeadership(""); err != nil {
				b.Fatalf("transfer %d: %v", k, err)
			}
			done := time.Now()
			testutil.WaitFor(b, 10*time.Second, "acks after the transfer", func() bool {
				_, ok := s.firstAckAfter(done.Add(500*time.Millisecond), "")
				return ok
			})
			gap := s.maxGap(start, done.Add(500*time.Millisecond))
			gaps = append(gaps, gap)
			b.Logf("transfer %d from %s: returned after %v, longest ack gap %v", k, l.id,
				done.Sub(start).Round(time.Millisecond), gap.Round(time.Millisecond))
		}
		s.close()
		b.ReportMetric(float64(median(gaps).Milliseconds()), "median-gap-ms")
		b.ReportMetric(float64(slicesMax(gaps).Milliseconds()), "max-gap-ms")
		for i := range c.nodes {
			c.stop(i)
		}
	}
}

// BenchmarkGroupRestart fills the log (256 MiB; 2 GiB with RAFTMQ_LONG=1)
// with 4 KiB messages under the default snapshot settings, then measures
// (a) a follower's clean restart and (b) a killed follower's restart until
// it applied the leader's commit index, and (c) a cold restart of the
// whole group until a leader serves.
func BenchmarkGroupRestart(b *testing.B) {
	size := int64(256 << 20)
	if longRun() {
		size = 2 << 30
	}
	for it := 0; it < b.N; it++ {
		c := newTestCluster(b, clusterOpts{prodTimings: true, disk: true, sync: true, segmentSize: 64 << 20, tune: func(g *GroupConfig) {
			d := DefaultGroupConfig()
			g.Raft.SnapshotInterval, g.Raft.SnapshotThreshold = d.Raft.SnapshotInterval, d.Raft.SnapshotThreshold
		}})
		c.createTopic("T", 4)
		const body = 4 << 10
		total := int(size / (body + 200))
		t0 := time.Now()
		c.sendConcurrently(64, total, body, 4, nil)
		b.Logf("filled %d messages (%d MiB) in %v", total, size>>20, time.Since(t0).Round(time.Millisecond))
		l := c.leader()
		fi := (indexOf(c, l) + 1) % len(c.nodes)
		f := c.nodes[fi]

		c.waitCaughtUp()
		c.stop(fi)
		start := time.Now()
		c.start(fi)
		opened := time.Since(start)
		c.waitCaughtUp()
		clean := time.Since(start)

		c.kill(fi)
		start = time.Now()
		c.start(fi)
		kopened := time.Since(start)
		c.waitCaughtUp()
		killed := time.Since(start)
		b.Logf("%s restart: clean %v (open %v), after kill %v (open %v)", f.id, clean.Round(time.Millisecond),
			opened.Round(time.Millisecond), killed.Round(time.Millisecond), kopened.Round(time.Millisecond))

		for i := range c.nodes {
			c.stop(i)
		}
		start = time.Now()
		for i := range c.nodes {
			c.start(i)
		}
		nl := c.leader()
		if _, err := c.sendRetrying(testMessage("T", 0, "after-restart", "", 0, 64), time.Now().Add(30*time.Second)); err != nil {
			b.Fatal(err)
		}
		cold := time.Since(start)
		b.Logf("cold group restart: leader %s serving and first write acked after %v", nl.id, cold.Round(time.Millisecond))
		b.ReportMetric(float64(clean.Milliseconds()), "clean-restart-ms")
		b.ReportMetric(float64(killed.Milliseconds()), "kill-restart-ms")
		b.ReportMetric(float64(cold.Milliseconds()), "cold-group-ms")
		for i := range c.nodes {
			c.stop(i)
		}
	}
}
