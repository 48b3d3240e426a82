package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// RaftMemberOptions tune a membership change (AddRaftMember,
// RemoveRaftMember, ReplaceRaftMember).
type RaftMemberOptions struct {
	// Learner adds the member as a non-voter and stops there.
	Learner bool
	// MaxLag is the promotion threshold: how many Raft entries behind the
	// leader's last index the learner may be (0: the broker's default, 16).
	MaxLag int64
	// CatchUpTimeout bounds the learner's catch-up (0: the broker's
	// default, 10 min). The call waits that long plus the request timeout.
	CatchUpTimeout time.Duration
	// Force removes a voter even when the voters left that answer the
	// leader are not a quorum of the new configuration.
	Force bool
}

// AddRaftMember adds member id (Raft transport address raftAddr) to broker
// group brokerName (ADD_RAFT_MEMBER, raftmq's code 30003): the group's
// leader adds it as a learner, waits until it has caught up and promotes
// it to voter (unless opts.Learner). The new member must be running with
// raftJoin=true. Retrying after a failure is safe.
func (a *Admin) AddRaftMember(ctx context.Context, brokerName, id, raftAddr string, opts RaftMemberOptions) (*wire.RaftMemberChange, error) {
	h := &wire.RaftMemberRequestHeader{MemberID: id, RaftAddr: raftAddr, Learner: opts.Learner, MaxLag: opts.MaxLag,
		TimeoutMillis: opts.CatchUpTimeout.Milliseconds()}
	wait := opts.CatchUpTimeout
	if wait == 0 {
		wait = 10 * time.Minute
	}
	return a.memberCall(ctx, brokerName, remoting.RequestAddRaftMember, h, wait)
}

// RemoveRaftMember removes member id from broker group brokerName
// (REMOVE_RAFT_MEMBER, 30004). Removing the leader moves leadership first;
// the call follows it. Removing a member that is not there succeeds with
// a note.
func (a *Admin) RemoveRaftMember(ctx context.Context, brokerName, id string, force bool) (*wire.RaftMemberChange, error) {
	return a.memberCall(ctx, brokerName, remoting.RequestRemoveRaftMember, &wire.RaftMemberRequestHeader{MemberID: id, Force: force}, 0)
}

// ReplaceRaftMember replaces member oldID of broker group brokerName by a
// new member newID at newRaftAddr: the new one is added as a learner,
// caught up and promoted, and only then is the old one removed, so the
// group never has fewer voters than before. The new member must be
// running with raftJoin=true. Retrying after a failure is safe.
func (a *Admin) ReplaceRaftMember(ctx context.Context, brokerName, oldID, newID, newRaftAddr string,
	opts RaftMemberOptions) (added, removed *wire.RaftMemberChange, err error) {
	if oldID == newID {
		return nil, nil, fmt.Errorf("client: replace %s by itself: give the new member another id", oldID)
	}
	opts.Learner = false
	if err := a.checkReplaceable(ctx, brokerName, oldID, newID); err != nil {
		return nil, nil, err
	}
	if added, err = a.AddRaftMember(ctx, brokerName, newID, newRaftAddr, opts); err != nil {
		return added, nil, fmt.Errorf("replace %s by %s: add: %w", oldID, newID, err)
	}
	if removed, err = a.RemoveRaftMember(ctx, brokerName, oldID, opts.Force); err != nil {
		return added, removed, fmt.Errorf("replace %s by %s: %s is a voter now; removing %s failed (retry removeMember): %w",
			oldID, newID, newID, oldID, err)
	}
	return added, removed, nil
}

// checkReplaceable refuses a replacement whose old member is not in the
// group (a mistyped id): the add would go through, the removal would
// succeed with a note, and the member meant to go would stay a voter of a
// larger group. A new member that is a voter already is a rerun of a
// replacement that completed, and passes.
func (a *Admin) checkReplaceable(ctx context.Context, brokerName, oldID, newID string) error {
	addr, err := a.groupLeader(ctx, brokerName, "")
	if err != nil {
		return err
	}
	st, err := a.RaftStatus(ctx, addr)
	if err != nil {
		return fmt.Errorf("replace %s by %s: reading the group's members: %w", oldID, newID, err)
	}
	var ids []string
	for _, m := range st.Members {
		if m.ID == oldID || (m.ID == newID && m.Suffrage == "Voter") {
			return nil
		}
		ids = append(ids, m.ID)
	}
	return fmt.Errorf("replace %s by %s: %s is not a member of %s (members %v); nothing was changed",
		oldID, newID, oldID, brokerName, ids)
}

// memberCall sends a membership request to brokerName's leader, following
// not-leader answers (to the leader they name, or to the one the name
// servers route once a new one is elected), and decodes the change.
func (a *Admin) memberCall(ctx context.Context, brokerName string, code int16, h *wire.RaftMemberRequestHeader,
	extra time.Duration) (*wire.RaftMemberChange, error) {
	addr, err := a.groupLeader(ctx, brokerName, "")
	if err != nil {
		return nil, err
	}
	// The wait for a new leader starts at the first not-leader answer: a
	// request that waited out a long catch-up before it was refused still
	// follows the leader that took over meanwhile.
	var deadline time.Time
	for hop := 0; ; hop++ {
		cctx, cancel := context.WithTimeout(ctx, a.cfg.requestTimeout+extra)
		resp, err := a.rc.InvokeSync(cctx, addr, remoting.NewRequest(code, h, nil))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("client: broker %s (%s): %w", brokerName, addr, err)
		}
		var out *wire.RaftMemberChange
		if len(resp.Body) > 0 {
			if err := json.Unmarshal(resp.Body, &out); err != nil {
				return nil, fmt.Errorf("client: unreadable membership answer from %s (%s): %w", brokerName, addr, err)
			}
		}
		if resp.Code == remoting.ResponseSuccess {
			if out == nil {
				return nil, fmt.Errorf("client: empty membership answer from %s (%s)", brokerName, addr)
			}
			return out, nil
		}
		be := &BrokerError{Broker: brokerName, Addr: addr, Code: resp.Code, Remark: resp.Remark, LeaderAddr: resp.ExtFields[wire.ExtLeaderAddr]}
		if deadline.IsZero() {
			deadline = time.Now().Add(leaderFollowWait)
		}
		if be.Code != remoting.ResponseServiceNotAvailable || hop >= 8 || time.Now().After(deadline) {
			// A catch-up that timed out answers with the learner's lag.
			return out, be
		}
		next := be.LeaderAddr
		if next == "" || next == addr {
			if next, err = a.groupLeader(ctx, brokerName, addr); err != nil {
				return nil, errors.Join(be, err)
			}
		}
		addr = next
	}
}

// groupLeader is the address the name servers route as brokerName's
// master, waiting (up to leaderFollowWait) for one other than not; with
// no master routed it falls back to any registered member, which answers
// with the leader's address.
func (a *Admin) groupLeader(ctx context.Context, brokerName, not string) (string, error) {
	deadline := time.Now().Add(leaderFollowWait)
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		ci, err := a.ClusterInfo(ctx)
		if err != nil {
			return "", err
		}
		bd, ok := ci.BrokerAddrTable[brokerName]
		if !ok {
			return "", fmt.Errorf("%w: the name servers know no broker group %q", ErrNoBroker, brokerName)
		}
		if m := bd.BrokerAddrs[wire.MasterID]; m != "" && m != not {
			return m, nil
		}
		if time.Now().After(deadline) {
			for _, id := range slices.Sorted(maps.Keys(bd.BrokerAddrs)) {
				if addr := bd.BrokerAddrs[id]; addr != not {
					return addr, nil
				}
			}
			return "", fmt.Errorf("%w: broker group %q has no leader routed (election in progress?)", ErrNoBroker, brokerName)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-t.C:
		}
	}
}
