package ha

import (
	"fmt"
	"strings"
	"sync"
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
// the preferred node and the preferred node is a healthy voter, and if so
// transfers to it. Raft's transfer first catches the target up and gives up
// if it cannot, so an unreachable or far-behind node is simply retried later
// (with a backoff). A leader that took over from the preferred node keeps
// leadership for PreferredLeaderSettle first: when the preferred node
// handed leadership over itself (a planned stop, a disk step-down, an
// admin's transfer) it must not get it straight back, while it is still
// shutting down.
type PreferredLeader struct {
	r        *raft.Raft
	self     string
	want     string
	interval time.Duration
	roles    *Roles
	log      *zap.Logger
	quit     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// PreferredLeaderSettle is the least time a leader that took over from the
// preferred member keeps leadership before moving it back: longer than the
// rest of a planned stop of that member usually takes (well under a
// second). Three check intervals when that is longer.
const PreferredLeaderSettle = 2 * time.Second

// NewPreferredLeader starts the check; a "" preferred id makes it a no-op.
func NewPreferredLeader(r *raft.Raft, roles *Roles, self, preferred string, interval time.Duration, log *zap.Logger) *PreferredLeader {
	if log == nil {
		log = zap.NewNop()
	}
	p := &PreferredLeader{r: r, roles: roles, self: self, want: preferred, interval: interval, log: log,
		quit: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *PreferredLeader) run() {
	defer close(p.done)
	if p.want == "" || p.want == p.self {
		<-p.quit
		return
	}
	backoff := p.interval
	settle := max(PreferredLeaderSettle, 3*p.interval)
	t := time.NewTimer(p.interval)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
		}
		next := p.interval
		if p.roles.IsLeader() && time.Since(p.roles.LostLeadershipAt(p.want)) >= settle {
			if err := TransferLeadership(p.r, p.want); err != nil {
				p.log.Info("transfer to the preferred leader failed; will retry",
					zap.String("preferred", p.want), zap.Error(err), zap.Duration("in", backoff))
				next = backoff
				backoff = min(2*backoff, 30*time.Second)
			} else {
				p.log.Info("leadership moved to the preferred leader", zap.String("preferred", p.want))
				backoff = p.interval
			}
		}
		t.Reset(next)
	}
}

// Close stops the check.
func (p *PreferredLeader) Close() {
	p.once.Do(func() {
		close(p.quit)
		<-p.done
	})
}
