package broker

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// MemberAdmin is what the membership processors (ADD_RAFT_MEMBER 30003,
// REMOVE_RAFT_MEMBER 30004) need from a Replica; *Group implements it. A
// Replica without it answers REQUEST_CODE_NOT_SUPPORTED.
type MemberAdmin interface {
	AddMember(ctx context.Context, id, addr string, opts AddMemberOptions) (*MemberChange, error)
	RemoveMember(ctx context.Context, id string, force bool) (*MemberChange, error)
}

var _ MemberAdmin = (*Group)(nil)

// registerMemberAdmin registers the membership processors on srv. They
// get their own single worker: an add waits for the learner's catch-up,
// which must not hold up RAFT_STATUS, and changes run one at a time as
// Raft applies them anyway.
func registerMemberAdmin(srv *remoting.Server, rep Replica, log *zap.Logger) {
	p := &memberAdminProcessor{rep: rep, log: log}
	srv.Register(remoting.RequestAddRaftMember, p.add, 1, 16)
	srv.Register(remoting.RequestRemoveRaftMember, p.remove, 1, 16)
}

type memberAdminProcessor struct {
	rep Replica
	log *zap.Logger
}

func (p *memberAdminProcessor) admin() (MemberAdmin, *remoting.RemotingCommand) {
	ma, ok := p.rep.(MemberAdmin)
	if !ok {
		return nil, response(remoting.ResponseRequestCodeNotSupported, "this broker's replica has no Raft membership interface")
	}
	return ma, nil
}

// add answers ADD_RAFT_MEMBER once the member is a learner (learner=true)
// or a caught-up, promoted voter, with a MemberChange as JSON.
func (p *memberAdminProcessor) add(ctx context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	ma, errResp := p.admin()
	if errResp != nil {
		return errResp, nil
	}
	var h wire.RaftMemberRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	if h.RaftAddr == "" {
		return response(remoting.ResponseInvalidParameter, "addMember: raftAddr (the new member's Raft host:port) is required"), nil
	}
	if h.MaxLag < 0 || h.TimeoutMillis < 0 {
		return response(remoting.ResponseInvalidParameter, "addMember: maxLag and timeoutMillis must not be negative"), nil
	}
	res, err := ma.AddMember(ctx, h.MemberID, h.RaftAddr, AddMemberOptions{Learner: h.Learner, MaxLag: uint64(h.MaxLag),
		Timeout: time.Duration(h.TimeoutMillis) * time.Millisecond})
	return p.answer("addMember "+h.MemberID, res, err), nil
}

// remove answers REMOVE_RAFT_MEMBER.
func (p *memberAdminProcessor) remove(ctx context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.RaftMemberRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	// An empty id names no member: "not a member, nothing to do" would
	// pass for a done removal.
	if h.MemberID == "" {
		return response(remoting.ResponseInvalidParameter, "removeMember: memberId (the member's dLegerSelfId) is empty"), nil
	}
	ma, errResp := p.admin()
	if errResp != nil {
		return errResp, nil
	}
	res, err := ma.RemoveMember(ctx, h.MemberID, h.Force)
	return p.answer("removeMember "+h.MemberID, res, err), nil
}

// answer maps a change's outcome to a response: not-leader answers name
// the leader (SERVICE_NOT_AVAILABLE with extField leaderAddr, as every
// leader-only request), refusals are INVALID_PARAMETER, the rest
// SYSTEM_ERROR; all remarks say what happened.
func (p *memberAdminProcessor) answer(what string, res *MemberChange, err error) *remoting.RemotingCommand {
	switch {
	case err == nil:
		p.log.Info(what+": done", zap.String("suffrage", res.Suffrage), zap.Uint64("index", res.ChangeIndex), zap.String("note", res.Note))
		r := success()
		r.Body, _ = json.Marshal(res)
		return r
	case errors.Is(err, ErrNotLeader):
		return notLeaderResponse(p.rep.LeaderAddr(), what+": ")
	case errors.Is(err, ErrMembershipConflict), errors.Is(err, ErrQuorumAtRisk):
		return response(remoting.ResponseInvalidParameter, "%s: %v", what, err)
	}
	p.log.Warn(what+" failed", zap.Error(err))
	r := response(remoting.ResponseSystemError, "%s: %v", what, err)
	if res != nil {
		r.Body, _ = json.Marshal(res)
	}
	return r
}
