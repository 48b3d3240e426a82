package ha

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// RolesConfig configures a role observer.
type RolesConfig struct {
	// Raft is the member to observe.
	Raft *raft.Raft
	// BarrierTimeout bounds the new leader's barrier (default 5 s).
	BarrierTimeout time.Duration
	// ReconcileInterval is how often the observer re-checks the Raft state
	// besides reacting to observations (default 100 ms): observations are
	// dropped when the channel is full, so they only speed things up.
	ReconcileInterval time.Duration
	// BeforeLeader runs on a new leader after its barrier and before it is
	// reported as leader (the group proposes its remoting address there).
	// An error keeps the node from serving; the next round retries.
	BeforeLeader func(term uint64) error
	// Log receives role changes (nil: zap.NewNop()).
	Log *zap.Logger
}

// Roles tracks whether this member may serve writes. It observes Raft with
// RegisterObserver (LeaderCh is lossy) plus a periodic reconcile, and when
// the node becomes leader it first runs Barrier (so every entry of previous
// terms is applied: the replicated tables and queue offsets are current),
// then BeforeLeader, and only then reports leadership and calls the
// listeners. Listeners run on one goroutine, in order.
type Roles struct {
	cfg RolesConfig
	log *zap.Logger

	leader atomic.Bool
	term   atomic.Uint64

	mu        sync.Mutex
	listeners []func(leader bool, term uint64) // guarded by mu
	// lastLeader is the last non-empty leader id observed; lostAt maps
	// a member id to when another member was first seen leading after it.
	lastLeader string               // guarded by mu
	lostAt     map[string]time.Time // guarded by mu

	obsCh    chan raft.Observation
	observer *raft.Observer
	quit     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// NewRoles starts observing cfg.Raft.
func NewRoles(cfg RolesConfig) *Roles {
	if cfg.BarrierTimeout <= 0 {
		cfg.BarrierTimeout = 5 * time.Second
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = 100 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	r := &Roles{cfg: cfg, log: cfg.Log, obsCh: make(chan raft.Observation, 16),
		quit: make(chan struct{}), done: make(chan struct{})}
	r.observer = raft.NewObserver(r.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	cfg.Raft.RegisterObserver(r.observer)
	go r.run()
	return r
}

// IsLeader reports whether this node is leader and finished its barrier.
func (r *Roles) IsLeader() bool { return r.leader.Load() }

// Term is the term in which this node last became leader (0 if never).
func (r *Roles) Term() uint64 { return r.term.Load() }

// LostLeadershipAt is when this node saw another member take leadership
// over from member id, most recently (zero if never). Observations can be
// dropped under a burst of changes, so it is a hint.
func (r *Roles) LostLeadershipAt(id string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lostAt[id]
}

func (r *Roles) noteLeader(id string) {
	if id == "" {
		return // an election: the previous leader stays the last one
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastLeader != "" && r.lastLeader != id {
		if r.lostAt == nil {
			r.lostAt = map[string]time.Time{}
		}
		r.lostAt[r.lastLeader] = time.Now()
	}
	r.lastLeader = id
}

// OnChange registers f for role changes.
func (r *Roles) OnChange(f func(leader bool, term uint64)) {
	r.mu.Lock()
	r.listeners = append(r.listeners, f)
	r.mu.Unlock()
}

// Close stops observing. The node reports not-leader afterwards.
func (r *Roles) Close() {
	r.once.Do(func() {
		r.cfg.Raft.DeregisterObserver(r.observer)
		close(r.quit)
		<-r.done
		r.leader.Store(false)
	})
}

func (r *Roles) run() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-r.quit:
			return
		case o := <-r.obsCh:
			if lo, ok := o.Data.(raft.LeaderObservation); ok {
				r.noteLeader(string(lo.LeaderID))
			}
		case <-t.C:
		}
		r.reconcile()
	}
}

func (r *Roles) reconcile() {
	rf := r.cfg.Raft
	isLeader := rf.State() == raft.Leader
	switch {
	case isLeader && !r.leader.Load():
		term := rf.CurrentTerm()
		if err := rf.Barrier(r.cfg.BarrierTimeout).Error(); err != nil {
			r.log.Info("leader barrier failed; retrying", zap.Uint64("term", term), zap.Error(err))
			return
		}
		if r.cfg.BeforeLeader != nil {
			if err := r.cfg.BeforeLeader(term); err != nil {
				r.log.Info("leader preparation failed; retrying", zap.Uint64("term", term), zap.Error(err))
				return
			}
		}
		if rf.State() != raft.Leader || rf.CurrentTerm() != term {
			return
		}
		r.term.Store(term)
		r.leader.Store(true)
		r.log.Info("became leader", zap.Uint64("term", term))
		r.notify(true, term)
	case isLeader && r.leader.Load() && rf.CurrentTerm() != r.term.Load():
		// Lost and regained leadership between two looks: serve only after
		// a barrier in the new term.
		r.leader.Store(false)
		r.notify(false, r.term.Load())
	case !isLeader && r.leader.Load():
		r.leader.Store(false)
		r.log.Info("stopped being leader", zap.Uint64("term", r.term.Load()))
		r.notify(false, r.term.Load())
	}
}

func (r *Roles) notify(leader bool, term uint64) {
	r.mu.Lock()
	ls := append([]func(bool, uint64){}, r.listeners...)
	r.mu.Unlock()
	for _, f := range ls {
		f(leader, term)
	}
}
