package broker

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/remoting"
)

// UPDATE_BROKER_CONFIG (25): runtime changes of a whitelist of keys. The
// body is a properties text ("key=value" lines), as mqadmin
// updateBrokerConfig sends it. The member that gets the request saves the
// change under its store directory (loaded again at start, over
// broker.conf) and forwards it to the other members of its group
// (admin_config_group.go), so one request changes the whole group.

// RuntimeConfigKeys are the keys UPDATE_BROKER_CONFIG may change. Every
// other key is fixed for the life of the process because something was
// built from it at start (ports, store layout, Raft, pools, delay levels).
// slaveReadEnable is not here: followers always serve pulls.
var RuntimeConfigKeys = []string{
	"autoCreateTopicEnable",       // send: create unknown topics on first send
	"autoCreateSubscriptionGroup", // heartbeat: create a group's config; pull: refuse uncreated groups when off
	"defaultTopicQueueNums",       // queue count of auto-created topics
	"longPollingEnable",           // pull: long vs short polling
	"shortPollingTimeMills",       // pull: hold time without long polling
	"maxReconsumeTimes",           // send-back: default retries before the DLQ
	"maxMessageSize",              // send: body limit, at most the value at start (Raft entries are sized for it)
}

// live is the runtime view of the config: the startup config plus the
// changes UPDATE_BROKER_CONFIG made. Readers of RuntimeConfigKeys use it.
func (c *Controller) live() *BrokerConfig { return c.liveCfg.Load() }

func (c *Controller) processUpdateBrokerConfig(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	kv, err := config.ParseProperties(req.Body)
	if err != nil {
		return response(remoting.ResponseInvalidParameter, "update broker config: body is not a properties text: %v", err)
	}
	if len(kv) == 0 {
		return response(remoting.ResponseInvalidParameter, "update broker config: no key given (changeable: %s)",
			strings.Join(RuntimeConfigKeys, ", "))
	}
	if why := refuseConfigKeys(kv); why != "" {
		return response(remoting.ResponseInvalidParameter, "update broker config: nothing changed: %s; changeable at runtime: %s",
			why, strings.Join(RuntimeConfigKeys, ", "))
	}
	if r := c.applyRuntimeConfig(kv, true); r != nil {
		return r
	}
	return c.forwardBrokerConfig(req)
}

// applyRuntimeConfig validates and applies whitelisted keys; with save it
// first records them in the member's runtime config file.
func (c *Controller) applyRuntimeConfig(kv map[string]string, save bool) *remoting.RemotingCommand {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	next := *c.live()
	if err := config.Apply(kv, "UPDATE_BROKER_CONFIG", &next); err != nil {
		return response(remoting.ResponseInvalidParameter, "update broker config: %v", err)
	}
	// Only the whitelisted keys can differ from the validated startup
	// config, so only they are checked.
	switch {
	case next.Store.MaxMessageSize > c.cfg.Store.MaxMessageSize || next.Store.MaxMessageSize < 1:
		return response(remoting.ResponseInvalidParameter,
			"update broker config: maxMessageSize %d must be in 1..%d (the value at start; Raft entries are sized for it)",
			next.Store.MaxMessageSize, c.cfg.Store.MaxMessageSize)
	case next.DefaultTopicQueueNums < 1 || next.DefaultTopicQueueNums > 1024:
		return response(remoting.ResponseInvalidParameter, "update broker config: defaultTopicQueueNums %d out of 1..1024", next.DefaultTopicQueueNums)
	case next.ShortPollingTimeMills <= 0:
		return response(remoting.ResponseInvalidParameter, "update broker config: shortPollingTimeMills must be positive")
	case next.MaxReconsumeTimes < 0:
		return response(remoting.ResponseInvalidParameter, "update broker config: maxReconsumeTimes must not be negative")
	}
	if save {
		if err := c.saveRuntimeConfig(kv); err != nil {
			return response(remoting.ResponseSystemError, "update broker config: not applied, saving it failed: %v", err)
		}
	}
	c.liveCfg.Store(&next)
	c.log.Info("broker config updated at runtime", zap.Any("changes", kv))
	return nil
}

// refuseConfigKeys says why the keys of kv outside RuntimeConfigKeys are
// refused, "" when there are none. Each kind of key is sent its own way:
// a raftmq key fixed at start is changed in broker.conf and a restart,
// but a RocketMQ key raftmq has no setting for (brokerPermission, a
// flush service's) says what raftmq does instead, since a broker.conf
// asking for it would not load; anything else is no broker key at all.
func refuseConfigKeys(kv map[string]string) string {
	var fixed, unknown, unsupported []string
	known, _ := config.Keys(&BrokerConfig{})
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		switch ig, ok := rocketmqBrokerKeys[k]; {
		case isRuntimeKey(k):
		case ok:
			unsupported = append(unsupported, fmt.Sprintf("%s is not supported by raftmq (%s)", k, ig.Reason))
		case slices.Contains(known, k):
			fixed = append(fixed, k)
		default:
			unknown = append(unknown, k)
		}
	}
	var why []string
	if len(fixed) > 0 {
		why = append(why, strings.Join(fixed, ", ")+" cannot change at runtime (edit broker.conf and restart)")
	}
	why = append(why, unsupported...)
	if len(unknown) > 0 {
		why = append(why, strings.Join(unknown, ", ")+": unknown broker config key(s)")
	}
	return strings.Join(why, "; ")
}

func isRuntimeKey(k string) bool {
	for _, r := range RuntimeConfigKeys {
		if r == k {
			return true
		}
	}
	return false
}
