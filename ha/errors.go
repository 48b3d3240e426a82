package ha

import "errors"

// Sentinel errors of package ha. Callers compare with errors.Is; returned
// errors wrap them with the detail (field, node, address).

// Gossip (gossip*.go, meta.go).
var (
	// ErrInvalidGossipConfig is wrapped by GossipConfig.Validate for a
	// missing or out-of-range setting; the message names the prop key.
	ErrInvalidGossipConfig = errors.New("ha: invalid gossip config")

	// ErrMetaTooLarge means an encoded NodeMeta exceeds memberlist's
	// MetaMaxSize (512 bytes). Shorten the names or addresses it carries.
	ErrMetaTooLarge = errors.New("ha: node meta too large")

	// ErrInvalidMeta means a NodeMeta cannot be encoded: an unknown node kind
	// or Raft role, or a string that is not valid UTF-8.
	ErrInvalidMeta = errors.New("ha: invalid node meta")

	// ErrCorruptMeta means gossiped metadata bytes do not decode as a
	// NodeMeta: truncated, an unknown version or code, a non-canonical
	// varint, invalid UTF-8 or trailing bytes. The member is still tracked,
	// with an empty NodeMeta.
	ErrCorruptMeta = errors.New("ha: corrupt node meta")

	// ErrBind means memberlist could not bind its UDP and TCP listeners on
	// the gossip address, usually because the port is taken: pick another
	// gossipBindPort.
	ErrBind = errors.New("ha: cannot bind gossip port")

	// ErrJoin means none of the given seed addresses could be contacted.
	ErrJoin = errors.New("ha: cannot join gossip pool")

	// ErrNotStarted means an operation needs Start to have succeeded first.
	ErrNotStarted = errors.New("ha: gossip not started")

	// ErrAlreadyStarted means Start was called twice; build a new Gossip
	// to restart a node.
	ErrAlreadyStarted = errors.New("ha: gossip already started")

	// ErrClosed means the Gossip was closed (Close or Shutdown).
	ErrClosed = errors.New("ha: gossip closed")

	// ErrBroadcastTimeout means a metadata update or leave message was
	// applied locally but memberlist could not confirm it was sent to any
	// peer within the timeout; push/pull sync still spreads it later.
	ErrBroadcastTimeout = errors.New("ha: gossip broadcast timeout")
)

// Role changes and leadership transfer (roles.go, transfer.go).
var (
	// ErrNotLeader is returned by leadership transfer on a node that is
	// not the leader (only the leader can hand leadership over).
	ErrNotLeader = errors.New("ha: not the raft leader")
	// ErrUnknownServer means a transfer target is not a member of the
	// group's configuration.
	ErrUnknownServer = errors.New("ha: unknown raft server")
	// ErrNotVoter means a transfer target is a nonvoter (a member being
	// added, not promoted yet): it cannot win an election.
	ErrNotVoter = errors.New("ha: raft server is not a voter")
	// ErrRolesClosed is returned after Roles.Close.
	ErrRolesClosed = errors.New("ha: role observer closed")
)
