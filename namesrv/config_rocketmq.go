package namesrv

import "github.com/raftmq/raftmq/internal/config"

// rocketmqNamesrvKeys classifies the keys of RocketMQ 4.9's NamesrvConfig
// and NettyServerConfig (config.WithNettyKeys) that raftmq's name server
// has no field for (the ones it has are used; docs/config.md lists both).
var rocketmqNamesrvKeys = config.WithNettyKeys(map[string]config.Ignored{
	"rocketmqHome":    {Reason: "raftmq has no ROCKETMQ_HOME: the KV table lives at kvConfigPath"},
	"configStorePath": {Reason: "the name server's own config is the -c file; UPDATE_NAMESRV_CONFIG changes are not persisted there"},
	"productEnvName":  {Reason: "a label RocketMQ never reads"},
	"clusterTest":     {Reason: "RocketMQ's test-cluster routing is not supported", Only: "false"},
	"configBlackList": {Reason: "the name server's runtime config keys are a fixed list"},
}, "Netty thread tuning: the Go runtime schedules goroutines", false)

// IgnoredKeys implements config.Ignorer: the RocketMQ keys a namesrv.conf
// may set that raftmq accepts without a field.
func (c *Config) IgnoredKeys() map[string]config.Ignored { return rocketmqNamesrvKeys }
