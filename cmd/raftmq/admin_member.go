package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Raft membership commands (ADD_RAFT_MEMBER 30003, REMOVE_RAFT_MEMBER
// 30004; broker/member.go). The procedures they serve are in
// docs/operations.md.

func init() {
	adminCommands = append(adminCommands, memberAdminCommands...)
}

var (
	memberGroupFlag = str("brokerName", "b", "broker group (its Raft group)").req()
	memberIDFlag    = str("id", "", "Raft id (dLegerSelfId) of the member").req()
	memberAddrFlag  = str("addr", "", "the new member's Raft address host:port (its dLegerPeers entry)").req()
	catchUpFlags    = []flagSpec{
		num64("maxLag", "", 0, "promote once the learner is at most this many Raft entries behind the leader (0: the broker's default, 16)"),
		str("catchUpTimeout", "", "how long the learner may take to catch up before the command gives up (default 10m; it stays a learner)"),
	}
)

var memberAdminCommands = []adminEntry{
	adminCommand[[]memberStep]{
		name:  "addMember",
		short: "Add a member to a broker group's Raft group: as a learner, promoted to voter once caught up",
		long: "Asks the group's leader (ADD_RAFT_MEMBER, code 30003) to add the member as a non-voting learner, wait " +
			"until it has acknowledged the log up to --maxLag entries behind the leader's, and promote it to voter. " +
			"Start the new member first, with raftJoin=true and dLegerPeers listing the group plus itself. Safe to rerun.",
		flags: append([]flagSpec{memberGroupFlag, memberIDFlag, memberAddrFlag,
			toggle("learner", "add as a learner only (no promotion)")}, catchUpFlags...),
		run:   runAddMember,
		table: tableMemberSteps,
	},
	adminCommand[[]memberStep]{
		name:  "removeMember",
		short: "Remove a member from a broker group's Raft group",
		long: "Asks the group's leader (REMOVE_RAFT_MEMBER, code 30004) to remove the member. Removing a voter is refused " +
			"when the voters left that answer the leader are fewer than the new quorum (--force overrides); removing the " +
			"leader first moves leadership. The removed member refuses to start again as a voter. Safe to rerun.",
		flags: []flagSpec{memberGroupFlag, memberIDFlag, toggle("force", "remove even if the voters left that answer are not a quorum")},
		run:   runRemoveMember,
		table: tableMemberSteps,
	},
	adminCommand[[]memberStep]{
		name:  "replaceMember",
		short: "Replace a broker group's member: add the new one (learner, caught up, promoted), then remove the old one",
		long: "addMember for --id/--addr, then removeMember for --old: the group never has fewer voters than before. " +
			"Start the new member first with raftJoin=true. Safe to rerun after a failure.",
		flags: append([]flagSpec{memberGroupFlag, memberIDFlag, memberAddrFlag,
			str("old", "", "Raft id of the member to replace").req(),
			toggle("force", "remove the old member even if the voters left that answer are not a quorum")}, catchUpFlags...),
		run:   runReplaceMember,
		table: tableMemberSteps,
	},
}

// memberStep is one change a membership command made.
type memberStep struct {
	BrokerName string `json:"brokerName"`
	Step       string `json:"step"`
	wire.RaftMemberChange
}

// memberOptions reads the catch-up flags and gives the run a context
// that outlives --timeout by the catch-up bound.
func memberOptions(ctx context.Context, s *adminSession, in flagValues) (context.Context, context.CancelFunc, client.RaftMemberOptions, error) {
	opts := client.RaftMemberOptions{MaxLag: in.int64("maxLag")}
	if opts.MaxLag < 0 {
		return nil, nil, opts, fmt.Errorf("%w: --maxLag must not be negative", errAdminUsage)
	}
	wait := 10 * time.Minute
	if v := in.str("catchUpTimeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, nil, opts, fmt.Errorf("%w: --catchUpTimeout %q: want a positive duration such as 90s or 10m", errAdminUsage, v)
		}
		wait, opts.CatchUpTimeout = d, d
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait+6*s.f.timeout)
	return cctx, cancel, opts, nil
}

func runAddMember(ctx context.Context, s *adminSession, in flagValues) ([]memberStep, error) {
	cctx, cancel, opts, err := memberOptions(ctx, s, in)
	if err != nil {
		return nil, err
	}
	defer cancel()
	opts.Learner = in.bool("learner")
	b := in.str("brokerName")
	res, err := s.a.AddRaftMember(cctx, b, in.str("id"), in.str("addr"), opts)
	return memberResult(stepsOf(b, "add", res), err)
}

func runRemoveMember(ctx context.Context, s *adminSession, in flagValues) ([]memberStep, error) {
	b := in.str("brokerName")
	res, err := s.a.RemoveRaftMember(ctx, b, in.str("id"), in.bool("force"))
	return memberResult(stepsOf(b, "remove", res), err)
}

func runReplaceMember(ctx context.Context, s *adminSession, in flagValues) ([]memberStep, error) {
	if in.str("old") == in.str("id") {
		return nil, fmt.Errorf("%w: --old and --id are both %q: the new member needs its own id", errAdminUsage, in.str("id"))
	}
	cctx, cancel, opts, err := memberOptions(ctx, s, in)
	if err != nil {
		return nil, err
	}
	defer cancel()
	opts.Force = in.bool("force")
	b := in.str("brokerName")
	added, removed, err := s.a.ReplaceRaftMember(cctx, b, in.str("old"), in.str("id"), in.str("addr"), opts)
	return memberResult(append(stepsOf(b, "add", added), stepsOf(b, "remove", removed)...), err)
}

func stepsOf(brokerName, step string, res *wire.RaftMemberChange) []memberStep {
	if res == nil {
		return nil
	}
	return []memberStep{{BrokerName: brokerName, Step: step, RaftMemberChange: *res}}
}

// memberResult keeps a refusal's remark readable and marks a failure
// that still produced steps (a learner left behind, an add done before
// the removal failed) as partial, so the steps print.
func memberResult(steps []memberStep, err error) ([]memberStep, error) {
	if err == nil {
		return steps, nil
	}
	var be *client.BrokerError
	if errors.As(err, &be) && be.Code == remoting.ResponseInvalidParameter {
		err = fmt.Errorf("%w: %s", errRefused, be.Remark)
	}
	if len(steps) > 0 {
		return steps, partialFailure{err}
	}
	return nil, err
}

func tableMemberSteps(w *tabwriter.Writer, steps []memberStep) {
	row(w, "#Broker Name", "#Step", "#ID", "#Raft Addr", "#Suffrage", "#Index", "#Lag", "#Catch-up", "#Members After", "#Note")
	for _, st := range steps {
		var ms []string
		for _, m := range st.Members {
			v := m.ID
			if m.Suffrage != "Voter" {
				v += "(" + strings.ToLower(m.Suffrage) + ")"
			}
			ms = append(ms, v)
		}
		catchUp := "-"
		if st.CatchUpMillis > 0 {
			catchUp = (time.Duration(st.CatchUpMillis) * time.Millisecond).String()
		}
		row(w, st.BrokerName, st.Step, st.ID, orDash(st.RaftAddr), orDash(st.Suffrage), st.ChangeIndex, st.Lag, catchUp,
			orDash(strings.Join(ms, ",")), orDash(st.Note))
	}
}
