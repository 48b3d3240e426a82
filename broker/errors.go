package broker

import "errors"

// ErrNotLeader is returned (wrapped, with the leader's address when known)
// by Replica writes on a node that is not the leader. Processors answer it
// with SERVICE_NOT_AVAILABLE, remark wire.NotLeaderRemark and
// extField leaderAddr, which makes official clients retry elsewhere and the
// raftmq SDK go straight to the leader.
var ErrNotLeader = errors.New("broker: not the raft leader")

// ErrInvalidGroupConfig is returned by GroupConfig.Validate for a bad group
// key (raftBatchMaxBytes, applyTimeout, ...); the message names the key.
var ErrInvalidGroupConfig = errors.New("broker: invalid group config")

// ErrNotMember fails a Raft mutual-TLS handshake whose peer certificate
// names no server of the current configuration (see RaftTLSConfig).
var ErrNotMember = errors.New("broker: raft peer certificate names no member of the configuration")

// ErrBadCommand is returned for a Raft command entry that cannot be decoded
// (unknown type or version, malformed fields).
var ErrBadCommand = errors.New("broker: malformed raft command")

// ErrGroupClosed is returned by writes on a group that is shutting down.
var ErrGroupClosed = errors.New("broker: raft group closed")

// ErrApplyTimeout is returned when a replicated write did not commit within
// applyTimeout; its outcome is unknown (the idempotent producer makes a
// retry safe).
var ErrApplyTimeout = errors.New("broker: raft write timed out")

// ErrInvalidBrokerConfig is returned by BrokerConfig.Validate; the message
// names the key at fault.
var ErrInvalidBrokerConfig = errors.New("broker: invalid broker config")

// ErrControllerClosed is returned by Controller calls after Shutdown.
var ErrControllerClosed = errors.New("broker: controller is shut down")
