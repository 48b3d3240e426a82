package broker

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/ha"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// RaftAdmin is what the Raft admin processors (RAFT_STATUS 30001,
// LEADERSHIP_TRANSFER 30002) need from a Replica on top of the Replica
// interface. It is optional: the processors find it by type assertion, so
// a fake Replica without Raft answers REQUEST_CODE_NOT_SUPPORTED. *Group
// implements it.
type RaftAdmin interface {
	// Raft is the member (stats, configuration, last contact).
	Raft() *raft.Raft
	// SelfID is this member's Raft id (dLegerSelfId).
	SelfID() string
	// LeaderID is the current leader's Raft id, "" if none is known.
	LeaderID() string
	// LeaderAddr is the leader's remoting address, "" if unknown.
	LeaderAddr() string
	// PreferredLeaderID is the configured preferredLeaderId ("" = none).
	PreferredLeaderID() string
	// TransferLeadership moves leadership to the member with Raft id to
	// (the most caught-up follower able to campaign when to is "");
	// leader only. It returns
	// once Raft finished or abandoned the transfer.
	TransferLeadership(to string) error
	// LogStopped is the write failure that stopped this member's Raft log,
	// nil while it accepts appends.
	LogStopped() error
	// AcksBeforeFsync is true when this member's Raft log acknowledges
	// appends before they are fsynced (flushDiskType=ASYNC_FLUSH with
	// raftAcksBeforeFsync=true).
	AcksBeforeFsync() bool
}

var _ RaftAdmin = (*Group)(nil)

// applyStopper is a RaftAdmin whose FSM can stop (see Group.ApplyStopped).
type applyStopper interface {
	ApplyStopped() error
}

var _ applyStopper = (*Group)(nil)

// fsmLag is the FSM's progress against Raft's applied index (/readyz).
type fsmLag interface {
	FSMAppliedIndex() uint64
	FSMCaughtUp() bool
}

var _ fsmLag = (*Group)(nil)

// PreferredLeaderID implements RaftAdmin: the member leadership should
// move back to (preferredLeaderId; "" when unset). Admin tooling uses it to
// balance leaders across groups.
func (g *Group) PreferredLeaderID() string { return g.cfg.Raft.PreferredLeaderID }

// RaftMember is one server of the group's Raft configuration.
type RaftMember = wire.RaftMember

// RaftStatus is the RAFT_STATUS answer body (declared in wire, which the
// admin client reads it with).
type RaftStatus = wire.RaftStatus

// LeadershipTransferResult is the LEADERSHIP_TRANSFER answer body.
type LeadershipTransferResult = wire.LeadershipTransferResult

// raftAdminPoolWorkers is small: admin calls are rare, and a transfer
// blocks its worker for up to an election timeout plus the announce.
const raftAdminPoolWorkers = 2

// RegisterRaftAdmin registers the RAFT_STATUS and LEADERSHIP_TRANSFER
// processors, and the membership ones (admin_member.go), on srv. log may be nil.
func RegisterRaftAdmin(srv *remoting.Server, rep Replica, log *zap.Logger) {
	if log == nil {
		log = zap.NewNop()
	}
	p := &raftAdminProcessor{rep: rep, log: log, announceWait: 5 * time.Second}
	srv.Register(remoting.RequestRaftStatus, p.status, raftAdminPoolWorkers, 64)
	srv.Register(remoting.RequestLeadershipTransfer, p.transfer, raftAdminPoolWorkers, 64)
	registerMemberAdmin(srv, rep, log)
}

type raftAdminProcessor struct {
	rep Replica
	log *zap.Logger
	// announceWait bounds how long a transfer answer waits for the new
	// leader's remoting address (it proposes it right after its barrier).
	announceWait time.Duration
}

func (p *raftAdminProcessor) admin() (RaftAdmin, *remoting.RemotingCommand) {
	ra, ok := p.rep.(RaftAdmin)
	if !ok {
		return nil, response(remoting.ResponseRequestCodeNotSupported, "this broker's replica has no Raft admin interface")
	}
	return ra, nil
}

// status answers RAFT_STATUS with this member's RaftStatus as JSON.
func (p *raftAdminProcessor) status(_ context.Context, _ *remoting.Conn, _ *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	ra, errResp := p.admin()
	if errResp != nil {
		return errResp, nil
	}
	st, err := collectRaftStatus(ra, p.rep.IsLeader())
	if err != nil {
		return response(remoting.ResponseSystemError, "raft status: %v", err), nil
	}
	r := success()
	r.Body, _ = json.Marshal(st)
	return r, nil
}

// collectRaftStatus reads one member's Raft state.
func collectRaftStatus(ra RaftAdmin, serving bool) (*RaftStatus, error) {
	r := ra.Raft()
	stats := r.Stats()
	u := func(k string) uint64 {
		n, _ := strconv.ParseUint(stats[k], 10, 64)
		return n
	}
	st := &RaftStatus{
		SelfID: ra.SelfID(), State: r.State().String(), Serving: serving,
		Term: u("term"), LeaderID: ra.LeaderID(), LeaderAddr: ra.LeaderAddr(), PreferredLeaderID: ra.PreferredLeaderID(),
		LastLogIndex: u("last_log_index"), LastLogTerm: u("last_log_term"), CommitIndex: u("commit_index"),
		AppliedIndex: r.AppliedIndex(), FSMPending: u("fsm_pending"), LastSnapshotIndex: u("last_snapshot_index"),
		AcksBeforeFsync: ra.AcksBeforeFsync(), Stats: stats,
	}
	if err := ra.LogStopped(); err != nil {
		st.LogStopped = err.Error()
	}
	if ss, ok := ra.(interface{ SegmentSize() int64 }); ok {
		st.SegmentSize = ss.SegmentSize()
	}
	if cs, ok := ra.(interface{ CatchupStatus() CatchupStatus }); ok {
		if c := cs.CatchupStatus(); c.Pending || c.TookMillis > 0 || c.LastError != "" {
			st.Catchup = &c
		}
	}
	if ps, ok := ra.(interface{ Promotions() []PromotionStatus }); ok && r.State() == raft.Leader {
		st.Promotions = ps.Promotions()
	}
	if as, ok := ra.(applyStopper); ok {
		if err := as.ApplyStopped(); err != nil {
			st.ApplyStopped = err.Error()
		}
	}
	switch lc := r.LastContact(); {
	case r.State() == raft.Leader:
		st.LastContactMillis = 0
	case lc.IsZero():
		st.LastContactMillis = -1
	default:
		st.LastContactMillis = time.Since(lc).Milliseconds()
	}
	if rm, ok := ra.(interface{ Removed() error }); ok && rm.Removed() != nil {
		return nil, rm.Removed()
	}
	if dm, ok := ra.(interface{ LogDamaged() error }); ok && dm.LogDamaged() != nil {
		return nil, dm.LogDamaged()
	}
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	for _, s := range f.Configuration().Servers {
		st.Members = append(st.Members, RaftMember{ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: s.Suffrage.String()})
	}
	return st, nil
}

// transfer answers LEADERSHIP_TRANSFER once Raft finished the transfer and
// a new leader is known (with its remoting address when it announced it
// within announceWait), or with the failure. A follower answers
// SERVICE_NOT_AVAILABLE naming the leader, like every leader-only request.
func (p *raftAdminProcessor) transfer(ctx context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	ra, errResp := p.admin()
	if errResp != nil {
		return errResp, nil
	}
	var h wire.LeadershipTransferRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	if !p.rep.IsLeader() {
		return p.notLeader(), nil
	}
	self := ra.SelfID()
	if h.TargetID == self {
		return response(remoting.ResponseInvalidParameter, "%s is already the leader; pick another member as target", self), nil
	}
	start := time.Now()
	if err := ra.TransferLeadership(h.TargetID); err != nil {
		switch {
		case errors.Is(err, ErrNotLeader):
			return p.notLeader(), nil
		case errors.Is(err, ha.ErrUnknownServer), errors.Is(err, ha.ErrNotVoter):
			return response(remoting.ResponseInvalidParameter, "leadership transfer: %v", err), nil
		}
		p.log.Info("leadership transfer failed", zap.String("target", h.TargetID), zap.Error(err))
		return response(remoting.ResponseSystemError, "leadership transfer from %s to %s failed: %v", self, targetName(h.TargetID), err), nil
	}
	// Raft reports success once the target was told to campaign; wait for
	// the group to name the new leader and its remoting address.
	res := &LeadershipTransferResult{FromID: self}
	deadline := time.Now().Add(p.announceWait)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		// Until this node's role observer notices the step-down,
		// LeaderAddr still answers with our own address: wait for it.
		if id := ra.LeaderID(); id != "" && id != self {
			res.NewLeaderID = id
			if !p.rep.IsLeader() {
				if res.NewLeaderAddr = ra.LeaderAddr(); res.NewLeaderAddr != "" {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return response(remoting.ResponseSystemError, "leadership transfer: %v", ctx.Err()), nil
		case <-t.C:
		}
	}
	if res.NewLeaderID == "" {
		return response(remoting.ResponseSystemError, "leadership transfer from %s: no new leader within %s", self, p.announceWait), nil
	}
	res.Term = ra.Raft().CurrentTerm()
	res.TookMillis = time.Since(start).Milliseconds()
	p.log.Info("leadership transferred", zap.String("from", self), zap.String("to", res.NewLeaderID),
		zap.String("toAddr", res.NewLeaderAddr), zap.Int64("tookMs", res.TookMillis))
	r := success()
	r.Body, _ = json.Marshal(res)
	return r, nil
}

func (p *raftAdminProcessor) notLeader() *remoting.RemotingCommand {
	return notLeaderResponse(p.rep.LeaderAddr(), "")
}

func targetName(id string) string {
	if id == "" {
		return "the most caught-up follower"
	}
	return id
}
