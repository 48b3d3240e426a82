package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/ha"
)

// Whom leadership goes to. hashicorp/raft's target-less LeadershipTransfer
// picks the voter with the highest next index and knows nothing else of
// it: a voter whose full-data catch-up is pending holds the log's tail, so
// it is often the pick, yet it refuses its own candidacy
// (catchup_vote.go), and a voter that stopped answering keeps its next
// index too. Either way the transfer "succeeds" and the group waits an
// election timeout for another member. So every transfer of this member
// without a target (an admin's, a planned stop, removing itself, the
// disk-full, apply-stopped and damaged-log step-downs) names one:
// transferTarget picks among the voters that answer this leader the most
// caught-up one that is able to campaign. A transfer to a named member,
// and the preferred-leader check, refuse a member catching up.

// ErrNoTransferTarget is returned by a leadership transfer without a
// target when no other voter can take leadership over now; the message
// says why for each.
var ErrNoTransferTarget = errors.New("broker: no member can take leadership over now")

// ErrTargetCatchingUp is returned by a leadership transfer to a member
// whose full-data catch-up is pending: told to campaign it could not, and
// the group would be without a leader for an election timeout. The
// preferred-leader check waits for the catch-up instead.
var ErrTargetCatchingUp = errors.New("broker: transfer target is catching up on retained data and does not stand for election")

// transferTarget returns the voter a transfer without a target hands
// leadership to: of the other voters answering this leader (peerAnswering),
// the one with the highest acknowledged log index whose catch-up is known
// not to be pending; failing that, the first whose catch-up status could
// not be learned (it most likely can campaign: a pending catch-up is the
// rare case). Only the leader tracks the answers.
func (g *Group) transferTarget() (string, error) {
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return "", err
	}
	type candidate struct {
		id    string
		match uint64
	}
	var cands []candidate
	var why []string
	for _, s := range f.Configuration().Servers {
		id := string(s.ID)
		if id == g.SelfID() || s.Suffrage != raft.Voter {
			continue
		}
		// Answers more than a heartbeat timeout apart are a slow or
		// loaded follower, not yet a dead one: the window is
		// checkQuorumWithout's.
		if err := g.peerAnswering(id, max(3*g.cfg.Raft.HeartbeatTimeout, time.Second)); err != nil {
			why = append(why, err.Error())
			continue
		}
		cands = append(cands, candidate{id: id, match: g.progress.get(s.ID).match})
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		switch {
		case a.match > b.match:
			return -1
		case a.match < b.match:
			return 1
		}
		return 0
	})
	unknown := ""
	for _, c := range cands {
		err := g.peerCatchingUp(c.id)
		switch {
		case err == nil:
			return c.id, nil
		case errors.Is(err, ErrTargetCatchingUp):
			why = append(why, err.Error())
		default:
			if unknown == "" {
				unknown = c.id
			}
		}
	}
	if unknown != "" {
		return unknown, nil
	}
	if len(why) == 0 {
		why = append(why, "the group has no other voter")
	}
	return "", fmt.Errorf("%w: %s", ErrNoTransferTarget, strings.Join(why, "; "))
}

// peerAnswering says why member id looks unable to take leadership over at
// once, or nil: gossip reports it dead or gone, or it has not answered
// this leader within the last window.
func (g *Group) peerAnswering(id string, window time.Duration) error {
	if look := g.gossip.Load(); look != nil {
		// A member gossip does not know (gossip off there, or a pool split
		// from this one) is judged by Raft's answers alone.
		if m, ok := (*look)(id); ok && m.State != ha.MemberAlive {
			return fmt.Errorf("gossip reports %s %s", id, m.State)
		}
	}
	p := g.progress.get(raft.ServerID(id))
	if p.at.IsZero() {
		return fmt.Errorf("%s has not answered this member", id)
	}
	if since := time.Since(p.at); since > window {
		return fmt.Errorf("%s has not answered for %v", id, since.Round(time.Millisecond))
	}
	return nil
}

// peerCatchingUp asks member id (RAFT_STATUS through the learner probe)
// whether its full-data catch-up is pending: an error wrapping
// ErrTargetCatchingUp if so, nil if not, another error when it could not
// be asked.
func (g *Group) peerCatchingUp(id string) error {
	pp := g.promote.probe.Load()
	if pp == nil {
		return errors.New("this member has no way to ask another for its catch-up status")
	}
	ctx, cancel := context.WithTimeout(context.Background(), learnerProbeTimeout)
	ls, err := (*pp)(ctx, id)
	cancel()
	if err != nil {
		return err
	}
	if ls.catchup.Pending {
		return fmt.Errorf("%w: %s (%s)", ErrTargetCatchingUp, id, catchupProgress(ls.catchup))
	}
	return nil
}

// isVoter reports whether id is a voter of the current configuration.
func (g *Group) isVoter(id string) bool {
	conf, err := g.configuration()
	if err != nil {
		return false
	}
	s, ok := findServer(conf, id)
	return ok && s.Suffrage == raft.Voter
}
