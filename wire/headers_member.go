package wire

// RaftMemberRequestHeader is the header of raftmq's ADD_RAFT_MEMBER and
// REMOVE_RAFT_MEMBER requests (membership changes of a broker group's
// Raft configuration, answered by the group's leader).
type RaftMemberRequestHeader struct {
	// MemberID is the Raft id (dLegerSelfId) of the member to add or
	// remove.
	MemberID string `ext:"memberId,required"`
	// RaftAddr is the member's Raft transport address, host:port (add
	// only).
	RaftAddr string `ext:"raftAddr,omitempty"`
	// Learner adds the member as a non-voter and stops there (add only);
	// otherwise it is promoted to voter once caught up.
	Learner bool `ext:"learner"`
	// MaxLag is how many Raft entries behind the leader's last index the
	// learner may be when it is promoted (add only; 0: the broker's
	// default).
	MaxLag int64 `ext:"maxLag"`
	// TimeoutMillis bounds the learner's catch-up (add only; 0: the
	// broker's default).
	TimeoutMillis int64 `ext:"timeoutMillis"`
	// Force removes a voter even when the remaining voters that answer the
	// leader are not a quorum of the new configuration (remove only).
	Force bool `ext:"force"`
}

// RaftMember is one server of a broker group's Raft configuration, as
// raftmq's RAFT_STATUS and membership answers list it.
type RaftMember struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	// Suffrage is Voter, Nonvoter (a learner) or Staging.
	Suffrage string `json:"suffrage"`
}

// RaftMemberChange is the JSON body of a successful ADD_RAFT_MEMBER or
// REMOVE_RAFT_MEMBER answer (also of an add whose catch-up timed out,
// then with SYSTEM_ERROR).
type RaftMemberChange struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	// Suffrage is the member's suffrage afterwards: Voter, Nonvoter, or
	// "" once removed.
	Suffrage string `json:"suffrage"`
	// LearnerIndex is the log index of the configuration entry that added
	// the member as a learner (0 when it was a member already).
	LearnerIndex uint64 `json:"learnerIndex"`
	// ChangeIndex is the log index of the last configuration entry the
	// change wrote (the promotion, the learner entry of a learner-only
	// add, or the removal; 0 when it wrote none).
	ChangeIndex uint64 `json:"changeIndex"`
	// Lag is how many entries behind the leader's last index the learner
	// was when it was promoted (or when the wait ended).
	Lag uint64 `json:"lag"`
	// CatchUpMillis is how long the learner took to catch up.
	CatchUpMillis int64 `json:"catchUpMillis"`
	// Members is the configuration afterwards.
	Members []RaftMember `json:"members"`
	// Note says what was already so (a retry of a change that was done).
	Note string `json:"note,omitempty"`
}
