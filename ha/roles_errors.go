package ha

import "errors"

// Sentinel errors of the role-change half of package ha (roles.go,
// transfer.go). They sit beside gossip_errors.go because the two halves are
// owned separately; merge both into errors.go when convenient.
var (
	// ErrNotLeader is returned by leadership transfer on a node that is
	// not the leader (only the leader can hand leadership over).
	ErrNotLeader = errors.New("ha: not the raft leader")
	// ErrUnknownServer means a transfer target is not a member of the
	// group's configuration.
	ErrUnknownServer = errors.New("ha: unknown raft server")
	// ErrRolesClosed is returned after Roles.Close.
	ErrRolesClosed = errors.New("ha: role observer closed")
)
