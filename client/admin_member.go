package client

import (
	"context"
	"encoding/json"
	"fmt"
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
	// default, 10 min). A call whose context has no deadline waits that
	// long plus the request timeout and 10 s for a new leader, in all: a
	// leader change late in a long catch-up can leave the new leader's
	// wait too little time, and the call then ends with the context's
	// error while the learner goes on catching up; run it again (it is
	// safe to repeat), or give the context a deadline of your own.
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
// replacement that completed, and passes. The members are read from the
// leader's RAFT_STATUS, or while the group elects from any member's.
func (a *Admin) checkReplaceable(ctx context.Context, brokerName, oldID, newID string) error {
	if err := a.knowGroup(ctx, brokerName); err != nil {
		return err
	}
	var st *wire.RaftStatus
	if _, err := a.groupCall(ctx, brokerName, func(ctx context.Context, addr string) (err error) {
		st, err = a.RaftStatus(ctx, addr)
		return err
	}); err != nil {
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

// memberCall sends a membership request to brokerName's leader and
// decodes the change. It rides out a leader change as every leader-bound
// admin call does (groupCall): a not-leader answer is followed to the
// leader it names, else the group's members are asked until one names
// the leader the group elected, which is often the member that just lost
// its lease. extra is how long the broker may spend on the change (a
// learner's catch-up): every try is given that much more than a request,
// and a ctx without a deadline gets extra, a request timeout and the
// client's leaderFollowWait in all (RaftMemberOptions.CatchUpTimeout). A
// refusal returns with the change the broker reported (a timed-out
// catch-up's lag).
func (a *Admin) memberCall(ctx context.Context, brokerName string, code int16, h *wire.RaftMemberRequestHeader,
	extra time.Duration) (*wire.RaftMemberChange, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, extra+a.cfg.requestTimeout+a.cfg.leaderFollowWait)
		defer cancel()
	}
	if err := a.knowGroup(ctx, brokerName); err != nil {
		return nil, err
	}
	var out *wire.RaftMemberChange
	err := onLeader(ctx, a.routes, brokerName, a.cfg.requestTimeout+extra, a.cfg.leaderFollowWait, a.groupFailed(brokerName),
		func(ctx context.Context, addr string) error {
			out = nil
			resp, err := a.rc.InvokeSync(ctx, addr, remoting.NewRequest(code, h, nil))
			if err != nil {
				return err
			}
			if len(resp.Body) > 0 {
				if err := json.Unmarshal(resp.Body, &out); err != nil {
					return fmt.Errorf("client: unreadable membership answer from %s (%s): %w", brokerName, addr, err)
				}
			}
			if resp.Code != remoting.ResponseSuccess {
				return &BrokerError{Broker: brokerName, Addr: addr, Code: resp.Code, Remark: resp.Remark, LeaderAddr: resp.ExtFields[wire.ExtLeaderAddr]}
			}
			if out == nil {
				return fmt.Errorf("client: empty membership answer from %s (%s)", brokerName, addr)
			}
			return nil
		})
	return out, err
}
