package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Probes: each looks at one party's view of the failover the way an
// operator or client would — the name server's gossip gauge, a member's
// RAFT_STATUS (30001), the name server's route (105), the SDK's acks.

// liveGauge is the name server's gauge of broker nodes alive in its
// gossip pool.
const liveGauge = "raftmq_namesrv_gossip_live_brokers"

// probes holds the connections the probes share.
type probes struct {
	c     *procCluster
	rc    *remoting.Client
	admin *client.Admin
	topic string
}

// gossipLive scrapes the name server's /metrics for liveGauge.
func (p *probes) gossipLive(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.c.NS.MetricsAddr()+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := p.c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, liveGauge+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("failover: bad %s line %q", liveGauge, line)
			}
			return int(f), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("failover: name server /metrics has no %s", liveGauge)
}

// raftStatus asks one member for RAFT_STATUS.
func (p *probes) raftStatus(ctx context.Context, addr string) (*broker.RaftStatus, error) {
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	resp, err := p.rc.InvokeSync(cctx, addr, remoting.NewRequest(remoting.RequestRaftStatus, nil, nil))
	if err != nil {
		return nil, err
	}
	if err := remoting.ResponseError(addr, resp); err != nil {
		return nil, err
	}
	var st broker.RaftStatus
	if err := json.Unmarshal(resp.Body, &st); err != nil {
		return nil, fmt.Errorf("failover: raft status from %s: %w", addr, err)
	}
	return &st, nil
}

// caughtUp reports why the followers' logs are not caught up with the
// leader's, "" when they are: each follower's last log index must reach
// the commit index the leader had just before (the log keeps growing under
// load, so equality is never awaited), in the leader's term (a restarted
// old leader may hold a longer tail of its own term that the new leader
// will cut); and no member may still be working through entries queued for
// its FSM (replayed).
func (p *probes) caughtUp(ctx context.Context) string {
	var commit, term uint64
	leader := ""
	for _, n := range p.c.Nodes {
		st, err := p.raftStatus(ctx, n.Addr())
		if err != nil {
			return fmt.Sprintf("%s raft status: %v", n.ID, err)
		}
		if why := fsmBehind(n.ID, st); why != "" {
			return why
		}
		if st.State == raft.Leader.String() {
			commit, term, leader = st.CommitIndex, st.Term, n.ID
			break
		}
	}
	if leader == "" {
		return "no member reports itself leader"
	}
	for _, n := range p.c.Nodes {
		if n.ID == leader {
			continue
		}
		st, err := p.raftStatus(ctx, n.Addr())
		if err != nil {
			return fmt.Sprintf("%s raft status: %v", n.ID, err)
		}
		if st.LastLogIndex < commit || st.LastLogTerm != term {
			return fmt.Sprintf("%s's log ends at %d in term %d, the leader had committed %d in term %d",
				n.ID, st.LastLogIndex, st.LastLogTerm, commit, term)
		}
		if why := fsmBehind(n.ID, st); why != "" {
			return why
		}
	}
	return ""
}

// fsmBehind reports why member id's FSM has not applied what its Raft
// applied index claims, "" when it has. A restarted member re-applies its
// whole log since its last snapshot (none is taken between kills: the
// snapshot threshold is far above a report's log), and Raft's applied
// index moves when a batch of entries is queued for the FSM, up to 128
// batches of raftMaxAppendEntries before the FSM applied them; /readyz
// allows one batch, this nothing queued. Killed then, the
// member would still be replaying; if it won the election its barrier, and
// so the first write, would wait for the rest of the replay, which grows
// with the log kill after kill. At most the batch the FSM is applying
// stays unseen.
func fsmBehind(id string, st *broker.RaftStatus) string {
	if st.AppliedIndex < st.CommitIndex || st.FSMPending > 0 {
		return fmt.Sprintf("%s's FSM is behind: applied index %d, commit %d, %d batches queued for the FSM",
			id, st.AppliedIndex, st.CommitIndex, st.FSMPending)
	}
	return ""
}

// route returns the group's brokerAddrs in the name server's route for
// the report's topic (nil when the group is not routed).
func (p *probes) route(ctx context.Context) (map[int64]string, error) {
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	rd, err := p.admin.TopicRoute(cctx, p.topic)
	if err != nil {
		return nil, err
	}
	for _, bd := range rd.BrokerDatas {
		if bd.BrokerName == failoverGroup {
			return bd.BrokerAddrs, nil
		}
	}
	return nil, nil
}

// members returns the group's brokerAddrs in the name server's cluster
// info (GET_BROKER_CLUSTER_INFO), which needs no topic.
func (p *probes) members(ctx context.Context) (map[int64]string, error) {
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	ci, err := p.admin.ClusterInfo(cctx)
	if err != nil {
		return nil, err
	}
	return ci.BrokerAddrTable[failoverGroup].BrokerAddrs, nil
}

// routeLeader is the route's brokerId 0 address, "" when none.
func routeLeader(addrs map[int64]string) string { return addrs[wire.MasterID] }

// routeHas reports whether addr is any member of the route.
func routeHas(addrs map[int64]string, addr string) bool {
	for _, a := range addrs {
		if a == addr {
			return true
		}
	}
	return false
}

// ackWatch records acks for the kill being measured: the first ack
// received after the kill instant from a broker other than the killed one.
type ackWatch struct {
	mu      sync.Mutex
	since   time.Time // guarded by mu; zero = not measuring
	notAddr string    // guarded by mu
	first   time.Time // guarded by mu
	// consumed is when the push consumer had delivered, from every queue,
	// a message whose send started after since (zero if not yet); queues
	// are those that had.
	consumed time.Time      // guarded by mu
	queues   map[int32]bool // guarded by mu
	acks     int64          // guarded by mu
	errs     int64          // guarded by mu
	lastErr  error          // guarded by mu
}

// arm starts watching for the first ack after at not from notAddr.
func (w *ackWatch) arm(at time.Time, notAddr string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.since, w.notAddr, w.first, w.consumed, w.queues = at, notAddr, time.Time{}, time.Time{}, nil
}

// record notes one send outcome.
func (w *ackWatch) record(res *client.SendResult, err error, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.errs++
		w.lastErr = err
		return
	}
	w.acks++
	if !w.since.IsZero() && w.first.IsZero() && at.After(w.since) && res.Addr != w.notAddr {
		w.first = at
	}
}

// firstAck is the first qualifying ack, zero if none yet.
func (w *ackWatch) firstAck() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

// counts returns acks, errors and the last error.
func (w *ackWatch) counts() (int64, int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acks, w.errs, w.lastErr
}

// produce sends small messages with n concurrent synchronous senders until
// ctx ends, recording each outcome in w. Each send may take as long as an
// election: the SDK retries internally within its send timeout.
func produce(ctx context.Context, p *client.Producer, topic string, n int, w *ackWatch, wg *sync.WaitGroup) {
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				// Each body starts with its send's start time, for the
				// consumer's resume measurement (failover_consume.go).
				body := []byte(strings.Repeat("f", 256))
				binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				res, err := p.SendSync(sctx, client.NewMessage(topic, body))
				cancel()
				if ctx.Err() != nil {
					return
				}
				w.record(res, err, time.Now())
				if err != nil {
					// A failed send returns at once when no broker is
					// reachable; pace retries instead of spinning.
					t := time.NewTimer(20 * time.Millisecond)
					select {
					case <-ctx.Done():
					case <-t.C:
					}
					t.Stop()
				}
			}
		}()
	}
}
