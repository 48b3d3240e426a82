package broker

import (
	"errors"

	"github.com/hashicorp/raft"
)

// A member that lacks retained data (catchup.go) must not become leader:
// as leader it could not serve older offsets, and the group would be down
// to the copies on the other members. hashicorp/raft has no per-member
// "do not stand" switch short of a configuration change, so the transport
// Raft is given refuses, while catch-up is pending, this member's own
// RequestVote and RequestPreVote. With pre-vote (on by default), a
// candidate whose pre-vote fails does not even raise its term, so the
// refusal disturbs nobody. It still grants votes to others and
// acknowledges appends: what Raft asks of a voter is its log's tail, which
// it holds, and refusing votes would turn a leader failure during a long
// catch-up into an outage of a three-member group.
//
// Incoming RPCs are not filtered: that would put a goroutine hand-off on
// every AppendEntries (measured at about -10 % GroupPut throughput for the
// membership filter of ADR 0016). So a leadership transfer aimed at a
// member catching up (TimeoutNow skips pre-vote) makes it start an
// election it cannot win; the group then elects another member after an
// election timeout, a write gap like a crash's instead of a transfer's.

// errCatchupPending is the error those refused RPCs return.
var errCatchupPending = errors.New("raftmq: this member is catching up on retained data and does not stand for election")

// catchupTransport wraps the Raft transport (see above).
type catchupTransport struct {
	raft.Transport
	blocked func() bool
}

// catchupPreVoteTransport is catchupTransport for transports with pre-vote,
// so Raft's feature check (raft.WithPreVote) sees the same as unwrapped.
type catchupPreVoteTransport struct {
	*catchupTransport
	pv raft.WithPreVote
}

// wrapCatchupTransport returns the transport Raft runs on.
func wrapCatchupTransport(t raft.Transport, blocked func() bool) raft.Transport {
	ct := &catchupTransport{Transport: t, blocked: blocked}
	if pv, ok := t.(raft.WithPreVote); ok {
		return &catchupPreVoteTransport{catchupTransport: ct, pv: pv}
	}
	return ct
}

// RequestVote implements raft.Transport.
func (t *catchupTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if t.blocked() {
		return errCatchupPending
	}
	return t.Transport.RequestVote(id, target, args, resp)
}

// RequestPreVote implements raft.WithPreVote.
func (t *catchupPreVoteTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	if t.blocked() {
		return errCatchupPending
	}
	return t.pv.RequestPreVote(id, target, args, resp)
}
