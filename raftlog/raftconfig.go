package raftlog

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Config is the Raft part of broker.conf. Key names follow RocketMQ's
// DLedger keys where they exist (enableDLegerCommitLog, dLegerGroup,
// dLegerPeers, dLegerSelfId, preferredLeaderId); the timing keys are raftmq's
// own (raft*), in milliseconds like every RocketMQ interval key.
type Config struct {
	// EnableDLegerCommitLog turns on Raft mode: the CommitLog is the Raft log.
	EnableDLegerCommitLog bool `prop:"enableDLegerCommitLog"`
	// DLegerGroup names the Raft group; by convention the brokerName.
	DLegerGroup string `prop:"dLegerGroup"`
	// DLegerPeers lists the members as "id-host:port" separated by ";", e.g.
	// "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913". The address
	// is the Raft transport's. IDs must not contain "-".
	DLegerPeers string `prop:"dLegerPeers"`
	// DLegerSelfID is this node's id in DLegerPeers.
	DLegerSelfID string `prop:"dLegerSelfId"`
	// PreferredLeaderID, if set, is the member leadership is moved back to
	// after restarts (package ha acts on it).
	PreferredLeaderID string `prop:"preferredLeaderId"`

	// HeartbeatTimeout: a follower without contact from the leader for a
	// random time in [1x, 2x) of this starts an election. hashicorp's 1 s
	// default gives 2–3 s failovers; 300 ms suits a LAN.
	HeartbeatTimeout time.Duration `prop:"raftHeartbeatTimeout"`
	// ElectionTimeout bounds a candidate's election round; >= HeartbeatTimeout.
	ElectionTimeout time.Duration `prop:"raftElectionTimeout"`
	// LeaderLeaseTimeout: a leader that cannot reach a quorum for this long
	// steps down; <= HeartbeatTimeout. Short leases make a partitioned leader
	// stop acknowledging sooner.
	LeaderLeaseTimeout time.Duration `prop:"raftLeaderLeaseTimeout"`
	// CommitTimeout is how long the leader waits without new entries before
	// an empty AppendEntries carries the commit index to followers; it bounds
	// how stale a follower's applied state (and slave reads) can be.
	CommitTimeout time.Duration `prop:"raftCommitTimeout"`
	// SnapshotInterval is how often Raft checks whether to snapshot.
	// raftmq snapshots are small markers, so they are taken often: restart
	// replays only the log after the last one.
	SnapshotInterval time.Duration `prop:"raftSnapshotInterval"`
	// SnapshotThreshold is how many new entries trigger a snapshot.
	SnapshotThreshold uint64 `prop:"raftSnapshotThreshold"`
	// TrailingLogs is how many entries Raft keeps after a snapshot. It must
	// stay huge: Raft's compaction would delete messages, and only the
	// retention policy may (LogStore.DeleteSegmentsBefore). Default MaxUint64,
	// which makes Raft never compact.
	TrailingLogs uint64 `prop:"raftTrailingLogs"`
	// MaxAppendEntries caps entries per AppendEntries RPC (each entry is a
	// batch of messages already).
	MaxAppendEntries int `prop:"raftMaxAppendEntries"`
	// SnapshotRetain is how many snapshots the file snapshot store keeps.
	SnapshotRetain int `prop:"raftSnapshotRetain"`
	// TransportMaxPool is the TCP transport's pooled connections per peer.
	TransportMaxPool int `prop:"raftTransportMaxPool"`
	// TransportTimeout is the TCP transport's I/O timeout.
	TransportTimeout time.Duration `prop:"raftTransportTimeout"`
}

// minTrailingLogs is the smallest TrailingLogs Validate accepts: below it
// Raft's own compaction could delete message segments' entries.
const minTrailingLogs = 1 << 40

// DefaultConfig returns LAN-tuned defaults with Raft mode off.
func DefaultConfig() Config {
	return Config{
		DLegerGroup:        "",
		HeartbeatTimeout:   300 * time.Millisecond,
		ElectionTimeout:    300 * time.Millisecond,
		LeaderLeaseTimeout: 250 * time.Millisecond,
		CommitTimeout:      20 * time.Millisecond,
		SnapshotInterval:   30 * time.Second,
		SnapshotThreshold:  8192,
		TrailingLogs:       math.MaxUint64,
		MaxAppendEntries:   64,
		SnapshotRetain:     3,
		TransportMaxPool:   3,
		TransportTimeout:   10 * time.Second,
	}
}

// Peer is one member of the group.
type Peer struct {
	// ID is the member id (raft.ServerID).
	ID string
	// Addr is its Raft transport address, host:port.
	Addr string
}

// ParsePeers parses a dLegerPeers value.
func ParsePeers(s string) ([]Peer, error) {
	var out []Peer
	ids, addrs := map[string]bool{}, map[string]bool{}
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "-")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("%w: dLegerPeers entry %q: want id-host:port", ErrInvalidConfig, part)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%w: dLegerPeers entry %q: %v", ErrInvalidConfig, part, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 || host == "" {
			return nil, fmt.Errorf("%w: dLegerPeers entry %q: bad host or port", ErrInvalidConfig, part)
		}
		if ids[id] || addrs[addr] {
			return nil, fmt.Errorf("%w: dLegerPeers: %q repeats an id or address", ErrInvalidConfig, part)
		}
		ids[id], addrs[addr] = true, true
		out = append(out, Peer{ID: id, Addr: addr})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: dLegerPeers is empty", ErrInvalidConfig)
	}
	return out, nil
}

// Validate checks the config; with Raft mode off only the timing keys are
// checked. Every setting at fault is reported (errors.Join); each error
// wraps ErrInvalidConfig and names the key.
func (c *Config) Validate() error {
	var errs []error
	if c.EnableDLegerCommitLog {
		if strings.TrimSpace(c.DLegerPeers) == "" {
			errs = append(errs, fmt.Errorf("%w: dLegerPeers is empty: list the group's members as id-host:port;... "+
				"(one member is a one-node group: dLegerPeers=n0-127.0.0.1:40911 with dLegerSelfId=n0)", ErrInvalidConfig))
		} else if peers, err := ParsePeers(c.DLegerPeers); err != nil {
			errs = append(errs, err)
		} else {
			if !hasPeer(peers, c.DLegerSelfID) {
				errs = append(errs, fmt.Errorf("%w: dLegerSelfId %q is not in dLegerPeers", ErrInvalidConfig, c.DLegerSelfID))
			}
			if c.PreferredLeaderID != "" && !hasPeer(peers, c.PreferredLeaderID) {
				errs = append(errs, fmt.Errorf("%w: preferredLeaderId %q is not in dLegerPeers", ErrInvalidConfig, c.PreferredLeaderID))
			}
		}
		if c.DLegerGroup == "" {
			errs = append(errs, fmt.Errorf("%w: dLegerGroup is empty (use the brokerName)", ErrInvalidConfig))
		}
	}
	if c.TrailingLogs < minTrailingLogs {
		errs = append(errs, fmt.Errorf("%w: raftTrailingLogs %d would let Raft delete messages; keep it >= %d (retention deletes segments)",
			ErrInvalidConfig, c.TrailingLogs, uint64(minTrailingLogs)))
	}
	if c.SnapshotRetain < 1 || c.TransportMaxPool < 1 || c.TransportTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%w: raftSnapshotRetain, raftTransportMaxPool and raftTransportTimeout must be positive", ErrInvalidConfig))
	}
	rc := c.raftConfig("validate", nil)
	if err := raft.ValidateConfig(rc); err != nil {
		errs = append(errs, fmt.Errorf("%w: %v (keys raftHeartbeatTimeout, raftElectionTimeout, raftLeaderLeaseTimeout, raftCommitTimeout, raftSnapshotInterval, raftMaxAppendEntries)",
			ErrInvalidConfig, err))
	}
	return errors.Join(errs...)
}

func hasPeer(peers []Peer, id string) bool {
	for _, p := range peers {
		if p.ID == id {
			return true
		}
	}
	return false
}

// Peers returns the parsed dLegerPeers.
func (c *Config) Peers() ([]Peer, error) { return ParsePeers(c.DLegerPeers) }

// SelfAddr returns this node's Raft transport address from dLegerPeers.
func (c *Config) SelfAddr() (string, error) {
	peers, err := c.Peers()
	if err != nil {
		return "", err
	}
	for _, p := range peers {
		if p.ID == c.DLegerSelfID {
			return p.Addr, nil
		}
	}
	return "", fmt.Errorf("%w: dLegerSelfId %q is not in dLegerPeers", ErrInvalidConfig, c.DLegerSelfID)
}

// Configuration returns the group as a raft.Configuration of voters, for
// BootstrapCluster. Every member bootstraps with the same one, so the
// configuration entry at index 1 is byte-identical everywhere.
func (c *Config) Configuration() (raft.Configuration, error) {
	peers, err := c.Peers()
	if err != nil {
		return raft.Configuration{}, err
	}
	var conf raft.Configuration
	for _, p := range peers {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
	}
	return conf, nil
}

// RaftConfig returns the hashicorp/raft config for this node, validated.
func (c *Config) RaftConfig(logger hclog.Logger) (*raft.Config, error) {
	rc := c.raftConfig(c.DLegerSelfID, logger)
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return rc, nil
}

func (c *Config) raftConfig(id string, logger hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(id)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.SnapshotInterval = c.SnapshotInterval
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.TrailingLogs = c.TrailingLogs
	rc.MaxAppendEntries = c.MaxAppendEntries
	if logger != nil {
		rc.Logger = logger
	} else {
		rc.Logger = hclog.NewNullLogger()
	}
	return rc
}
