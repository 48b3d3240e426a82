package ha

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// DefaultGossipPort is the gossip port of a broker whose listenPort is
// RocketMQ's default 10911: memberlist sits at listenPort+2 (the port
// table in README.md). Callers that derive ports set BindPort.
const DefaultGossipPort = 10913

// GossipConfig configures one node's memberlist instance. Load it from a
// broker.conf / namesrv.conf with internal/config (durations are written in
// milliseconds, e.g. gossipProbeIntervalMs=200), starting from
// DefaultGossipConfig.
//
// # Timing and false positives
//
// The defaults are tuned for a LAN (here: loopback) so that a crashed node
// is declared dead in well under a second, instead of the ~5 s of
// memberlist.DefaultLANConfig. Roughly, detection takes up to one probe
// round to reach the dead node (ProbeInterval, longer with more members,
// since each member probes the others round-robin), ProbeTimeout for the
// direct ping, the rest of the probe interval for indirect and TCP pings,
// then the suspicion timeout SuspicionMult × max(1, log10(members)) ×
// ProbeInterval (400 ms with the defaults and fewer than 10 members) during
// which the node can refute.
//
// The price is false positives. A node that cannot answer pings for longer
// than about ProbeTimeout + SuspicionMult × ProbeInterval — a long GC pause,
// a stop-the-world fsync stall, CPU starvation on a small box (a 2-core
// test machine running several test suites at once is exactly that), a VM
// pause — is declared dead by its peers: name servers drop it from
// routes and, if it was the Raft leader, clients move away from it. This is
// recoverable: when the node runs again it sees the dead/suspect message
// about itself, refutes it with a higher incarnation, and the others report
// it as joined again (and it re-registers with the name servers). It may
// see no claim it must refute — one about an older incarnation than its
// own, as after a restart or meta update whose broadcast the stall cut
// short, is dropped silently — so a node that notices it stood still for
// longer than ProbeTimeout + SuspicionMult × ProbeInterval also syncs with
// its seeds and re-registers (gossip_stall.go). Raft, not
// gossip, decides leadership, so a false positive never causes a split
// brain; it only costs a route flap. memberlist also backs off by itself
// (AwarenessMaxMultiplier): a node that notices it is missing its own
// deadlines stretches its probe timeouts.
//
// If the logs show members flapping dead→joined while the processes were
// alive, raise gossipSuspicionMult first (3–4), then gossipProbeTimeoutMs
// (200–500) and gossipProbeIntervalMs (500–1000); the detection time grows
// roughly linearly with both.
type GossipConfig struct {
	// Name is the node's unique name in the pool (e.g. "broker-a-n0" or
	// "namesrv-1"). Two live nodes with one name conflict; a restarted node
	// must reuse its name to take its place.
	Name string `prop:"gossipNodeName"`

	// BindAddr and BindPort are where memberlist listens, on UDP and TCP
	// alike (it needs both on the same port). Port 0 picks a free port.
	BindAddr string `prop:"gossipBindAddr"`
	BindPort int    `prop:"gossipBindPort"`

	// AdvertiseAddr and AdvertisePort are what peers use to reach this
	// node; empty/0 means the bind address (or, for 0.0.0.0, the first
	// private IP memberlist finds).
	AdvertiseAddr string `prop:"gossipAdvertiseAddr"`
	AdvertisePort int    `prop:"gossipAdvertisePort"`

	// Seeds is a comma- or semicolon-separated list of host:port gossip
	// addresses to join (RocketMQ's namesrvAddr uses ';'; both work). It may
	// include this node's own address; the first node of a pool simply finds
	// nobody and the others join it later.
	Seeds string `prop:"gossipSeeds"`

	// Label, when set, must match on every member: it keeps two pools that
	// share a network (e.g. two dev clusters) from merging.
	Label string `prop:"gossipLabel"`
	// SecretKey encrypts and authenticates every gossip message
	// (memberlist's AES-GCM keyring): base64 of 16, 24 or 32 bytes, the
	// same on every member. A comma-separated list rotates keys: the first
	// encrypts, all decrypt. Empty: gossip is plaintext and anyone who
	// reaches the port can join the pool (see gossip_key.go).
	SecretKey string `prop:"gossipSecretKey"`

	// ProbeInterval is how often each node pings one other node.
	ProbeInterval time.Duration `prop:"gossipProbeIntervalMs"`
	// ProbeTimeout is how long a direct ping may take before indirect
	// pings through other members are tried.
	ProbeTimeout time.Duration `prop:"gossipProbeTimeoutMs"`
	// SuspicionMult scales the time a suspected node has to refute before
	// it is declared dead (× ProbeInterval × max(1, log10(n))).
	SuspicionMult int `prop:"gossipSuspicionMult"`
	// SuspicionMaxTimeoutMult bounds the suspicion timeout in big pools,
	// where it starts higher and shrinks as peers confirm the suspicion.
	SuspicionMaxTimeoutMult int `prop:"gossipSuspicionMaxTimeoutMult"`
	// IndirectChecks is how many peers are asked to ping a node that did
	// not answer directly.
	IndirectChecks int `prop:"gossipIndirectChecks"`
	// AwarenessMaxMultiplier caps how far a node stretches its own probe
	// timeouts when it notices it is unhealthy (slow).
	AwarenessMaxMultiplier int `prop:"gossipAwarenessMaxMultiplier"`
	// GossipInterval is how often queued broadcasts (alive, suspect, dead,
	// meta updates) are sent to GossipNodes random peers.
	GossipInterval time.Duration `prop:"gossipIntervalMs"`
	GossipNodes    int           `prop:"gossipNodes"`
	// RetransmitMult: each broadcast is sent RetransmitMult × log10(n+1)
	// times.
	RetransmitMult int `prop:"gossipRetransmitMult"`
	// PushPullInterval is the period of full state syncs over TCP, which
	// repair anything a lost UDP packet missed.
	PushPullInterval time.Duration `prop:"gossipPushPullIntervalMs"`
	// GossipToTheDeadTime is how long dead nodes keep receiving gossip (so
	// a falsely suspected node learns it must refute) and how long they
	// stay in the member list before being forgotten.
	GossipToTheDeadTime time.Duration `prop:"gossipToTheDeadTimeMs"`
	// DeadNodeReclaimTime is how long after a node died another address may
	// take over its name: a node restarted on a new address/port (new pod
	// IP) rejoins after this. 0 means only after it is forgotten.
	DeadNodeReclaimTime time.Duration `prop:"gossipDeadNodeReclaimTimeMs"`
	// TCPTimeout bounds TCP pings, push/pull and join connections.
	TCPTimeout time.Duration `prop:"gossipTcpTimeoutMs"`

	// JoinRetryInterval is how often a node joins again each seed that may
	// not know it: one that has not answered yet, and, after a member was
	// lost, one that is not a live member (a restarted name server knows
	// nobody until the brokers join it again).
	JoinRetryInterval time.Duration `prop:"gossipJoinRetryIntervalMs"`
	// UpdateTimeout bounds UpdateMeta's wait for its broadcast to go out.
	UpdateTimeout time.Duration `prop:"gossipUpdateTimeoutMs"`
	// LeaveTimeout bounds Close's wait for the leave broadcast.
	LeaveTimeout time.Duration `prop:"gossipLeaveTimeoutMs"`
}

// earliestDeath is the shortest silence after which peers can have
// declared a node dead: a probe timing out, then the shortest suspicion
// (SuspicionMult × ProbeInterval; more members and confirmations only
// lengthen or shorten it towards that floor).
func (c GossipConfig) earliestDeath() time.Duration {
	return c.ProbeTimeout + time.Duration(c.SuspicionMult)*c.ProbeInterval
}

// DefaultGossipConfig returns the LAN-tuned settings described on
// GossipConfig. Name must still be set.
func DefaultGossipConfig() GossipConfig {
	ml := memberlist.DefaultLANConfig()
	return GossipConfig{
		BindAddr:                "0.0.0.0",
		BindPort:                DefaultGossipPort,
		ProbeInterval:           200 * time.Millisecond,
		ProbeTimeout:            100 * time.Millisecond,
		SuspicionMult:           2,
		SuspicionMaxTimeoutMult: ml.SuspicionMaxTimeoutMult,
		IndirectChecks:          ml.IndirectChecks,
		AwarenessMaxMultiplier:  ml.AwarenessMaxMultiplier,
		GossipInterval:          100 * time.Millisecond,
		GossipNodes:             ml.GossipNodes,
		RetransmitMult:          ml.RetransmitMult,
		PushPullInterval:        10 * time.Second,
		GossipToTheDeadTime:     ml.GossipToTheDeadTime,
		DeadNodeReclaimTime:     time.Second,
		TCPTimeout:              2 * time.Second,
		JoinRetryInterval:       time.Second,
		UpdateTimeout:           time.Second,
		LeaveTimeout:            time.Second,
	}
}

// Redact replaces SecretKey, when set, by mask in a config about to be
// shown (GET_BROKER_CONFIG, GET_NAMESRV_CONFIG): with the key anyone could
// join the pool and report members dead, which drops brokers from the
// routes.
func (c *GossipConfig) Redact(mask string) {
	if c.SecretKey != "" {
		c.SecretKey = mask
	}
}

// SeedAddrs splits Seeds into addresses, dropping blanks.
func (c GossipConfig) SeedAddrs() []string {
	var out []string
	for _, s := range strings.FieldsFunc(c.Seeds, func(r rune) bool { return r == ',' || r == ';' }) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func invalid(key, format string, args ...any) error {
	return fmt.Errorf("%w: %s: "+format, append([]any{ErrInvalidGossipConfig, key}, args...)...)
}

// Validate checks every field and names the prop key of the first bad one.
func (c GossipConfig) Validate() error {
	if c.Name == "" {
		return invalid("gossipNodeName", "must be set, distinct per node (e.g. broker-a-n0)")
	}
	if c.BindAddr == "" || net.ParseIP(c.BindAddr) == nil {
		return invalid("gossipBindAddr", "%q is not an IP address", c.BindAddr)
	}
	if c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil {
		return invalid("gossipAdvertiseAddr", "%q is not an IP address", c.AdvertiseAddr)
	}
	for _, p := range []struct {
		key string
		v   int
	}{{"gossipBindPort", c.BindPort}, {"gossipAdvertisePort", c.AdvertisePort}} {
		if p.v < 0 || p.v > 65535 {
			return invalid(p.key, "%d is not a port (0..65535)", p.v)
		}
	}
	for _, s := range c.SeedAddrs() {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return invalid("gossipSeeds", "%q is not host:port", s)
		}
	}
	if _, err := c.keyring(); err != nil {
		return err
	}
	if len(c.Label) > memberlist.LabelMaxSize {
		return invalid("gossipLabel", "longer than %d bytes", memberlist.LabelMaxSize)
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"gossipProbeIntervalMs", c.ProbeInterval},
		{"gossipProbeTimeoutMs", c.ProbeTimeout},
		{"gossipIntervalMs", c.GossipInterval},
		{"gossipPushPullIntervalMs", c.PushPullInterval},
		{"gossipToTheDeadTimeMs", c.GossipToTheDeadTime},
		{"gossipTcpTimeoutMs", c.TCPTimeout},
		{"gossipJoinRetryIntervalMs", c.JoinRetryInterval},
		{"gossipUpdateTimeoutMs", c.UpdateTimeout},
		{"gossipLeaveTimeoutMs", c.LeaveTimeout},
	} {
		if d.v <= 0 {
			return invalid(d.key, "must be positive, got %v", d.v)
		}
	}
	if c.DeadNodeReclaimTime < 0 {
		return invalid("gossipDeadNodeReclaimTimeMs", "must not be negative")
	}
	if c.ProbeTimeout >= c.ProbeInterval {
		// memberlist waits for indirect pings until the end of the probe
		// interval; a timeout as long as the interval leaves them no time.
		return invalid("gossipProbeTimeoutMs", "%v must be shorter than gossipProbeIntervalMs (%v)", c.ProbeTimeout, c.ProbeInterval)
	}
	for _, m := range []struct {
		key string
		v   int
	}{
		{"gossipSuspicionMult", c.SuspicionMult},
		{"gossipSuspicionMaxTimeoutMult", c.SuspicionMaxTimeoutMult},
		{"gossipAwarenessMaxMultiplier", c.AwarenessMaxMultiplier},
		{"gossipNodes", c.GossipNodes},
		{"gossipRetransmitMult", c.RetransmitMult},
	} {
		if m.v < 1 {
			return invalid(m.key, "must be at least 1, got %d", m.v)
		}
	}
	if c.IndirectChecks < 0 {
		return invalid("gossipIndirectChecks", "must not be negative")
	}
	return nil
}

// memberlistConfig starts from memberlist's LAN preset and applies c.
func (c GossipConfig) memberlistConfig() *memberlist.Config {
	ml := memberlist.DefaultLANConfig()
	ml.Name = c.Name
	ml.BindAddr = c.BindAddr
	ml.BindPort = c.BindPort
	ml.AdvertiseAddr = c.AdvertiseAddr
	ml.AdvertisePort = c.AdvertisePort
	if ml.AdvertisePort == 0 {
		ml.AdvertisePort = c.BindPort
	}
	ml.Label = c.Label
	ml.ProbeInterval = c.ProbeInterval
	ml.ProbeTimeout = c.ProbeTimeout
	ml.SuspicionMult = c.SuspicionMult
	ml.SuspicionMaxTimeoutMult = c.SuspicionMaxTimeoutMult
	ml.IndirectChecks = c.IndirectChecks
	ml.AwarenessMaxMultiplier = c.AwarenessMaxMultiplier
	ml.GossipInterval = c.GossipInterval
	ml.GossipNodes = c.GossipNodes
	ml.RetransmitMult = c.RetransmitMult
	ml.PushPullInterval = c.PushPullInterval
	ml.GossipToTheDeadTime = c.GossipToTheDeadTime
	ml.DeadNodeReclaimTime = c.DeadNodeReclaimTime
	ml.TCPTimeout = c.TCPTimeout
	ml.Keyring, _ = c.keyring() // checked by Validate
	return ml
}
