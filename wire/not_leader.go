package wire

import "strings"

// notLeaderRemark starts the remark of every raftmq not-leader answer
// (SERVICE_NOT_AVAILABLE). While no leader is known the answer carries no
// ExtLeaderAddr, and the remark is what tells it from the other
// SERVICE_NOT_AVAILABLE answers (a full disk, a store shutting down), which a
// client must not wait out as an election.
const notLeaderRemark = "not leader; leader is "

// NotLeaderRemark is the remark of a not-leader answer naming leader ("" while
// an election is in progress).
func NotLeaderRemark(leader string) string {
	if leader == "" {
		leader = "unknown (election in progress)"
	}
	return notLeaderRemark + leader
}

// IsNotLeaderRemark reports whether remark is, or wraps, a not-leader answer's.
func IsNotLeaderRemark(remark string) bool {
	return strings.Contains(remark, notLeaderRemark)
}
