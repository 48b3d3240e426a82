package ha

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// TransferLeadership hands leadership from this node (which must be the
// leader) to the member with id to, or to the most caught-up follower when
// to is "". Raft replicates the target up to the leader's last index, tells
// it to campaign at once (TimeoutNow) and fails the future if that did not
// happen within an election timeout. Writes proposed meanwhile fail with
// raft.ErrLeadershipTransferInProgress; the broker's batcher waits and
// retries them.
func TransferLeadership(r *raft.Raft, to string) error {
	if r.State() != raft.Leader {
		return ErrNotLeader
	}
	if to == "" {
		return r.LeadershipTransfer().Error()
	}
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == to {
			// Raft would send a nonvoter TimeoutNow all the same: it
			// campaigns, cannot win, and its higher term deposes the
			// leader while the transfer reports success.
			if s.Suffrage != raft.Voter {
				return fmt.Errorf("%w: %q is a %s", ErrNotVoter, to, strings.ToLower(s.Suffrage.String()))
			}
			return r.LeadershipTransferToServer(s.ID, s.Address).Error()
		}
	}
	return fmt.Errorf("%w: %q", ErrUnknownServer, to)
}

// PreferredLeader moves leadership back to a preferred member
// (preferredLeaderId): the leader checks every Interval whether it is not
// the preferred node and the preferred node is ready, and if so transfers
// to it. Raft's transfer holds every new write (they fail with
// raft.ErrLeadershipTransferInProgress) while it catches the target up,
// for up to an election timeout, so a transfer is tried only when the
// Ready check finds the preferred member alive and caught up; a tick it
// is not is skipped, not counted as a failure. A transfer that still fails
// is retried later with a backoff. A leader that took over from the
// preferred node keeps leadership for PreferredLeaderSettle first: when
// the preferred node handed leadership over itself (a planned stop, a disk
// step-down, an admin's transfer) it must not get it straight back, while
// it is still shutting down.
type PreferredLeader struct {
	cfg  PreferredLeaderConfig
	log  *zap.Logger
	quit chan struct{}
	done chan struct{}
	once sync.Once

	checked   atomic.Uint64
	attempted atomic.Uint64
}

// PreferredLeaderConfig configures the preferred-leader check.
type PreferredLeaderConfig struct {
	// Raft is this member; Roles its role observer.
	Raft  *raft.Raft
	Roles *Roles
	// Self is this member's Raft id, Preferred the preferredLeaderId ("":
	// the check is a no-op).
	Self, Preferred string
	// Interval is how often the leader checks.
	Interval time.Duration
	// Ready says why leadership should not move to the preferred member
	// right now (down, unreachable, far behind), or nil to try. nil: always
	// try.
	Ready func(id string) error
	// BeforeTransfer, if set, runs before each transfer: what a leader
	// must finish while it still leads.
	BeforeTransfer func()
	// Log receives the transfers and, at debug, the skipped ticks (nil:
	// zap.NewNop()).
	Log *zap.Logger
}

// PreferredLeaderStats counts the check's work since it started.
type PreferredLeaderStats struct {
	// Checked is the ticks on which this member led, past the settle time,
	// and the preferred member was another one.
	Checked uint64
	// Attempted is the transfers tried on those ticks (the others found
	// the preferred member not ready).
	Attempted uint64
}

// PreferredLeaderSettle is the least time a leader that took over from the
// preferred member keeps leadership before moving it back: longer than the
// rest of a planned stop of that member usually takes (well under a
// second). Three check intervals when that is longer.
const PreferredLeaderSettle = 2 * time.Second

// NewPreferredLeader starts the check; a "" preferred id makes it a no-op.
func NewPreferredLeader(cfg PreferredLeaderConfig) *PreferredLeader {
	log := cfg.Log
	if log == nil {
		log = zap.NewNop()
	}
	p := &PreferredLeader{cfg: cfg, log: log, quit: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// Stats returns the counts so far.
func (p *PreferredLeader) Stats() PreferredLeaderStats {
	return PreferredLeaderStats{Checked: p.checked.Load(), Attempted: p.attempted.Load()}
}

func (p *PreferredLeader) run() {
	defer close(p.done)
	want, interval := p.cfg.Preferred, p.cfg.Interval
	if want == "" || want == p.cfg.Self {
		<-p.quit
		return
	}
	backoff := interval
	settle := max(PreferredLeaderSettle, 3*interval)
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
		}
		next := interval
		if p.cfg.Roles.IsLeader() && time.Since(p.cfg.Roles.LostLeadershipAt(want)) >= settle {
			p.checked.Add(1)
			if err := p.ready(); err != nil {
				p.log.Debug("preferred leader not ready; not transferring this round",
					zap.String("preferred", want), zap.Error(err))
			} else if err := p.transfer(); err != nil {
				p.log.Info("transfer to the preferred leader failed; will retry",
					zap.String("preferred", want), zap.Error(err), zap.Duration("in", backoff))
				next = backoff
				backoff = min(2*backoff, 30*time.Second)
			} else {
				p.log.Info("leadership moved to the preferred leader", zap.String("preferred", want))
				backoff = interval
			}
		}
		t.Reset(next)
	}
}

func (p *PreferredLeader) ready() error {
	if p.cfg.Ready == nil {
		return nil
	}
	return p.cfg.Ready(p.cfg.Preferred)
}

func (p *PreferredLeader) transfer() error {
	p.attempted.Add(1)
	if p.cfg.BeforeTransfer != nil {
		p.cfg.BeforeTransfer()
	}
	return TransferLeadership(p.cfg.Raft, p.cfg.Preferred)
}

// Close stops the check.
func (p *PreferredLeader) Close() {
	p.once.Do(func() {
		close(p.quit)
		<-p.done
	})
}
