package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/wire"
)

// Membership changes. The group's Raft configuration is the truth about
// who belongs to it: hashicorp/raft stores it as configuration entries in
// the log (and in every snapshot's meta), so it survives restarts, and
// dLegerPeers only seeds it at the group's first start (bootstrap). A new
// member joins as a learner (non-voter), is promoted to voter once caught
// up, and only then may an old one be removed (replaceMember).

var (
	// ErrRemovedMember: this member is not in the group's live Raft
	// configuration (it was removed), so it must not start as a voter.
	ErrRemovedMember = errors.New("broker: member removed from its raft group")
	// ErrMembershipConflict: the config contradicts the live Raft
	// configuration in a way no restart can reconcile (this member's own
	// address), or a requested change contradicts it.
	ErrMembershipConflict = errors.New("broker: membership conflict")
	// ErrCatchUpTimeout: a learner did not catch up within the time given;
	// it stays a learner.
	ErrCatchUpTimeout = errors.New("broker: learner did not catch up in time")
	// ErrQuorumAtRisk: removing the member would leave fewer answering
	// voters than the new configuration's quorum.
	ErrQuorumAtRisk = errors.New("broker: removal would lose the quorum")
)

// Defaults of a membership change when the request leaves them 0.
const (
	// DefaultPromoteMaxLag is how far behind the leader's last log index a
	// learner may be, in Raft entries, when it is promoted. An entry holds
	// one batch (at most raftBatchMaxBytes), so 16 entries are a few
	// replication round trips: the new voter is counted for commits at
	// once without stalling the group while it fetches the rest.
	DefaultPromoteMaxLag = 16
	// DefaultCatchUpTimeout bounds a learner's catch-up when the request
	// gives no timeout.
	DefaultCatchUpTimeout = 10 * time.Minute
	// memberPoll is how often a change looks at a learner's progress;
	// learnerAskInterval how often it asks the learner for its catch-up.
	memberPoll         = 20 * time.Millisecond
	learnerAskInterval = 250 * time.Millisecond
)

// MemberChange is the answer to a membership change.
type MemberChange = wire.RaftMemberChange

// AddMemberOptions tune AddMember.
type AddMemberOptions struct {
	// Learner stops after adding the member as a non-voter.
	Learner bool
	// MaxLag is the promotion threshold in entries (0: DefaultPromoteMaxLag).
	MaxLag uint64
	// Timeout bounds the catch-up (0: DefaultCatchUpTimeout).
	Timeout time.Duration
}

// configuration returns the latest Raft configuration this member knows.
func (g *Group) configuration() (raft.Configuration, error) {
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Configuration{}, err
	}
	return f.Configuration(), nil
}

// Members returns the live Raft configuration (the latest this member
// knows).
func (g *Group) Members() ([]RaftMember, error) {
	conf, err := g.configuration()
	if err != nil {
		return nil, err
	}
	return raftMembers(conf), nil
}

func raftMembers(conf raft.Configuration) []RaftMember {
	out := make([]RaftMember, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		out = append(out, RaftMember{ID: string(s.ID), RaftAddr: string(s.Address), Suffrage: s.Suffrage.String()})
	}
	return out
}

func findServer(conf raft.Configuration, id string) (raft.Server, bool) {
	for _, s := range conf.Servers {
		if string(s.ID) == id {
			return s, true
		}
	}
	return raft.Server{}, false
}

// memberBrokerID is the brokerId member id registers under while it is
// not the leader: its position in the live configuration + 1. At the
// group's first start the configuration is dLegerPeers in order, so this
// is DLedger's mapping; later members take the next slots. ok is false
// when id is not in the configuration (removed, or not added yet): such
// a member does not register at all.
func (g *Group) memberBrokerID(id string) (int64, bool) {
	bid, _, ok := g.memberSlot(id)
	return bid, ok
}

// memberSlot is memberBrokerID with this member's last log index, read
// after the configuration, so at or past the configuration entry the
// brokerId comes from. A follower registers with that index as its state
// version, so a name server keeps a member's brokerId when a member with
// an older configuration claims it: one replaying the group's history (a
// member re-added under its old id holds earlier configurations on its way
// to the current one) or one removed while it was down, in the second
// before it learns so. Either holds less log than the configuration entry
// that gave the id to its holder. RocketMQ's name server keeps one address
// per brokerId, and the member displaced would stay unrouted until its
// next periodic registration.
func (g *Group) memberSlot(id string) (int64, uint64, bool) {
	if g.Removed() != nil || g.LogDamaged() != nil {
		return 0, 0, false
	}
	conf, err := g.configuration()
	if err != nil {
		return 0, 0, false
	}
	last := g.raft.LastIndex()
	for i, s := range conf.Servers {
		if string(s.ID) == id {
			return int64(i) + 1, last, true
		}
	}
	return 0, 0, false
}

// checkLiveConfiguration runs at a restart (the member has Raft state):
// the configuration in the log and snapshots wins over dLegerPeers, except
// where that cannot be right. A member missing from it was removed and
// refuses to start; one whose own address differs would listen where no
// peer looks for it. Other differences mean dLegerPeers is stale: logged.
func (g *Group) checkLiveConfiguration() error {
	why, err := readMarkerFile(g.diskFS, g.removedMarkerPath())
	if err != nil {
		return err
	}
	if why != "" {
		return fmt.Errorf("%w: %s refuses to start as a voter: it learned of its removal earlier (%s, recorded in %s); "+
			"to bring this host back, wipe %s, start it with raftJoin=true and run `raftmq admin addMember` (docs/operations.md)",
			ErrRemovedMember, g.cfg.Raft.DLegerSelfID, why, g.removedMarkerPath(), g.cfg.Store.StorePathRootDir)
	}
	conf, err := g.configuration()
	if err != nil {
		return err
	}
	if len(conf.Servers) == 0 {
		return nil // joining (raftJoin) and not added yet
	}
	self, group := g.cfg.Raft.DLegerSelfID, g.cfg.Raft.DLegerGroup
	live := fmtServers(conf)
	me, ok := findServer(conf, self)
	if !ok {
		return fmt.Errorf("%w: %s is not in group %s's Raft configuration (%s): it was removed (removeMember) "+
			"and refuses to start as a voter; to bring this host back, wipe %s, start it with raftJoin=true and run "+
			"`raftmq admin addMember` (docs/operations.md)", ErrRemovedMember, self, group, live, g.cfg.Store.StorePathRootDir)
	}
	addr, _ := g.cfg.Raft.SelfAddr()
	if string(me.Address) != addr {
		return fmt.Errorf("%w: dLegerPeers gives %s the Raft address %s, but group %s's live configuration (%s) has it at %s; "+
			"a member cannot move by editing dLegerPeers: restore its address, or replace it with a new id "+
			"(`raftmq admin replaceMember`, docs/operations.md)", ErrMembershipConflict, self, addr, group, live, me.Address)
	}
	if seeded, err := g.cfg.Raft.Configuration(); err == nil && fmtServers(seeded) != live {
		g.log.Warn("dLegerPeers differs from the group's live Raft configuration; the live configuration wins "+
			"(update dLegerPeers to match)", zap.String("dLegerPeers", g.cfg.Raft.DLegerPeers), zap.String("live", live))
	}
	if p := g.cfg.Raft.PreferredLeaderID; p != "" {
		if _, ok := findServer(conf, p); !ok {
			// A member replaced since the confs were written: leadership
			// is never moved to it, and balanceLeaders skips the group.
			g.log.Warn("preferredLeaderId names no member of the group's live Raft configuration; "+
				"set it to a member in every member's conf", zap.String("preferredLeaderId", p), zap.String("live", live))
		}
	}
	return nil
}

// fmtServers renders a configuration as dLegerPeers does (learners marked).
func fmtServers(conf raft.Configuration) string {
	parts := make([]string, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		p := string(s.ID) + "-" + string(s.Address)
		if s.Suffrage != raft.Voter {
			p += "(" + strings.ToLower(s.Suffrage.String()) + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ";")
}

// checkMemberAddr validates a member id and Raft address as dLegerPeers
// would take them.
func checkMemberAddr(id, addr string) error {
	if _, err := raftlog.ParsePeers(id + "-" + addr); err != nil || strings.Contains(id, "-") {
		return fmt.Errorf("%w: member %q at %q: want an id without '-' and a host:port Raft address", ErrMembershipConflict, id, addr)
	}
	return nil
}

// changeTimeout bounds one configuration entry's commit.
func (g *Group) changeTimeout() time.Duration { return g.cfg.ApplyTimeout }

// AddMember adds member id at Raft address addr: as a learner (non-voter)
// first, which the leader replicates to without counting it for commits;
// then, unless opts.Learner, it waits until the learner has acknowledged
// the log up to within opts.MaxLag entries of the leader's last index
// (progressTracker, from the learner's own answers) and has fetched the
// retained data before any snapshot it installed (member_promote.go), and
// promotes it to voter. Leader only. Retrying is safe: a learner is
// waited for again, a voter at the same address is left alone.
func (g *Group) AddMember(ctx context.Context, id, addr string, opts AddMemberOptions) (*MemberChange, error) {
	if err := checkMemberAddr(id, addr); err != nil {
		return nil, err
	}
	if g.raft.State() != raft.Leader {
		return nil, g.notLeaderErr(nil)
	}
	conf, err := g.configuration()
	if err != nil {
		return nil, err
	}
	for _, s := range conf.Servers {
		if string(s.Address) == addr && string(s.ID) != id {
			return nil, fmt.Errorf("%w: %s already uses Raft address %s", ErrMembershipConflict, s.ID, addr)
		}
	}
	res := &MemberChange{ID: id, RaftAddr: addr}
	cur, exists := findServer(conf, id)
	if exists && string(cur.Address) != addr {
		return nil, fmt.Errorf("%w: %s is a member at %s; to move it to %s, replace it with a new id (replaceMember)",
			ErrMembershipConflict, id, cur.Address, addr)
	}
	if exists && cur.Suffrage == raft.Voter {
		res.Suffrage, res.Note = raft.Voter.String(), id+" is a voter already"
		res.Members = raftMembers(conf)
		return res, nil
	}
	start := time.Now()
	if !exists {
		if err := g.checkNewMember(id, addr); err != nil {
			return nil, err
		}
		g.progress.reset(raft.ServerID(id))
		f := g.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, g.changeTimeout())
		if err := f.Error(); err != nil {
			return nil, g.changeErr("add learner "+id, err)
		}
		res.LearnerIndex = f.Index()
		g.log.Info("member added as learner", zap.String("id", id), zap.String("raftAddr", addr), zap.Uint64("index", f.Index()))
	} else {
		res.Note = id + " was a learner already"
	}
	res.Suffrage = raft.Nonvoter.String()
	if opts.Learner {
		res.ChangeIndex = res.LearnerIndex
		return g.withMembers(res)
	}
	maxLag := cmp0(opts.MaxLag, DefaultPromoteMaxLag)
	timeout := time.Duration(cmp0(int64(opts.Timeout), int64(DefaultCatchUpTimeout)))
	lag, err := g.waitCaughtUp(ctx, id, addr, start, maxLag, timeout)
	res.Lag, res.CatchUpMillis = lag, time.Since(start).Milliseconds()
	if err != nil {
		return res, err
	}
	// Promote only the learner that caught up: a removeMember during the
	// wait must not be undone. prevIndex makes Raft refuse the promotion
	// if the configuration changes between this look and the entry.
	prev, err := g.learnerStill(id, addr)
	if err != nil {
		return res, err
	}
	f := g.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), prev, g.changeTimeout())
	if err := f.Error(); err != nil {
		return res, g.changeErr("promote "+id, err)
	}
	res.ChangeIndex, res.Suffrage = f.Index(), raft.Voter.String()
	g.log.Info("learner promoted to voter", zap.String("id", id), zap.Uint64("index", f.Index()), zap.Uint64("lag", lag),
		zap.Duration("catchUp", time.Since(start)))
	return g.withMembers(res)
}

// newMemberProbeTimeout bounds each of checkNewMember's questions: a new
// member that is up answers at once.
const newMemberProbeTimeout = time.Second

// checkNewMember asks the process at addr, before it is added as id, who
// it is, with pre-votes over the Raft transport, which change nothing on
// the receiver (as the join check asks, member_join.go). Once added, the
// process would follow this leader whatever it is, since Raft takes
// appends from any leader with a term as high as its own: a member of
// another group (ids n0..n2 repeat across groups) would have its log
// truncated to this group's, and a member of this group reached under
// another id or another spelling of its address would count twice toward
// the quorum.
//
// A term-0 pre-vote's answer carries the receiver's id and term: another
// id refuses the add, term 0 (a new member, empty) lets it go on. A
// process with Raft state is asked once more, at a term past this
// leader's with this leader's last entry: it grants that only when its
// configuration names this leader as a voter and it follows no other
// leader, that is when it belongs to this group (a learner whose add a
// leader change lost, a removed member not wiped); otherwise the add is
// refused. No answer (not started yet, unreachable, or a transport without
// pre-vote) lets it go on: the learner is replicated to once it is up, and
// the promotion waits for it. Over Raft TLS the leader's handshake refuses
// a certificate naming no member, which a new member's does until it is
// added, so nothing is asked: the certificate check stands in (ADR 0016),
// and an ask would only spend its one refusal warning.
func (g *Group) checkNewMember(id, addr string) error {
	if t, ok := g.trans.(*raftTransport); ok && t.tls != nil {
		return nil
	}
	pv, ok := g.trans.(raft.WithPreVote)
	if !ok {
		return nil
	}
	header := rpcHeader(g.trans, raft.ServerID(g.SelfID()))
	resp, err := g.preVote(pv, id, addr, &raft.RequestPreVoteRequest{RPCHeader: header})
	switch {
	case err != nil:
		g.log.Info("addMember: no answer over Raft from the new member; adding it all the same", zap.String("id", id),
			zap.String("raftAddr", addr), zap.Error(err))
		return nil
	case len(resp.ID) > 0 && string(resp.ID) != id:
		return fmt.Errorf("%w: Raft address %s answers as member %s, not %s: a running member is there (of this group under "+
			"another spelling of its address, or of another group); check --id and --addr", ErrMembershipConflict, addr, resp.ID, id)
	case resp.Term == 0:
		return nil
	}
	lastTerm, _ := strconv.ParseUint(g.raft.Stats()["last_log_term"], 10, 64)
	ours, err := g.preVote(pv, id, addr, &raft.RequestPreVoteRequest{RPCHeader: header, Term: g.raft.CurrentTerm() + 1,
		LastLogIndex: g.raft.LastIndex(), LastLogTerm: lastTerm})
	if err == nil && ours.Granted {
		return nil
	}
	return fmt.Errorf("%w: %s at %s already holds Raft state (term %d) and does not take this leader as a voter of its "+
		"group: it is another group's member, not a new member; check --addr, or stop it, wipe its data directory, "+
		"start it with raftJoin=true and add it again (docs/operations.md)", ErrMembershipConflict, id, addr, resp.Term)
}

// preVote sends req to the process at addr, waiting at most
// newMemberProbeTimeout (the transport's own timeout ends the call; its
// answer is dropped).
func (g *Group) preVote(pv raft.WithPreVote, id, addr string, req *raft.RequestPreVoteRequest) (raft.RequestPreVoteResponse, error) {
	type answer struct {
		resp raft.RequestPreVoteResponse
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		var a answer
		a.err = pv.RequestPreVote(raft.ServerID(id), raft.ServerAddress(addr), req, &a.resp)
		ch <- a
	}()
	wait := time.NewTimer(newMemberProbeTimeout)
	defer wait.Stop()
	select {
	case a := <-ch:
		return a.resp, a.err
	case <-wait.C:
		return raft.RequestPreVoteResponse{}, fmt.Errorf("no answer within %s", newMemberProbeTimeout)
	case <-g.quit:
		return raft.RequestPreVoteResponse{}, ErrGroupClosed
	}
}

// learnerStill returns the index of the live configuration if learner id
// is still in it at addr, and an error otherwise (it was removed, or
// replaced at another address, while it caught up).
func (g *Group) learnerStill(id, addr string) (uint64, error) {
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return 0, err
	}
	if s, ok := findServer(f.Configuration(), id); !ok || string(s.Address) != addr {
		return 0, fmt.Errorf("%w: %s left the configuration (removeMember) while it caught up; it is not promoted, "+
			"run addMember again to add it back", ErrMembershipConflict, id)
	}
	return f.Index(), nil
}

func cmp0[T uint64 | int64](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// waitCaughtUp waits until learner id has acknowledged, after since, the
// log up to within maxLag entries of this leader's last index, and says
// its full-data catch-up is not pending (member_promote.go). It returns
// the last lag seen.
func (g *Group) waitCaughtUp(ctx context.Context, id, addr string, since time.Time, maxLag uint64, timeout time.Duration) (uint64, error) {
	defer g.endPromotion(id)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	t := time.NewTicker(memberPoll)
	defer t.Stop()
	lag := g.raft.LastIndex()
	why := "it acknowledged nothing yet"
	var asked time.Time
	for {
		if g.raft.State() != raft.Leader {
			return lag, g.notLeaderErr(fmt.Errorf("leadership lost while %s caught up; it stays a learner, retry on the new leader", id))
		}
		if _, err := g.learnerStill(id, addr); err != nil {
			return lag, err
		}
		p := g.progress.get(raft.ServerID(id))
		last := g.raft.LastIndex()
		if p.at.After(since) {
			lag = last - min(p.match, last)
		} else {
			lag = last
		}
		switch {
		case lag > maxLag:
			why = fmt.Sprintf("it is %d entries behind (promotion at <= %d)", lag, maxLag)
			g.notePromotion(id, since, func(st *PromotionStatus) { st.Lag, st.Waiting = lag, "log" })
		case time.Since(asked) >= learnerAskInterval:
			// The learner is asked at most every learnerAskInterval: the
			// answer is a network round trip, the lag check is not.
			asked = time.Now()
			g.notePromotion(id, since, func(st *PromotionStatus) { st.Lag = lag })
			var conflict error
			if why, conflict = g.learnerReady(ctx, id, since); conflict != nil {
				return lag, conflict
			} else if why == "" {
				return lag, nil
			}
		}
		select {
		case <-ctx.Done():
			return lag, fmt.Errorf("%w: %s is not promoted: %s: %v; it stays a learner, retry addMember to wait again",
				ErrCatchUpTimeout, id, why, ctx.Err())
		case <-deadline.C:
			return lag, fmt.Errorf("%w: %s is not promoted after %s: %s; it stays a learner, "+
				"retry addMember to wait again or removeMember it", ErrCatchUpTimeout, id, timeout, why)
		case <-g.quit:
			return lag, ErrGroupClosed
		case <-t.C:
		}
	}
}

// RemoveMember removes member id from the configuration. Removing a
// voter shrinks the quorum; unless force, it is refused when the voters
// left that acknowledged the log recently are fewer than the new quorum
// (the group would stall; checkQuorumWithout). The leader cannot remove itself: it hands
// leadership to another voter first and answers not-leader, so the
// caller retries on the new leader. Removing a member that is not there
// succeeds with a note (retries are safe).
func (g *Group) RemoveMember(ctx context.Context, id string, force bool) (*MemberChange, error) {
	if g.raft.State() != raft.Leader {
		return nil, g.notLeaderErr(nil)
	}
	conf, err := g.configuration()
	if err != nil {
		return nil, err
	}
	res := &MemberChange{ID: id}
	cur, ok := findServer(conf, id)
	if !ok {
		res.Note, res.Members = id+" is not a member", raftMembers(conf)
		return res, nil
	}
	res.RaftAddr = string(cur.Address)
	self := g.SelfID()
	if id == self {
		if !hasOtherVoter(g) {
			return nil, fmt.Errorf("%w: %s is the group's only voter", ErrMembershipConflict, id)
		}
		if err := g.TransferLeadership(""); err != nil {
			return nil, fmt.Errorf("removing the leader %s: leadership transfer first: %w", id, err)
		}
		return nil, g.notLeaderErr(fmt.Errorf("leadership moved off %s so that it can be removed; ask the new leader", id))
	}
	if cur.Suffrage == raft.Voter && !force {
		if err := g.checkQuorumWithout(ctx, conf, id); err != nil {
			return nil, err
		}
	}
	f := g.raft.RemoveServer(raft.ServerID(id), 0, g.changeTimeout())
	if err := f.Error(); err != nil {
		return nil, g.changeErr("remove "+id, err)
	}
	g.progress.reset(raft.ServerID(id))
	res.ChangeIndex = f.Index()
	g.log.Info("member removed", zap.String("id", id), zap.String("raftAddr", res.RaftAddr), zap.Uint64("index", f.Index()))
	return g.withMembers(res)
}

// checkQuorumWithout refuses a removal that leaves fewer answering voters
// than a quorum of the voters left. A voter answers when, within three
// heartbeat timeouts (at least 1 s), it acknowledged the log past the
// leader's last index when the check began: heartbeats alone do not count,
// since a voter whose log refuses appends (an I/O error stopped it, a full
// disk refuses each batch) still answers them but cannot help commit the
// removal or anything after it. A barrier entry gives every voter
// something to acknowledge in an idle group; it is not waited for (a group
// short of a quorum may need exactly this removal). Only a leader hears
// those answers, so one that took office moments ago (an election, a
// preferred-leader transfer) has not heard from every voter yet: a
// shortfall is checked again until one such window has passed, and only
// then refused (or when ctx ends or the group closes).
func (g *Group) checkQuorumWithout(ctx context.Context, conf raft.Configuration, id string) error {
	fresh := max(3*g.cfg.Raft.HeartbeatTimeout, time.Second)
	deadline := time.Now().Add(fresh)
	since := g.raft.LastIndex()
	go func() { _ = g.raft.Barrier(fresh).Error() }()
	tick := time.NewTicker(max(min(g.cfg.Raft.HeartbeatTimeout/4, 50*time.Millisecond), time.Millisecond))
	defer tick.Stop()
	for {
		err := g.quorumWithout(conf, id, since, fresh)
		if err == nil || !time.Now().Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-g.quit:
			return errors.Join(err, raft.ErrRaftShutdown)
		case <-tick.C:
		}
	}
}

// quorumWithout is one pass of checkQuorumWithout: a voter answers when
// it acknowledged, within fresh, the log past index since.
func (g *Group) quorumWithout(conf raft.Configuration, id string, since uint64, fresh time.Duration) error {
	var left, answering []string
	for _, s := range conf.Servers {
		if s.Suffrage != raft.Voter || string(s.ID) == id {
			continue
		}
		left = append(left, string(s.ID))
		p := g.progress.get(s.ID)
		if string(s.ID) == g.SelfID() || (time.Since(p.at) < fresh && p.match > since) {
			answering = append(answering, string(s.ID))
		}
	}
	if need := len(left)/2 + 1; len(answering) < need {
		return fmt.Errorf("%w: removing %s leaves voters %v, of which only %v acknowledged the log within %s (a voter that "+
			"is down, or whose log refuses appends, does not); the new configuration needs %d: bring the others back first, "+
			"or force the removal (removeMember --force)", ErrQuorumAtRisk, id, left, answering, fresh, need)
	}
	return nil
}

// changeErr explains a failed configuration change.
func (g *Group) changeErr(what string, err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
		return g.notLeaderErr(fmt.Errorf("%s: %w", what, err))
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (g *Group) withMembers(res *MemberChange) (*MemberChange, error) {
	conf, err := g.configuration()
	if err == nil {
		res.Members = raftMembers(conf)
	}
	return res, nil
}

// memberSlotter is a Replica that knows the live configuration (*Group).
type memberSlotter interface {
	memberBrokerID(id string) (int64, bool)
}

// memberSlotVersioner is a Replica that also says how far the log a
// follower's brokerId comes from reaches (Group.memberSlot).
type memberSlotVersioner interface {
	memberSlot(id string) (bid int64, lastIndex uint64, ok bool)
}

// memberBrokerIDOf is member id's follower brokerId: from rep's live
// configuration when it has one, else from dLegerPeers (fake replicas in
// tests).
func memberBrokerIDOf(rep Replica, cfg *BrokerConfig, id string) (int64, bool) {
	if ms, ok := rep.(memberSlotter); ok {
		return ms.memberBrokerID(id)
	}
	peers, err := raftlog.ParsePeers(cfg.Raft.DLegerPeers)
	if err != nil {
		return 0, false
	}
	for i, p := range peers {
		if p.ID == id {
			return int64(i) + 1, true
		}
	}
	return 0, false
}
