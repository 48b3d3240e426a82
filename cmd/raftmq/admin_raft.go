package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/raftmq/raftmq/client"
)

// The Raft admin commands (raftStatus, leadershipTransfer, balanceLeaders)
// are the SDK admin's RaftGroups, TransferLeadership and
// PlanLeaderBalance/BalanceLeaders, which the web console uses too; this
// file adds the CLI's errors and tables.

// runRaftStatus is `raftmq admin raftStatus -n NAMESRV [-c cluster] [-b
// brokerName]`.
// A member that refuses (NO_PERMISSION without an admin account under
// ACL) is a row with the broker's remark, and the command exits 1 naming
// it; one that does not answer is only a row (the command is how an
// operator looks at a group with a member down), and so is one removed
// from the group that still runs (client.SuffrageRemoved): like a member
// down, it is the group's state the command reports, not its failure.
func runRaftStatus(ctx context.Context, s *adminSession, in flagValues) ([]*client.RaftGroup, error) {
	gs, err := s.raftGroups(ctx, in.str("clusterName"), in.str("brokerName"))
	if err != nil {
		return nil, err
	}
	var refused []string
	for _, g := range gs {
		for _, m := range g.Members {
			if m.State == "Refused" {
				refused = append(refused, m.Error)
			}
		}
	}
	if len(refused) > 0 {
		return gs, partialFailure{fmt.Errorf("%d member(s) refused RAFT_STATUS: %s", len(refused), refused[0])}
	}
	return gs, nil
}

// raftGroups is Admin.RaftGroups with none selected as errNotFound.
func (s *adminSession) raftGroups(ctx context.Context, cluster, brokerName string) ([]*client.RaftGroup, error) {
	gs, err := s.a.RaftGroups(ctx, nil, cluster, brokerName)
	if err != nil {
		return nil, err
	}
	if len(gs) == 0 {
		what := "any broker group"
		if brokerName != "" {
			what = fmt.Sprintf("broker group %q", brokerName)
		}
		if cluster != "" {
			what += fmt.Sprintf(" in cluster %q", cluster)
		}
		return nil, fmt.Errorf("%w: the name server knows no %s (see `raftmq admin clusterList`)", errNotFound, what)
	}
	return gs, nil
}

func tableRaftStatus(w *tabwriter.Writer, gs []*client.RaftGroup) {
	row(w, "#Broker Name", "#ID", "#Addr", "#Raft Addr", "#State", "#Term", "#Last Index", "#Commit", "#Applied", "#Lag", "#Last Contact", "#Acks", "#Note")
	for _, g := range gs {
		for _, m := range g.Members {
			lag, contact := "-", "-"
			if m.Lag >= 0 {
				lag = fmt.Sprint(m.Lag)
			}
			if m.LastContactMillis >= 0 {
				contact = (time.Duration(m.LastContactMillis) * time.Millisecond).String()
			}
			note := m.Error
			if note == "" && m.Suffrage == client.SuffrageRemoved {
				// Whatever else its stale configuration says about it
				// (learner, preferred leader) no longer holds.
				note = "REMOVED: not in the leader's configuration; it runs on its stale one until it reaches " +
					"the routed leader and stops (if it cannot, stop it)"
			}
			if note == "" && m.LogStopped != "" {
				note = "log stopped: " + m.LogStopped
			}
			if note == "" && m.ApplyStopped != "" {
				note = "apply stopped: " + m.ApplyStopped
			}
			if note == "" {
				note = catchupNote(m)
			}
			if note == "" && m.Suffrage != "" && m.Suffrage != "Voter" {
				note = "learner (" + m.Suffrage + "): replicated to, not counted for commits or elections"
			}
			if note == "" && m.ID == g.PreferredLeaderID {
				note = "preferred leader"
			}
			// Loud on purpose: acks before fsync can lose acknowledged
			// messages when a majority crashes at once.
			acks := "-"
			if m.Error == "" {
				acks = "after fsync"
				if m.AcksBeforeFsync {
					acks = "BEFORE FSYNC"
				}
			}
			row(w, g.BrokerName, orDash(m.ID), orDash(m.RemotingAddr), orDash(m.RaftAddr), m.State, m.Term,
				m.LastLogIndex, m.CommitIndex, m.AppliedIndex, lag, contact, acks, orDash(note))
		}
	}
}

// transfer is Admin.TransferLeadership with the CLI's errors.
func (s *adminSession) transfer(ctx context.Context, g *client.RaftGroup, target string) (*client.LeadershipTransfer, error) {
	res, err := s.a.TransferLeadership(ctx, g, target, s.f.timeout)
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, client.ErrNotMember):
		return nil, fmt.Errorf("%w: %w", errNotFound, err)
	default:
		return nil, fmt.Errorf("%w: %w", errTransferFailed, err)
	}
}

// runLeadershipTransfer is `raftmq admin leadershipTransfer -n NAMESRV
// -b brokerName [-t nodeId]`.
func runLeadershipTransfer(ctx context.Context, s *adminSession, in flagValues) (*client.LeadershipTransfer, error) {
	brokerName, target := in.str("brokerName"), in.str("targetId")
	gs, err := s.raftGroups(ctx, "", brokerName)
	if err != nil {
		return nil, err
	}
	g := gs[0]
	if target != "" && target == g.LeaderID {
		return nil, fmt.Errorf("%w: %s is already the leader of %s", errAdminUsage, target, brokerName)
	}
	return s.transfer(ctx, g, target)
}

// runBalanceLeaders is `raftmq admin balanceLeaders -n NAMESRV [-c
// cluster] [--dry-run]`: the plan with each move's outcome, printed even
// when some moves failed.
func runBalanceLeaders(ctx context.Context, s *adminSession, in flagValues) ([]client.LeaderMove, error) {
	gs, err := s.raftGroups(ctx, in.str("clusterName"), "")
	if err != nil {
		return nil, err
	}
	moves := client.PlanLeaderBalance(gs)
	if err := s.a.BalanceLeaders(ctx, gs, moves, in.bool("dry-run"), s.f.timeout); err != nil {
		return moves, partialFailure{fmt.Errorf("%w: %w", errTransferFailed, err)}
	}
	return moves, nil
}

func tableBalance(w *tabwriter.Writer, moves []client.LeaderMove) {
	if len(moves) == 0 {
		fmt.Fprintln(w, "leaders already balanced; nothing to move")
		return
	}
	columns([]any{"#Broker Name", "#From", "#To", "#Reason", "#Result"}, func(m client.LeaderMove) []any {
		return []any{m.BrokerName, orDash(m.From), orDash(m.To), m.Reason, m.Result}
	})(w, moves)
}

// catchupNote says what a member's full-data catch-up and a learner's
// promotion wait for ("" when there is nothing to say).
func catchupNote(m client.RaftGroupMember) string {
	learner := m.Suffrage != "" && m.Suffrage != "Voter"
	switch {
	case m.Catchup != nil && m.Catchup.Pending:
		n := "catching up"
		if learner {
			n = "learner, catching up"
		}
		if left := m.Catchup.BytesTotal - m.Catchup.BytesDone; m.Catchup.BytesTotal > 0 && left > 0 {
			n += fmt.Sprintf(": %.1f MB left", float64(left)/1e6)
		} else if m.Catchup.Phase != "" {
			n += ": " + m.Catchup.Phase
		}
		if p := m.Catchup.PaceBytesPerSecond; p > 0 {
			n += fmt.Sprintf(" at %.1f MiB/s", float64(p)/(1<<20))
		}
		if m.Catchup.LastError != "" {
			n += " (last error: " + m.Catchup.LastError + ")"
		}
		if learner {
			return n + "; not promoted until done"
		}
		return n + "; does not stand for election"
	case m.Promotion != nil:
		switch m.Promotion.Waiting {
		case "log":
			return fmt.Sprintf("learner, promotion waits for its log: %d entries behind", m.Promotion.Lag)
		case "status":
			return "learner, promotion waits: the leader cannot ask it for its catch-up (" + m.Promotion.Error + ")"
		}
		return "learner, promotion waits for its catch-up"
	}
	return ""
}
