package namesrv

import "errors"

// ErrInvalidConfig is wrapped by Config.Validate errors; the message names
// the offending key.
var ErrInvalidConfig = errors.New("namesrv: invalid config")

// ErrUnregisterQueueFull is returned when the batch-unregistration queue is
// full; the broker will be removed later by the inactive-broker scan.
var ErrUnregisterQueueFull = errors.New("namesrv: unregister queue full")

// ErrKVPersist is wrapped when the KV config file cannot be written; the
// change is undone in the table too (reads never show what a restart
// would lose), and the error names the file.
var ErrKVPersist = errors.New("namesrv: persisting KV config failed")

// ErrKVLimit is wrapped when a KV config put would exceed KVLimits; the
// message names the limit's key. Nothing was changed.
var ErrKVLimit = errors.New("namesrv: KV config limit")

// ErrAlreadyStarted is returned by Start/Run on a server that was started.
var ErrAlreadyStarted = errors.New("namesrv: already started")

// ErrRegistrationIgnored is returned by RegisterBroker for a registration
// it ignored, which is still answered SUCCESS: a stale one (another
// address holds the brokerId with a newer state version, as RocketMQ
// ignores it), or one read from a connection that has closed since (its
// close's removal would not undo it).
var ErrRegistrationIgnored = errors.New("namesrv: registration ignored")

// ErrBrokerNameInOtherCluster is wrapped when a broker registers under a
// brokerName another cluster's group holds: the tables key groups by name
// alone, so the two groups' members would mix in both clusters' routes.
// The message names both clusters.
var ErrBrokerNameInOtherCluster = errors.New("namesrv: broker name registered in another cluster")
