package wire

// The answers of raftmq's Raft admin codes: RAFT_STATUS (30001) and
// LEADERSHIP_TRANSFER (30002). The broker writes them; the admin client,
// the CLI and the web console read them.

// RaftStatus is the RAFT_STATUS answer body: one member's view of its
// group. hashicorp/raft does not expose the leader's per-follower match
// index, so lag and last contact per follower are computed by the admin
// client from every member's own status (LastLogIndex, AppliedIndex and
// LastContactMillis as each follower reports them).
type RaftStatus struct {
	SelfID string `json:"selfId"`
	// RemotingAddr is left empty by the broker (a follower does not know
	// its own advertised address); the admin client fills in the address it
	// asked.
	RemotingAddr      string `json:"remotingAddr"`
	State             string `json:"state"`
	Serving           bool   `json:"serving"` // leader and past its barrier: accepts writes
	Term              uint64 `json:"term"`
	LeaderID          string `json:"leaderId"`
	LeaderAddr        string `json:"leaderAddr"`
	PreferredLeaderID string `json:"preferredLeaderId"`
	LastLogIndex      uint64 `json:"lastLogIndex"`
	LastLogTerm       uint64 `json:"lastLogTerm"`
	CommitIndex       uint64 `json:"commitIndex"`
	AppliedIndex      uint64 `json:"appliedIndex"`
	FSMPending        uint64 `json:"fsmPending"`
	LastSnapshotIndex uint64 `json:"lastSnapshotIndex"`
	// LastContactMillis is how long ago this member last heard from a
	// leader: 0 on the leader itself, -1 when it never did.
	LastContactMillis int64 `json:"lastContactMillis"`
	// LogStopped is the write failure (a full disk, an I/O error) that
	// stopped this member's Raft log; empty while it accepts appends. A
	// member whose log stays stopped acknowledges nothing and needs a
	// restart once the cause is fixed.
	LogStopped string `json:"logStopped,omitempty"`
	// ApplyStopped is why this member's FSM stopped (an entry whose
	// ConsumeQueue or index units could not be written, with its index);
	// empty while it applies. The member applies nothing more and needs a
	// restart once the cause is fixed.
	ApplyStopped string `json:"applyStopped,omitempty"`
	// AcksBeforeFsync is true when this member acknowledges appends and
	// votes before they are on disk (flushDiskType=ASYNC_FLUSH with
	// raftAcksBeforeFsync=true): a crash of a majority at once can lose
	// acknowledged messages.
	AcksBeforeFsync bool `json:"acksBeforeFsync"`
	// SegmentSize is this member's CommitLog segment size
	// (mappedFileSizeCommitLog). It must be equal on every member: log
	// positions, and so offset msgIds, depend on it. 0 from a build
	// before it was reported.
	SegmentSize int64        `json:"segmentSize,omitempty"`
	Members     []RaftMember `json:"members"`
	// Stats is raft.Stats() verbatim, for anything not lifted above.
	Stats map[string]string `json:"stats"`
	// Catchup is this member's full-data catch-up after a snapshot
	// install (nil when it never needed one): while Pending it does not
	// stand for election.
	Catchup *CatchupStatus `json:"catchup,omitempty"`
	// Promotions are the learners this leader waits to promote and what
	// for (broker/member_promote.go).
	Promotions []PromotionStatus `json:"promotions,omitempty"`
}

// LeadershipTransferResult is the LEADERSHIP_TRANSFER answer body.
type LeadershipTransferResult struct {
	FromID        string `json:"fromId"`
	NewLeaderID   string `json:"newLeaderId"`
	NewLeaderAddr string `json:"newLeaderAddr"`
	Term          uint64 `json:"term"`
	TookMillis    int64  `json:"tookMillis"`
}

// CatchupStatus is a member's catch-up progress (RAFT_STATUS "catchup").
type CatchupStatus struct {
	// Pending is true while the member lacks retained data before its
	// snapshot; it does not stand for election meanwhile.
	Pending bool `json:"pending"`
	// Phase is "log", "queues", "index" or "" (idle).
	Phase string `json:"phase,omitempty"`
	// BytesDone and BytesTotal count the CommitLog bytes fetched this run.
	BytesDone  int64 `json:"bytesDone"`
	BytesTotal int64 `json:"bytesTotal"`
	// Units counts queue units taken.
	Units int64 `json:"units"`
	// Indexed counts backfilled messages put into the IndexFile.
	Indexed int64 `json:"indexed"`
	// LastError is the last failed attempt's error ("" if none).
	LastError string `json:"lastError,omitempty"`
	// TookMillis is how long the last completed catch-up took.
	TookMillis int64 `json:"tookMillis,omitempty"`
	// PaceBytesPerSecond is the catch-up pace now: the one this member
	// fetches at, or, on a leader serving a catch-up with the adaptive
	// pace, the one it asks for (0: neither).
	PaceBytesPerSecond int64 `json:"paceBytesPerSecond,omitempty"`
}

// PromotionStatus is the leader's view of a learner it waits to promote
// (RAFT_STATUS "promotions").
type PromotionStatus struct {
	ID string `json:"id"`
	// Lag is the learner's Raft lag in entries: the leader's last index
	// minus the index the learner acknowledged.
	Lag uint64 `json:"lag"`
	// Waiting is what the promotion waits for: "log" (the Raft lag),
	// "catchup" (the learner's catch-up is pending) or "status" (the
	// learner could not be asked).
	Waiting string `json:"waiting"`
	// Catchup is the learner's last answer (nil before one).
	Catchup *CatchupStatus `json:"catchup,omitempty"`
	// Error is why the learner could not be asked ("" when it answered).
	Error string `json:"error,omitempty"`
	// WaitedMillis is how long the promotion has waited.
	WaitedMillis int64 `json:"waitedMillis"`
}

// BytesLeft is how many CommitLog bytes the learner's catch-up still has
// to fetch as of its last answer (0 when unknown or done).
func (p PromotionStatus) BytesLeft() int64 {
	if p.Catchup == nil {
		return 0
	}
	return max(p.Catchup.BytesTotal-p.Catchup.BytesDone, 0)
}
