package broker

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/raftmq/raftmq/ha"
	"github.com/raftmq/raftmq/internal/httpmon"
	"github.com/raftmq/raftmq/internal/logging"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// BrokerConfig is a broker node's whole configuration, loadable from a
// RocketMQ broker.conf: RocketMQ's BrokerConfig keys below, the group keys
// (store, Raft, batcher) through the embedded GroupConfig and the gossip
// keys through Gossip. Durations given as bare integers are milliseconds.
type BrokerConfig struct {
	GroupConfig
	// TransactionConfig holds the transaction check-back keys (txn.go).
	TransactionConfig
	// Gossip configures the memberlist member (gossip* keys); a zero bind
	// port means listenPort+2 (see BrokerConfig.GossipConfig for every
	// derived default).
	Gossip ha.GossipConfig
	// ACLConfig holds aclEnable, aclFile and the registration credentials (acl.go).
	ACLConfig
	// LimitsConfig holds the limits against abuse (limits.go).
	LimitsConfig
	// Log is where and how the node logs (logLevel, logFormat, logFile,
	// logFile* rotation keys; read by the raftmq command).
	Log logging.Config
	// TLS holds the tls* keys: the remoting listeners' mode and
	// certificate, and TLS on the links to the name servers.
	TLS remoting.TLSConfig
	// MetricsPort is the monitoring HTTP port (/metrics, /health,
	// /debug/pprof/): 0 means listenPort+3, -1 turns it off.
	MetricsPort int `prop:"metricsPort"`
	// MetricsBindAddr is the address the monitor binds (127.0.0.1 unless
	// set: the endpoints have no authentication); PprofEnable serves
	// /debug/pprof/ there (off by default).
	MetricsBindAddr string `prop:"metricsBindAddr"`
	PprofEnable     bool   `prop:"pprofEnable"`
	// GossipEnable makes the node join the memberlist pool of the name
	// servers and its peers (on by default; off only for tests that share
	// a machine with many clusters).
	GossipEnable bool `prop:"gossipEnable"`

	// BrokerClusterName is the cluster this group registers under.
	BrokerClusterName string `prop:"brokerClusterName"`
	// BrokerName names the group (one brokerName = one Raft group).
	BrokerName string `prop:"brokerName"`
	// NamesrvAddr lists the name servers, "host:port;host:port".
	NamesrvAddr string `prop:"namesrvAddr"`
	// ListenPort is the remoting port (10911); the VIP channel listens on
	// ListenPort-2.
	ListenPort int `prop:"listenPort"`
	// BrokerIP1 is the address clients are told to use (registered with the
	// name servers and written into every msgId).
	BrokerIP1 string `prop:"brokerIP1"`
	// ListenAddr is the host part the remoting servers bind ("0.0.0.0" by
	// default; tests bind 127.0.0.1).
	ListenAddr string `prop:"listenAddr"`
	// VipChannelEnabled starts the second listener on ListenPort-2.
	VipChannelEnabled bool `prop:"vipChannelEnabled"`

	// AutoCreateTopicEnable creates unknown topics on first send and
	// registers TBW102 so clients find a route for them.
	AutoCreateTopicEnable bool `prop:"autoCreateTopicEnable"`
	// AutoCreateSubscriptionGroup creates a consumer group's config on its
	// first heartbeat; off, pulls of a group not created are refused
	// (RocketMQ's built-in groups excepted).
	AutoCreateSubscriptionGroup bool `prop:"autoCreateSubscriptionGroup"`
	// DefaultTopicQueueNums is the queue count of auto-created topics (8).
	DefaultTopicQueueNums int `prop:"defaultTopicQueueNums"`
	// StoreReplyMessageEnable also stores each pushed reply in the reply
	// topic (true, as RocketMQ); see reply.go.
	StoreReplyMessageEnable bool `prop:"storeReplyMessageEnable"`
	// TraceTopicEnable routes MsgTraceTopicName (RMQ_SYS_TRACE_TOPIC) and
	// creates it on first send even with autoCreateTopicEnable off (false).
	TraceTopicEnable  bool   `prop:"traceTopicEnable"`
	MsgTraceTopicName string `prop:"msgTraceTopicName"`
	// RegisterNameServerPeriod is the re-registration period (30 s).
	RegisterNameServerPeriod time.Duration `prop:"registerNameServerPeriod"`
	// RegisterBrokerTimeoutMills bounds one REGISTER_BROKER call (6 s).
	RegisterBrokerTimeoutMills time.Duration `prop:"registerBrokerTimeoutMills"`
	// CompressedRegister sends every REGISTER_BROKER body in RocketMQ's
	// zlib layout (header compressed=true; false). Bodies above
	// registerCompressAbove are compressed regardless, so a topic table
	// past the 16 MiB frame limit still registers (register_compress.go).
	CompressedRegister bool `prop:"compressedRegister"`
	// MessageDelayLevel lists the delay of each level, level 1 first.
	MessageDelayLevel string `prop:"messageDelayLevel"`
	// LongPollingEnable holds pulls that find nothing until a message
	// arrives or the suspend timeout passes.
	LongPollingEnable bool `prop:"longPollingEnable"`
	// ShortPollingTimeMills is how long a pull is held when long polling is
	// off (1 s).
	ShortPollingTimeMills time.Duration `prop:"shortPollingTimeMills"`
	// PullHoldCheckInterval is the hold service's periodic re-check, the
	// safety net behind the new-message wake-up (1 s, raftmq's own key).
	PullHoldCheckInterval time.Duration `prop:"pullHoldCheckInterval"`
	// EnablePropertyFilter turns on SQL92 subscriptions (off by default, as
	// in RocketMQ): consumers may then select messages with a condition
	// over their properties ("a >= 5 AND TAGS <> 'TagB'"), evaluated by the
	// broker at pull time. Off, CHECK_CLIENT_CONFIG refuses a SQL92
	// subscription and pulls of one answer SYSTEM_ERROR, both naming this
	// key. Fixed at start.
	EnablePropertyFilter bool `prop:"enablePropertyFilter"`
	// MaxReconsumeTimes is the default retry limit before the DLQ (16):
	// that of a consumer group without a config of its own, and the one
	// an auto-created group gets (updateSubGroup -r sets a group's own).
	MaxReconsumeTimes int `prop:"maxReconsumeTimes"`
	// ChannelExpiredTimeout drops clients that sent no heartbeat for this
	// long (120 s).
	ChannelExpiredTimeout time.Duration `prop:"channelExpiredTimeout"`
	// RebalanceLockMaxLiveTime is the expiry of an orderly-consumer queue
	// lock (60 s; RocketMQ's rocketmq.broker.rebalance.lockMaxLiveTime).
	RebalanceLockMaxLiveTime time.Duration `prop:"rebalanceLockMaxLiveTime"`
	// SendMessageThreadPoolNums / PullMessageThreadPoolNums size the worker
	// pools of the send and pull processors; the queue capacities bound
	// what waits (beyond it: SYSTEM_BUSY).
	SendMessageThreadPoolNums     int           `prop:"sendMessageThreadPoolNums"`
	PullMessageThreadPoolNums     int           `prop:"pullMessageThreadPoolNums"`
	SendThreadPoolQueueCapacity   int           `prop:"sendThreadPoolQueueCapacity"`
	PullThreadPoolQueueCapacity   int           `prop:"pullThreadPoolQueueCapacity"`
	AdminBrokerThreadPoolNums     int           `prop:"adminBrokerThreadPoolNums"`
	ClientManageThreadPoolNums    int           `prop:"clientManageThreadPoolNums"`
	ConsumerManageThreadPoolNums  int           `prop:"consumerManageThreadPoolNums"`
	ServerChannelMaxIdleTimeSecs  int           `prop:"serverChannelMaxIdleTimeSeconds"`
	ScheduleMessageCheckInterval  time.Duration `prop:"scheduleMessageCheckInterval"`
	TopicChangeCheckInterval      time.Duration `prop:"topicChangeCheckInterval"`
	MaxPullBatch                  int           `prop:"maxPullBatch"`
	ConsumerOffsetCommitCoalescer time.Duration `prop:"consumerOffsetCommitInterval"`

	// MaxIncompleteFrameBytes bounds the memory held by request frames
	// still arriving, summed over the connections of one listener (256
	// MiB, raftmq's own key). A frame's buffer grows as its bytes arrive,
	// so a peer that claims 16 MiB and sends 5 bytes holds a few KiB; a
	// connection whose frame cannot grow within the bound is closed (Warn
	// log, raftmq_broker_incomplete_frame_refusals_total).
	MaxIncompleteFrameBytes int `prop:"maxIncompleteFrameBytes"`
	// MaxBatchMessages bounds the messages of one SEND_BATCH_MESSAGE (4096,
	// raftmq's own key). RocketMQ 4.9 bounds a batch only by its body
	// (maxMessageSize, 4 MiB), which holds about 190,000 empty messages;
	// 4096 still takes a 1 MiB batch of 250-byte messages (the split size
	// of RocketMQ's batch example). Beyond it: MESSAGE_ILLEGAL (13) naming
	// the key.
	MaxBatchMessages int `prop:"maxBatchMessages"`
	// TimerMaxDelaySec is how far ahead a timer message may be due (7
	// days; RocketMQ 5's key, whose default is 3 days). Beyond it a send
	// is refused with MESSAGE_ILLEGAL.
	TimerMaxDelaySec int `prop:"timerMaxDelaySec"`
	// TimerCheckInterval is how often the leader looks for due timer
	// messages (10 ms, raftmq's own key).
	TimerCheckInterval time.Duration `prop:"timerCheckInterval"`
}

// maxQueueNums is the largest queue count of a topic and of a group's
// retry topic: updateTopic, updateSubGroup's retryQueueNums and
// defaultTopicQueueNums are refused beyond it (INVALID_PARAMETER), topics
// created by the broker are clamped to it, and answers that list a topic's
// queues (topicStatus, consumer stats) stop there for a topic stored with
// more by an older version.
const maxQueueNums = 1024

// DefaultConfig returns RocketMQ's broker defaults on top of the group
// defaults: listenPort 10911, DefaultCluster/broker-a, long polling on.
func DefaultConfig() BrokerConfig {
	c := BrokerConfig{
		GroupConfig:                   DefaultGroupConfig(),
		TransactionConfig:             defaultTransactionConfig(),
		Gossip:                        defaultBrokerGossip(),
		Log:                           logging.DefaultConfig(),
		GossipEnable:                  true,
		LimitsConfig:                  defaultLimits(),
		ACLConfig:                     ACLConfig{AclReloadInterval: defaultACLReloadInterval},
		MetricsBindAddr:               httpmon.DefaultBindAddr,
		BrokerClusterName:             "DefaultCluster",
		BrokerName:                    "broker-a",
		NamesrvAddr:                   "127.0.0.1:9876",
		ListenPort:                    10911,
		ListenAddr:                    "0.0.0.0",
		VipChannelEnabled:             true,
		AutoCreateTopicEnable:         true,
		AutoCreateSubscriptionGroup:   true,
		DefaultTopicQueueNums:         8,
		StoreReplyMessageEnable:       true,
		MsgTraceTopicName:             "RMQ_SYS_TRACE_TOPIC",
		RegisterNameServerPeriod:      30 * time.Second,
		RegisterBrokerTimeoutMills:    6 * time.Second,
		MessageDelayLevel:             "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
		LongPollingEnable:             true,
		ShortPollingTimeMills:         time.Second,
		PullHoldCheckInterval:         time.Second,
		MaxReconsumeTimes:             16,
		ChannelExpiredTimeout:         120 * time.Second,
		RebalanceLockMaxLiveTime:      60 * time.Second,
		SendMessageThreadPoolNums:     64,
		PullMessageThreadPoolNums:     16,
		SendThreadPoolQueueCapacity:   10000,
		PullThreadPoolQueueCapacity:   100000,
		AdminBrokerThreadPoolNums:     8,
		ClientManageThreadPoolNums:    8,
		ConsumerManageThreadPoolNums:  8,
		ServerChannelMaxIdleTimeSecs:  120,
		ScheduleMessageCheckInterval:  100 * time.Millisecond,
		TopicChangeCheckInterval:      500 * time.Millisecond,
		MaxPullBatch:                  32,
		ConsumerOffsetCommitCoalescer: 100 * time.Millisecond,
		MaxIncompleteFrameBytes:       256 << 20,
		MaxBatchMessages:              4096,
		TimerMaxDelaySec:              7 * 24 * 3600,
		TimerCheckInterval:            10 * time.Millisecond,
	}
	// A Raft entry must be able to hold the largest message.
	c.RaftBatchMaxBytes = max(c.RaftBatchMaxBytes, c.Store.MaxMessageSize)
	return c
}

// defaultBrokerGossip is ha's LAN preset with the port left 0, so Derive
// and GossipConfig put it at listenPort+2.
func defaultBrokerGossip() ha.GossipConfig {
	g := ha.DefaultGossipConfig()
	g.BindPort = 0
	return g
}

// redactedSecret replaces secrets in GET_BROKER_CONFIG's answer.
const redactedSecret = "******"

// redactSecrets blanks the secrets of a config about to be shown: the
// cluster account's secret and gossipSecretKey.
func (c *BrokerConfig) redactSecrets() {
	if c.ClusterAuthSecretKey != "" {
		c.ClusterAuthSecretKey = redactedSecret
	}
	c.Gossip.Redact(redactedSecret)
}

// RemotingAddr is the address clients use: brokerIP1:listenPort.
func (c *BrokerConfig) RemotingAddr() string {
	return net.JoinHostPort(c.advertiseIP(), strconv.Itoa(c.ListenPort))
}

// VIPAddr is the VIP channel's advertised address (listenPort-2).
func (c *BrokerConfig) VIPAddr() string {
	return net.JoinHostPort(c.advertiseIP(), strconv.Itoa(c.ListenPort-2))
}

func (c *BrokerConfig) advertiseIP() string {
	if c.BrokerIP1 != "" {
		return c.BrokerIP1
	}
	return "127.0.0.1"
}

// Derive fills the settings that follow from others, as RocketMQ does at
// startup: the store host written into every message (and every msgId) is
// the advertised remoting address, the Raft group is named after the
// broker unless dLegerGroup says otherwise, and the gossip port defaults to
// listenPort+2. Call it after loading, before NewGroup.
func (c *BrokerConfig) Derive() error {
	ap, err := netip.ParseAddrPort(c.RemotingAddr())
	if err != nil {
		return fmt.Errorf("%w: brokerIP1/listenPort give %q: %v", ErrInvalidBrokerConfig, c.RemotingAddr(), err)
	}
	c.Store.StoreHost = ap
	if c.Raft.DLegerGroup == "" {
		c.Raft.DLegerGroup = c.BrokerName
	}
	if c.Gossip.BindPort == 0 {
		c.Gossip.BindPort = c.ListenPort + 2
	}
	return nil
}

// NameServers splits NamesrvAddr.
func (c *BrokerConfig) NameServers() []string {
	var out []string
	for _, a := range strings.Split(c.NamesrvAddr, ";") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// FollowerBrokerID is the brokerId this node registers with while it is a
// follower: its index in dLegerPeers + 1 (DLedger's nN ⇒ N+1 mapping), so
// every member has a stable, distinct slot in the route.
func (c *BrokerConfig) FollowerBrokerID() int64 {
	peers, err := raftlog.ParsePeers(c.Raft.DLegerPeers)
	if err != nil {
		return 1
	}
	for i, p := range peers {
		if p.ID == c.Raft.DLegerSelfID {
			return int64(i) + 1
		}
	}
	return 1
}

// DelayLevels parses MessageDelayLevel ("0s 5s 1m 2h" → durations).
func (c *BrokerConfig) DelayLevels() ([]time.Duration, error) {
	return parseDelayLevels(c.MessageDelayLevel)
}

func parseDelayLevels(s string) ([]time.Duration, error) {
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	var out []time.Duration
	for _, f := range strings.Fields(s) {
		d := time.Duration(-1)
		for _, u := range units { // "ms" before "s": raftmq's extension for short test delays
			if num, ok := strings.CutSuffix(f, u.suffix); ok {
				// A level past the longest Duration would wrap into another
				// delay. 0 is a level, as in RocketMQ: its messages still pass
				// through the schedule topic and are due at once.
				if n, err := strconv.ParseInt(num, 10, 64); err == nil && n >= 0 && n <= math.MaxInt64/int64(u.unit) {
					d = time.Duration(n) * u.unit
				}
				break
			}
		}
		if d < 0 {
			return nil, fmt.Errorf("%w: messageDelayLevel: bad level %q (want e.g. 5s, 1m, 2h, 1d or 200ms)", ErrInvalidBrokerConfig, f)
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: messageDelayLevel is empty", ErrInvalidBrokerConfig)
	}
	return out, nil
}

// Validate checks the broker keys and the group part and reports every
// setting at fault (errors.Join), each naming its key.
func (c *BrokerConfig) Validate() error {
	errs := []error{c.GroupConfig.Validate(), c.Log.Validate(), c.LimitsConfig.validate()}
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidBrokerConfig, key, fmt.Sprintf(format, args...))
	}
	if c.BrokerClusterName == "" {
		errs = append(errs, bad("brokerClusterName", "must not be empty"))
	}
	if c.BrokerName == "" || !wire.ValidName(c.BrokerName) {
		errs = append(errs, bad("brokerName", "%q must be non-empty letters, digits, '%%', '-', '_' or '|'", c.BrokerName))
	}
	if c.ListenPort < 3 || c.ListenPort > 65535 {
		errs = append(errs, bad("listenPort", "%d is not a usable TCP port (VIP channel uses listenPort-2)", c.ListenPort))
	}
	if len(c.NameServers()) == 0 {
		errs = append(errs, bad("namesrvAddr", "no name server given (host:port;host:port)"))
	}
	for _, a := range c.NameServers() {
		// The broker dials these as they are: one it cannot dial would
		// leave it running but never registered.
		_, port, err := net.SplitHostPort(a)
		if p, perr := strconv.Atoi(port); err != nil || perr != nil || p < 1 || p > 65535 {
			errs = append(errs, bad("namesrvAddr", "%q is not host:port (name servers are separated by ';')", a))
		}
	}
	if c.RegisterBrokerTimeoutMills <= 0 {
		errs = append(errs, bad("registerBrokerTimeoutMills", "must be positive (every registration would time out at once)"))
	}
	if c.DefaultTopicQueueNums < 1 || c.DefaultTopicQueueNums > maxQueueNums {
		errs = append(errs, bad("defaultTopicQueueNums", "%d out of 1..%d", c.DefaultTopicQueueNums, maxQueueNums))
	}
	if c.RegisterNameServerPeriod < time.Second {
		errs = append(errs, bad("registerNameServerPeriod", "%v is below 1s", c.RegisterNameServerPeriod))
	}
	if c.MaxReconsumeTimes < 0 {
		errs = append(errs, bad("maxReconsumeTimes", "must not be negative"))
	}
	if c.ShortPollingTimeMills <= 0 || c.PullHoldCheckInterval <= 0 {
		errs = append(errs, bad("shortPollingTimeMills", "poll intervals must be positive"))
	}
	if c.ChannelExpiredTimeout <= 0 || c.RebalanceLockMaxLiveTime <= 0 {
		errs = append(errs, bad("channelExpiredTimeout", "client and lock expiries must be positive"))
	}
	if c.SendMessageThreadPoolNums < 1 || c.PullMessageThreadPoolNums < 1 || c.AdminBrokerThreadPoolNums < 1 ||
		c.ClientManageThreadPoolNums < 1 || c.ConsumerManageThreadPoolNums < 1 {
		errs = append(errs, bad("sendMessageThreadPoolNums", "thread pool sizes must be positive"))
	}
	if c.SendThreadPoolQueueCapacity < 1 || c.PullThreadPoolQueueCapacity < 1 {
		errs = append(errs, bad("sendThreadPoolQueueCapacity", "queue capacities must be positive"))
	}
	if c.ScheduleMessageCheckInterval <= 0 || c.TopicChangeCheckInterval <= 0 || c.ConsumerOffsetCommitCoalescer <= 0 {
		errs = append(errs, bad("scheduleMessageCheckInterval", "check intervals must be positive"))
	}
	if c.MetricsPort < -1 || c.MetricsPort > 65535 {
		errs = append(errs, bad("metricsPort", "%d is not a port (0 = listenPort+3, -1 = off)", c.MetricsPort))
	}
	if c.MaxPullBatch < 1 {
		errs = append(errs, bad("maxPullBatch", "must be positive"))
	}
	if c.MaxIncompleteFrameBytes < 1<<20 {
		errs = append(errs, bad("maxIncompleteFrameBytes", "%d is below 1 MiB", c.MaxIncompleteFrameBytes))
	}
	if c.MaxBatchMessages < 1 {
		errs = append(errs, bad("maxBatchMessages", "must be positive"))
	}
	if c.TimerMaxDelaySec < 1 || c.TimerCheckInterval <= 0 {
		errs = append(errs, bad("timerMaxDelaySec", "timerMaxDelaySec and timerCheckInterval must be positive"))
	}
	if err := c.TransactionConfig.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.BrokerIP1 != "" {
		if _, err := netip.ParseAddr(c.BrokerIP1); err != nil {
			errs = append(errs, bad("brokerIP1", "%q is not an IP address", c.BrokerIP1))
		}
	}
	if _, err := c.DelayLevels(); err != nil {
		errs = append(errs, err)
	}
	if c.GossipEnable {
		if err := c.GossipConfig().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: %v", ErrInvalidBrokerConfig, err))
		}
	}
	if err := c.TLS.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %v", ErrInvalidBrokerConfig, err))
	}
	if mode, err := remoting.ParseTLSMode(c.TLS.ServerMode); err == nil && mode == remoting.TLSEnforcing && !c.TLS.ClientEnable {
		// RocketMQ brokers never call each other's listeners; raftmq's
		// members do, and the other members enforce TLS too.
		if peers, err := raftlog.ParsePeers(c.Raft.DLegerPeers); err == nil && len(peers) > 1 {
			errs = append(errs, bad("tlsEnable", "is false while tlsServerMode=enforcing: this member calls the other members' listeners "+
				"(status probes, /readyz's catch-up check, config forwarding, the join check, catch-up), and they refuse plaintext; "+
				"set tlsEnable=true with tlsClientTrustCertPath (name servers then need tlsServerMode=permissive or enforcing)"))
		}
	}
	return errors.Join(errs...)
}
