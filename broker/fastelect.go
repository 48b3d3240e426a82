package broker

import (
	"errors"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// Fast election on process death (docs/adr/0018-fast-election-on-process-death.md).
//
// A killed leader's kernel closes its sockets at once: every connection it
// had dialed to a follower ends (the follower's inbound Raft connections
// read EOF or a reset) and a dial to its Raft port is refused. A silent
// failure (freeze, partition, dead host) closes nothing. So an inbound
// connection that ends makes the follower dial the leader's Raft address;
// only a refused dial, before the leader has been heard from again, counts
// as "the leader's process is gone". Then one survivor, chosen the same way
// by all of them, campaigns at once through Raft's own TimeoutNow RPC sent
// to itself — the path a leadership transfer takes, whose vote requests the
// other members grant although they still remember a leader (without that
// flag they refuse votes until their own heartbeat timeout passes, which is
// the delay this removes). Voting rules are unchanged: a candidate whose
// log is behind is still refused.
//
// Only one survivor starts at once, or two candidates would split the
// votes and both wait an election timeout: the voters other than the dead
// leader, ordered by id, campaign one after another, raftFastElectionStagger
// apart, each only while nobody leads yet and no campaign it would vote for
// has reached it. The first normally wins. If its log is behind a voter's
// (a member restarted moments ago and still catching up), that voter
// refuses it — and, seeing the vote request (a Raft observation),
// campaigns at once instead of waiting for its turn; when that request
// came first, it has cleared the leader this voter knew (a higher term),
// so the voter takes the dead leader from the request. The stagger is only
// the fallback for a first survivor that never campaigns; it must exceed
// the time a candidate takes to send its vote requests (one fsync of the
// stable store), or two campaigns split the votes.

// fastElectionProbes and fastElectionProbeGap bound how long a follower
// keeps probing after an inbound connection ended: a process that is
// exiting may close its connections a moment before its listener.
const (
	fastElectionProbes   = 4
	fastElectionProbeGap = 25 * time.Millisecond
	fastElectionDialWait = 100 * time.Millisecond
)

// closeWatchStream wraps a Raft stream layer and reports every accepted
// connection whose reads end (EOF, reset, closed).
type closeWatchStream struct {
	raft.StreamLayer
	onEnd atomic.Pointer[func()]
}

// Accept implements net.Listener.
func (s *closeWatchStream) Accept() (net.Conn, error) {
	c, err := s.StreamLayer.Accept()
	if err != nil {
		return c, err
	}
	return &closeWatchConn{Conn: c, s: s}, nil
}

type closeWatchConn struct {
	net.Conn
	s    *closeWatchStream
	once sync.Once
}

// Read reports the first failed read to the stream's watcher. Raft's
// handler reads until the connection ends, so that is when it fails.
func (c *closeWatchConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.once.Do(func() {
			if f := c.s.onEnd.Load(); f != nil {
				(*f)()
			}
		})
	}
	return n, err
}

// fastElection runs one member's reaction to a dead leader's closed
// connections.
type fastElection struct {
	r       *raft.Raft
	trans   raft.Transport
	self    raft.ServerID
	stagger time.Duration
	log     *zap.Logger
	// dial checks whether anything listens at addr: nil when it
	// answered, an error wrapping ECONNREFUSED when nothing does.
	dial func(addr string) error

	kick     chan struct{}
	vote     atomic.Pointer[voteSeen] // the latest vote request seen
	voteCh   chan struct{}            // a vote request arrived
	observer *raft.Observer
	quit     chan struct{}
	done     chan struct{}
	// campaigns counts TimeoutNow calls made (tests, metrics).
	campaigns atomic.Uint64
	// standAside, if set and true, keeps this member from campaigning (it
	// is catching up on retained data, catchup_vote.go).
	standAside atomic.Pointer[func() bool]
}

// startFastElection binds trans's close watcher, if it has one, to a new
// fastElection for r and starts it. nil when trans has no watcher (the
// in-memory transport) or stagger is negative (raftFastElectionStagger=-1
// turns the mechanism off).
func startFastElection(trans raft.Transport, r *raft.Raft, self string, stagger time.Duration, log *zap.Logger) *fastElection {
	t, ok := trans.(*raftTransport)
	if !ok || t.watch == nil || stagger < 0 {
		return nil
	}
	f := &fastElection{r: r, trans: trans, self: raft.ServerID(self), stagger: stagger, log: log,
		dial: dialProbe, kick: make(chan struct{}, 1), voteCh: make(chan struct{}, 1),
		quit: make(chan struct{}), done: make(chan struct{})}
	// The filter runs on Raft's goroutine as the request arrives, before
	// Raft acts on it, so the leader it records is the one the request
	// ran against; it passes nothing on.
	f.observer = raft.NewObserver(nil, false, func(o *raft.Observation) bool {
		if req, ok := o.Data.(raft.RequestVoteRequest); ok {
			addr, leader := r.LeaderWithID()
			f.vote.Store(&voteSeen{req: req, at: time.Now(), leader: leader, leaderAddr: addr})
			select {
			case f.voteCh <- struct{}{}:
			default:
			}
		}
		return false
	})
	r.RegisterObserver(f.observer)
	kick := func() {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
	t.watch.onEnd.Store(&kick)
	go f.run()
	return f
}

// dialProbe connects to addr over plain TCP and closes the connection: a
// refused connect means no process listens there.
func dialProbe(addr string) error {
	c, err := net.DialTimeout("tcp", addr, fastElectionDialWait)
	if err != nil {
		return err
	}
	return c.Close()
}

// close stops the loop and waits for it.
func (f *fastElection) close() {
	if f == nil {
		return
	}
	f.r.DeregisterObserver(f.observer)
	close(f.quit)
	<-f.done
}

func (f *fastElection) run() {
	defer close(f.done)
	for {
		select {
		case <-f.quit:
			return
		case <-f.kick:
		}
		f.check(time.Now())
	}
}

// check runs after an inbound connection ended at ended.
func (f *fastElection) check(ended time.Time) {
	if f.r.State() != raft.Follower {
		return
	}
	addr, id := f.r.LeaderWithID()
	if addr == "" {
		// A campaign may have reached this member before its check ran:
		// a vote request that raises the term clears the known leader.
		// The leader that request ran against is the one to probe.
		v := f.vote.Load()
		if v == nil || v.leaderAddr == "" || !v.fresh(ended) {
			return
		}
		addr, id = v.leaderAddr, v.leader
	}
	if id == f.self {
		return
	}
	if !f.leaderGone(addr, id) {
		return
	}
	rank, voters := f.rank(id)
	if aside := f.standAside.Load(); rank < 0 || (aside != nil && (*aside)()) {
		return // not a voter, or catching up: it cannot lead
	}
	f.log.Warn("raft leader's process is gone (its connection ended, its raft port refuses connections)",
		zap.String("leader", string(id)), zap.String("leaderAddr", string(addr)), zap.Int("turn", rank), zap.Int("voters", voters))
	// The first in turn waits for nothing, but it too stands aside for a
	// campaign it granted a vote to: a leader handing over (a transfer)
	// may close its port before the winner's first heartbeat arrives.
	if !f.waitTurn(time.Duration(rank)*f.stagger, id, ended) {
		return
	}
	// Nobody won meanwhile: still a follower that knows no live leader.
	if f.r.State() != raft.Follower {
		return
	}
	if _, now := f.r.LeaderWithID(); now != "" && now != id {
		return
	}
	f.campaign(id)
}

// voteSeen is a vote request as it arrived: when, and which leader this
// member followed then.
type voteSeen struct {
	req        raft.RequestVoteRequest
	at         time.Time
	leader     raft.ServerID
	leaderAddr raft.ServerAddress
}

// fresh reports whether the request may belong to the election that a
// connection ending at ended started.
func (v *voteSeen) fresh(ended time.Time) bool { return v.at.After(ended.Add(-voteFreshness)) }

// voteFreshness bounds how long before the ended connection a vote request
// may have arrived and still belong to this election: the first survivor
// may campaign before this one's reader even noticed the end.
const voteFreshness = 500 * time.Millisecond

// waitTurn waits up to d for an earlier survivor's campaign and reports
// whether this member should campaign now. A vote request against the dead
// leader from a candidate whose log is behind this member's ends the wait
// at once with true (this member refused it, as would any voter as far
// along); one whose log is not behind ends it with false (this member
// granted it, and campaigning too would split the votes: if that campaign
// fails after all, the heartbeat timeout starts the next). False when the
// member closes.
func (f *fastElection) waitTurn(d time.Duration, dead raft.ServerID, ended time.Time) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		if v := f.vote.Load(); v != nil && v.leader == dead && v.fresh(ended) {
			if !f.behindMe(v.req) {
				return false
			}
			f.log.Warn("fast election: the campaigning member's log is behind this one's; campaigning before its turn",
				zap.Uint64("candidateLastIndex", v.req.LastLogIndex), zap.Uint64("candidateLastTerm", v.req.LastLogTerm))
			return true
		}
		select {
		case <-f.quit:
			return false
		case <-t.C:
			return true
		case <-f.voteCh:
		}
	}
}

// behindMe reports whether a candidate with req's log would lose this
// member's vote on log grounds.
func (f *fastElection) behindMe(req raft.RequestVoteRequest) bool {
	st := f.r.Stats()
	lastTerm, _ := strconv.ParseUint(st["last_log_term"], 10, 64)
	lastIndex, _ := strconv.ParseUint(st["last_log_index"], 10, 64)
	return req.LastLogTerm < lastTerm || (req.LastLogTerm == lastTerm && req.LastLogIndex < lastIndex)
}

// leaderGone probes the leader's Raft address until a dial is refused (gone)
// or it answers fastElectionProbes times; it stops early once this member
// follows another leader (knowing none, after a vote request raised its
// term, is not that). Contact from the leader after the connection
// ended proves nothing: Raft may still be applying an AppendEntries that
// was read before the end.
func (f *fastElection) leaderGone(addr raft.ServerAddress, id raft.ServerID) bool {
	for i := 0; i < fastElectionProbes; i++ {
		if i > 0 {
			t := time.NewTimer(fastElectionProbeGap)
			select {
			case <-f.quit:
				t.Stop()
				return false
			case <-t.C:
			}
		}
		if _, now := f.r.LeaderWithID(); now != id && now != "" {
			return false
		}
		if err := f.dial(string(addr)); errors.Is(err, syscall.ECONNREFUSED) {
			return true
		}
	}
	return false
}

// rank is this member's turn among the voters other than dead (0 first)
// and how many there are; -1 when it is no voter.
func (f *fastElection) rank(dead raft.ServerID) (int, int) {
	fut := f.r.GetConfiguration()
	if fut.Error() != nil {
		return -1, 0
	}
	var ids []string
	for _, s := range fut.Configuration().Servers {
		if s.Suffrage == raft.Voter && s.ID != dead {
			ids = append(ids, string(s.ID))
		}
	}
	slices.Sort(ids)
	return slices.Index(ids, string(f.self)), len(ids)
}

// campaign makes this member a candidate now, through the TimeoutNow RPC
// to itself (the transport dials its own address).
func (f *fastElection) campaign(dead raft.ServerID) {
	// A follower's idle pooled connections may lead to processes that
	// have died and restarted since (a member killed earlier); Raft sends
	// each vote request once, on a pooled connection if it has one, and a
	// request lost on a dead connection splits the votes. Dial afresh.
	if cs, ok := f.trans.(interface{ CloseStreams() }); ok {
		cs.CloseStreams()
	}
	self := f.trans.LocalAddr()
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax,
		ID: []byte(f.self), Addr: f.trans.EncodePeer(f.self, self)}}
	if err := f.trans.TimeoutNow(f.self, self, req, &raft.TimeoutNowResponse{}); err != nil {
		f.log.Warn("fast election: could not start a campaign; the heartbeat timeout will", zap.Error(err))
		return
	}
	f.campaigns.Add(1)
	f.log.Warn("fast election: campaigning now", zap.String("deadLeader", string(dead)))
}
