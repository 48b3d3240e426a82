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
