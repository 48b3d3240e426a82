package namesrv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/raftmq/raftmq/ha"
	"github.com/raftmq/raftmq/internal/httpmon"
	"github.com/raftmq/raftmq/internal/logging"
	"github.com/raftmq/raftmq/remoting"
)

// Config is the name server's configuration. Keys (prop tags) follow
// RocketMQ's NamesrvConfig and NettyServerConfig so an existing namesrv.conf
// loads unchanged, except that unknown keys are rejected by the loader.
type Config struct {
	// ListenAddr is the host part of the listen address; ListenPort the port.
	// They are separate because RocketMQ configures only listenPort.
	ListenAddr string `prop:"listenAddr"`
	ListenPort int    `prop:"listenPort"`

	// KVConfigPath is the JSON file holding the KV config table
	// (KVConfigManager). Written atomically on every change.
	KVConfigPath string `prop:"kvConfigPath"`
	// KVLimits bounds the KV table (kvConfigMax* keys).
	KVLimits

	// ScanNotActiveBrokerInterval is how often the live table is scanned for
	// brokers whose last heartbeat is older than their expiry.
	ScanNotActiveBrokerInterval time.Duration `prop:"scanNotActiveBrokerInterval"`
	// BrokerChannelExpiredTime is the default broker expiry; a broker can ask
	// for its own with the heartbeatTimeoutMillis register header.
	BrokerChannelExpiredTime time.Duration `prop:"brokerChannelExpiredTime"`

	// OrderMessageEnable fills orderTopicConf in routes from the
	// ORDER_TOPIC_CONFIG KV namespace (off by default, as in RocketMQ).
	OrderMessageEnable bool `prop:"orderMessageEnable"`
	// ReturnOrderTopicConfigToBroker sends the ORDER_TOPIC_CONFIG namespace
	// back in the REGISTER_BROKER response body.
	ReturnOrderTopicConfigToBroker bool `prop:"returnOrderTopicConfigToBroker"`
	// EnableAllTopicList allows GET_ALL_TOPIC_LIST_FROM_NAMESERVER.
	EnableAllTopicList bool `prop:"enableAllTopicList"`
	// EnableTopicList allows GET_TOPICS_BY_CLUSTER.
	EnableTopicList bool `prop:"enableTopicList"`
	// DeleteTopicWithBrokerRegistration drops a broker's topics that are
	// missing from its latest registration.
	DeleteTopicWithBrokerRegistration bool `prop:"deleteTopicWithBrokerRegistration"`

	// ClientRequestThreadPoolNums and ClientRequestThreadPoolQueueCapacity
	// size the worker pool for GET_ROUTEINFO_BY_TOPIC, kept apart from the
	// others so route lookups from many clients never queue behind broker
	// registrations (RocketMQ's clientRequestExecutor).
	ClientRequestThreadPoolNums          int `prop:"clientRequestThreadPoolNums"`
	ClientRequestThreadPoolQueueCapacity int `prop:"clientRequestThreadPoolQueueCapacity"`
	// DefaultThreadPoolNums and DefaultThreadPoolQueueCapacity size the pool
	// for every other request code, and a second pool of the same size for
	// the brokers' own requests (REGISTER_BROKER, UNREGISTER_BROKER,
	// BROKER_HEARTBEAT, QUERY_DATA_VERSION), which tools' requests in the
	// default pool must not hold up.
	DefaultThreadPoolNums          int `prop:"defaultThreadPoolNums"`
	DefaultThreadPoolQueueCapacity int `prop:"defaultThreadPoolQueueCapacity"`
	// UnRegisterBrokerQueueCapacity bounds pending UNREGISTER_BROKER requests
	// waiting for the batch unregistration goroutine.
	UnRegisterBrokerQueueCapacity int `prop:"unRegisterBrokerQueueCapacity"`

	// ServerChannelMaxIdleTimeSeconds closes remoting connections idle this
	// many seconds (NettyServerConfig's key, in seconds).
	ServerChannelMaxIdleTimeSeconds int `prop:"serverChannelMaxIdleTimeSeconds"`

	// MetricsPort is the monitoring HTTP port (/metrics, /health,
	// /debug/pprof/): 0 means listenPort+3 (off when listenPort is 0), -1
	// turns it off.
	MetricsPort int `prop:"metricsPort"`
	// MetricsBindAddr is the address the monitor binds (127.0.0.1 unless
	// set: the endpoints have no authentication); PprofEnable serves
	// /debug/pprof/ there (off by default).
	MetricsBindAddr string `prop:"metricsBindAddr"`
	PprofEnable     bool   `prop:"pprofEnable"`

	// GossipEnable makes the name server join the memberlist pool that
	// broker nodes join, so a broker that dies is removed from routes within
	// about a second instead of after brokerChannelExpiredTime. Off by
	// default until brokers join the pool too.
	GossipEnable bool `prop:"gossipEnable"`
	// Gossip configures the memberlist member (gossip* keys). A zero
	// gossipBindPort means listenPort+2 (9878 by default), following the
	// port convention in README.md; the node name defaults to
	// namesrv-<listen address>.
	Gossip ha.GossipConfig
	// AuthConfig authenticates broker registrations (auth.go).
	AuthConfig
	// ConsoleConfig enables the web console and names its admin account
	// (console.go).
	ConsoleConfig
	// Log is where and how the name server logs (logLevel, logFormat,
	// logFile, logFile* rotation keys; read by the raftmq command).
	Log logging.Config
	// TLS holds the tls* keys; the name server uses the server ones
	// (tlsServerMode, certificate, client authentication).
	TLS remoting.TLSConfig
}

// DefaultConfig returns RocketMQ's defaults: port 9876, a 5 s scan, a 120 s
// expiry and ~/namesrv/kvConfig.json.
func DefaultConfig() Config {
	home, err := os.UserHomeDir()
	if err != nil {
		home = "."
	}
	return Config{
		ListenAddr:                           "0.0.0.0",
		ListenPort:                           9876,
		Gossip:                               defaultGossip(),
		Log:                                  logging.DefaultConfig(),
		KVConfigPath:                         filepath.Join(home, "namesrv", "kvConfig.json"),
		KVLimits:                             DefaultKVLimits(),
		ScanNotActiveBrokerInterval:          5 * time.Second,
		BrokerChannelExpiredTime:             120 * time.Second,
		ReturnOrderTopicConfigToBroker:       true,
		EnableAllTopicList:                   true,
		EnableTopicList:                      true,
		ClientRequestThreadPoolNums:          8,
		ClientRequestThreadPoolQueueCapacity: 50000,
		DefaultThreadPoolNums:                16,
		DefaultThreadPoolQueueCapacity:       10000,
		UnRegisterBrokerQueueCapacity:        3000,
		ServerChannelMaxIdleTimeSeconds:      120,
		MetricsBindAddr:                      httpmon.DefaultBindAddr,
		ConsoleConfig:                        ConsoleConfig{ConsoleEnable: true},
	}
}

// Addr is the listen address built from ListenAddr and ListenPort.
func (c Config) Addr() string {
	return fmt.Sprintf("%s:%d", c.ListenAddr, c.ListenPort)
}

// Validate reports every setting that cannot work (errors.Join), each
// naming its key.
func (c Config) Validate() error {
	errs := []error{c.Log.Validate()}
	if c.ListenPort < 0 || c.ListenPort > 65535 {
		errs = append(errs, fmt.Errorf("%w: listenPort=%d is not a TCP port (0..65535)", ErrInvalidConfig, c.ListenPort))
	}
	if c.MetricsPort < -1 || c.MetricsPort > 65535 {
		errs = append(errs, fmt.Errorf("%w: metricsPort=%d is not a port (0 = listenPort+3, -1 = off)", ErrInvalidConfig, c.MetricsPort))
	}
	if c.KVConfigPath == "" {
		errs = append(errs, fmt.Errorf("%w: kvConfigPath is empty; name a file for the KV config table", ErrInvalidConfig))
	}
	errs = append(errs, c.KVLimits.validate())
	if c.ScanNotActiveBrokerInterval <= 0 {
		errs = append(errs, fmt.Errorf("%w: scanNotActiveBrokerInterval=%v must be positive", ErrInvalidConfig, c.ScanNotActiveBrokerInterval))
	}
	if c.BrokerChannelExpiredTime <= 0 {
		errs = append(errs, fmt.Errorf("%w: brokerChannelExpiredTime=%v must be positive", ErrInvalidConfig, c.BrokerChannelExpiredTime))
	}
	if c.ClientRequestThreadPoolNums <= 0 || c.DefaultThreadPoolNums <= 0 {
		errs = append(errs, fmt.Errorf("%w: clientRequestThreadPoolNums and defaultThreadPoolNums must be positive", ErrInvalidConfig))
	}
	if c.ClientRequestThreadPoolQueueCapacity <= 0 || c.DefaultThreadPoolQueueCapacity <= 0 {
		errs = append(errs, fmt.Errorf("%w: clientRequestThreadPoolQueueCapacity and defaultThreadPoolQueueCapacity must be positive", ErrInvalidConfig))
	}
	if c.ServerChannelMaxIdleTimeSeconds <= 0 {
		errs = append(errs, fmt.Errorf("%w: serverChannelMaxIdleTimeSeconds must be positive", ErrInvalidConfig))
	}
	if c.UnRegisterBrokerQueueCapacity <= 0 {
		errs = append(errs, fmt.Errorf("%w: unRegisterBrokerQueueCapacity must be positive", ErrInvalidConfig))
	}
	if c.GossipEnable {
		if err := c.gossipConfig().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: %v", ErrInvalidConfig, err))
		}
	}
	if _, _, err := c.TLS.ServerTLS(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %v", ErrInvalidConfig, err))
	}
	errs = append(errs, c.ConsoleConfig.validate())
	return errors.Join(errs...)
}
