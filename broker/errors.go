package broker

import "errors"

// ErrNotLeader is returned (wrapped, with the leader's address when known)
// by Replica writes on a node that is not the leader. Processors answer it
// with SERVICE_NOT_AVAILABLE, remark "not leader, leader is <addr>" and
// extField leaderAddr, which makes official clients retry elsewhere and the
// raftmq SDK go straight to the leader.
var ErrNotLeader = errors.New("broker: not the raft leader")

// ErrInvalidGroupConfig is returned by GroupConfig.Validate for a bad group
// key (raftBatchMaxBytes, applyTimeout, ...); the message names the key.
var ErrInvalidGroupConfig = errors.New("broker: invalid group config")
