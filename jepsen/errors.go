package jepsen

import "errors"

// Sentinel errors of the chaos suite. Callers compare with errors.Is.
var (
	// ErrBuild means the raftmq binary could not be built from the module.
	ErrBuild = errors.New("jepsen: building the raftmq binary failed")
	// ErrNotReady means the cluster did not elect a serving leader (or the
	// name server did not answer) within the start timeout.
	ErrNotReady = errors.New("jepsen: cluster not ready")
	// ErrNoLeader means no node reported itself as the serving leader when a
	// nemesis needed one.
	ErrNoLeader = errors.New("jepsen: no leader known")
	// ErrUnknownNemesis names a nemesis that does not exist.
	ErrUnknownNemesis = errors.New("jepsen: unknown nemesis")
	// ErrUnknownProfile names a profile that does not exist.
	ErrUnknownProfile = errors.New("jepsen: unknown profile")
	// ErrUnsupported means a nemesis needs something this host lacks (root,
	// strace, tmpfs); the scheduler skips such a nemesis.
	ErrUnsupported = errors.New("jepsen: nemesis unsupported on this host")
	// ErrInvalid means the suite found a lost, phantom or inconsistent
	// message, or two leaders in one term: the run's verdict is "invalid".
	ErrInvalid = errors.New("jepsen: history is invalid")
)
