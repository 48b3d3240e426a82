package broker

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP
// (38), GET_CONSUMER_CONNECTION_LIST (203) (RocketMQ ClientManageProcessor
// and ConsumerManageProcessor).

func (c *Controller) processHeartbeat(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var hb wire.HeartbeatData
	if err := json.Unmarshal(req.Body, &hb); err != nil {
		return response(remoting.ResponseSystemError, "malformed heartbeat body: %v", err), nil
	}
	if hb.ClientID == "" {
		return response(remoting.ResponseSystemError, "heartbeat without clientID"), nil
	}
	if len(hb.ClientID) > maxLockClientIDLength {
		// Every entry of the connection keeps the ID it was last
		// refreshed with: bounded, so the entries are.
		return response(remoting.ResponseInvalidParameter, "heartbeat clientID is %d bytes, longer than %d",
			len(hb.ClientID), maxLockClientIDLength), nil
	}
	now := time.Now()
	ch := clientChannel{ClientID: hb.ClientID, Conn: conn, Language: req.Language.String(), Version: int(req.Version)}
	// A consumer group the heartbeat cannot be registered in is left out
	// and the first such refusal answered, after the rest of the heartbeat
	// (its other groups, its producers) is registered: RocketMQ registers
	// every part of a heartbeat, and one bad subscription must not drop
	// the client from everything else. Its earlier registration in that
	// group on this connection goes too, so the group rebalances without
	// it at once: kept until it expired, it would be assigned queues its
	// pulls cannot read.
	var refused *remoting.RemotingCommand
	for _, cd := range hb.ConsumerDataSet {
		if r := checkGroup(cd.GroupName); r != nil {
			refused = cmp.Or(refused, r)
			continue
		}
		if r := c.checkHeartbeatSubscriptions(cd); r != nil {
			refused = cmp.Or(refused, r)
			for _, g := range c.clients.unregister(conn, hb.ClientID, "", cd.GroupName) {
				c.notifyMembership(g)
			}
			continue
		}
		changed, err := c.clients.registerConsumer(cd, ch, now)
		if err != nil {
			refused = cmp.Or(refused, c.tooManyGroups(cd.GroupName))
			continue
		}
		c.prepareConsumerGroup(ctx, cd.GroupName)
		if changed {
			c.log.Info("consumer group membership or subscribed topics changed", zap.String("group", cd.GroupName), zap.String("client", hb.ClientID))
			c.notifyMembership(cd.GroupName)
		}
	}
	for _, pd := range hb.ProducerDataSet {
		// Sends do not check the producer group's characters, and some
		// clients (rocketmq-client-go) do not either: only its length.
		if len(pd.GroupName) > wire.MaxGroupLength {
			refused = cmp.Or(refused, response(remoting.ResponseInvalidParameter,
				"producer group %.64s… is %d bytes, longer than %d", pd.GroupName, len(pd.GroupName), wire.MaxGroupLength))
			continue
		}
		if err := c.clients.registerProducer(pd.GroupName, ch, now); err != nil {
			refused = cmp.Or(refused, c.tooManyGroups(pd.GroupName))
		}
	}
	if refused != nil {
		return refused, nil
	}
	return success(), nil
}

// tooManyGroups is the refusal of a heartbeat's group past
// maxClientGroupsPerConnection.
func (c *Controller) tooManyGroups(group string) *remoting.RemotingCommand {
	return c.refuse("maxClientGroupsPerConnection", remoting.ResponseSystemError,
		"group %.255s not registered: this connection is registered in maxClientGroupsPerConnection=%d groups already "+
			"(groups it stops naming expire after channelExpiredTimeout, or unregister them)",
		group, c.live().MaxClientGroupsPerConnection)
}

// maxGroupSubscriptions and maxGroupSubscriptionBytes bound what one
// heartbeat registers for one consumer group: its subscriptions (its
// %RETRY% topic among them) and the bytes of their topics, expressions,
// tags (each with its string header) and tag codes with the group's
// consume type, model and starting point. A client subscribes a group to
// a handful of topics; without a bound one heartbeat frame (16 MiB) of
// tiny subscriptions would hold
// hundreds of megabytes of table per group, kept for as long as the
// connection heartbeats, in each of its maxClientGroupsPerConnection
// groups.
const (
	maxGroupSubscriptions     = 1024
	maxGroupSubscriptionBytes = 256 << 10
	// tagHeaderBytes is what each tag costs the table beyond its bytes
	// (the string header TagsSet keeps): counted, so that empty tags (3
	// bytes of JSON each) do not pass the bound for free.
	tagHeaderBytes = 16
)

// checkHeartbeatSubscriptions refuses a subscription longer than a pull
// may filter by (maxPullSubscriptionLength): kept for as long as the
// connection heartbeats, such a one only holds memory, since every pull
// by it is refused anyway. The tag set the client parsed is bounded the
// same way (a 16 KiB expression holds at most that many tags). The
// group's subscriptions together are bounded by maxGroupSubscriptions
// and maxGroupSubscriptionBytes.
func (c *Controller) checkHeartbeatSubscriptions(cd wire.HeartbeatConsumerData) *remoting.RemotingCommand {
	if n := len(cd.SubscriptionDataSet); n > maxGroupSubscriptions {
		return c.refuse("heartbeatGroupSubscriptions", remoting.ResponseSubscriptionParseFailed,
			"consumer group %s subscribes to %d topics in this heartbeat (its %%RETRY%% topic included), more than %d: "+
				"the client is not registered in that group on this broker until it subscribes to fewer", cd.GroupName, n, maxGroupSubscriptions)
	}
	total := len(cd.ConsumeType) + len(cd.MessageModel) + len(cd.ConsumeFromWhere)
	for _, sd := range cd.SubscriptionDataSet {
		if sd == nil {
			continue // a JSON null; registration skips it too
		}
		tagBytes := 0
		for _, t := range sd.TagsSet {
			tagBytes += len(t)
		}
		if n := max(len(sd.SubString), tagBytes, len(sd.TagsSet), len(sd.CodeSet)); n > maxPullSubscriptionLength {
			return c.refuse("heartbeatSubscriptionLength", remoting.ResponseSubscriptionParseFailed,
				"the subscription of consumer group %s to topic %.64s is %d bytes or tags long, longer than %d: "+
					"brokers filter by expressions of at most that size; the client is not registered in that group "+
					"on this broker until it subscribes within it", cd.GroupName, sd.Topic, n, maxPullSubscriptionLength)
		}
		total += len(sd.Topic) + len(sd.SubString) + tagBytes + len(sd.TagsSet)*tagHeaderBytes + len(sd.CodeSet) + len(sd.ExpressionType)
	}
	if total > maxGroupSubscriptionBytes {
		return c.refuse("heartbeatGroupSubscriptions", remoting.ResponseSubscriptionParseFailed,
			"the subscriptions of consumer group %s in this heartbeat are %d bytes (topics, expressions, tags, consume type), "+
				"more than %d: the client is not registered in that group on this broker until it subscribes within it",
			cd.GroupName, total, maxGroupSubscriptionBytes)
	}
	return nil
}

// prepareConsumerGroup creates, on the leader, the group's config
// (autoCreateSubscriptionGroup, or a system group whatever it says, as
// RocketMQ's findSubscriptionGroupConfig) and its retry topic, as RocketMQ
// does on a heartbeat, so the %RETRY% route exists before the first
// send-back.
// It returns why the group has no config, nil when it has one (on a
// follower: nil, having done nothing).
func (c *Controller) prepareConsumerGroup(ctx context.Context, group string) *remoting.RemotingCommand {
	if !c.rep.IsLeader() {
		return nil
	}
	sg, ok := c.rep.State().SubscriptionGroup(group)
	if !ok {
		if !c.live().AutoCreateSubscriptionGroup && !wire.IsSystemGroup(group) {
			return response(remoting.ResponseSubscriptionGroupNotExist,
				"consumer group %s is not configured on broker %s and autoCreateSubscriptionGroup is false: create it with updateSubGroup",
				group, c.cfg.BrokerName)
		}
		if r := c.autoCreateRefusal("group " + group); r != nil {
			c.log.Debug("auto-create subscription group refused", zap.String("group", group), zap.String("reason", r.Remark))
			return r
		}
		sg = c.defaultSubscriptionGroup(group)
		wctx, cancel := c.writeCtx(ctx)
		err := c.rep.UpdateSubscriptionGroup(wctx, sg)
		cancel()
		if err != nil {
			c.log.Warn("auto-create subscription group failed", zap.String("group", group), zap.Error(err))
			return response(remoting.ResponseSystemError, "auto-creation of group %s on broker %s failed: %v", group, c.cfg.BrokerName, err)
		}
	}
	retry := wire.RetryGroupTopicPrefix + group
	if _, ok := c.rep.State().Topic(retry); !ok {
		if _, r := c.autoCreateTopic(ctx, retry, int(max(sg.RetryQueueNums, 1))); r != nil {
			c.log.Debug("create retry topic failed", zap.String("topic", retry), zap.String("reason", r.Remark))
		}
	}
	return nil
}

// defaultSubscriptionGroup is the config of a group that has none of its
// own, the one an auto-created group gets: RocketMQ's defaults with the
// retry limit of maxReconsumeTimes as it is now (UPDATE_BROKER_CONFIG may
// change it).
func (c *Controller) defaultSubscriptionGroup(group string) wire.SubscriptionGroupConfig {
	sg := wire.DefaultSubscriptionGroupConfig(group)
	sg.RetryMaxTimes = int32(min(c.live().MaxReconsumeTimes, math.MaxInt32))
	return sg
}

// uncreatedGroup is the refusal of a request naming group when it has no
// config and autoCreateSubscriptionGroup is off (RocketMQ's
// findSubscriptionGroupConfig finds nothing: SUBSCRIPTION_GROUP_NOT_EXIST);
// RocketMQ's built-in groups are always served. nil means serve: the group
// exists, or would be created on demand.
func (c *Controller) uncreatedGroup(group string) *remoting.RemotingCommand {
	if c.live().AutoCreateSubscriptionGroup || wire.IsSystemGroup(group) {
		return nil
	}
	if _, ok := c.rep.State().SubscriptionGroup(group); ok {
		return nil
	}
	return response(remoting.ResponseSubscriptionGroupNotExist,
		"subscription group [%s] does not exist on broker %s and autoCreateSubscriptionGroup is false: create it with updateSubGroup",
		group, c.cfg.BrokerName)
}

func (c *Controller) processUnregisterClient(_ context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.UnregisterClientRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	for _, g := range c.clients.unregister(conn, h.ClientID, h.ProducerGroup, h.ConsumerGroup) {
		c.notifyMembership(g)
	}
	return success(), nil
}

// notifyMembership tells a group's consumers that a client joined or
// left by request (heartbeat, UNREGISTER_CLIENT), unless the group's
// notifyConsumerIdsChangedEnable is false (mqadmin updateSubGroup -a
// false): as in RocketMQ's ConsumerManager, its consumers then rebalance
// on their own timer. A connection that closes or expires is told
// regardless, as RocketMQ does.
func (c *Controller) notifyMembership(group string) {
	if sg, ok := c.rep.State().SubscriptionGroup(group); ok && !sg.NotifyConsumerIdsChangedEnable {
		return
	}
	c.clients.notifyChanged(group)
}

// processCheckClientConfig answers CHECK_CLIENT_CONFIG (46), which a
// consumer sends at start for each subscription that is not a tag one
// (RocketMQ ClientManageProcessor.checkClientConfig): tags are always
// fine; SQL92 needs enablePropertyFilter (SYSTEM_ERROR naming the key
// otherwise) and an expression that compiles (SUBSCRIPTION_PARSE_FAILED
// with the parser's error otherwise); any other type is
// SUBSCRIPTION_PARSE_FAILED. A body without a subscription is accepted,
// as RocketMQ does.
func (c *Controller) processCheckClientConfig(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var body wire.CheckClientRequestBody
	if len(req.Body) > 0 {
		if err := json.Unmarshal(req.Body, &body); err != nil {
			return response(remoting.ResponseSystemError, "malformed CHECK_CLIENT_CONFIG body: %v", err), nil
		}
	}
	sd := body.SubscriptionData
	switch {
	case sd == nil || isTagType(sd.ExpressionType):
		return success(), nil
	case !isSQL92(sd.ExpressionType):
		return response(remoting.ResponseSubscriptionParseFailed, "expression type %s is not supported; use TAG or SQL92", sd.ExpressionType), nil
	case !c.cfg.EnablePropertyFilter:
		return c.propertyFilterOff(), nil
	}
	if _, err := c.filters.Compile(sd.SubString); err != nil {
		return response(remoting.ResponseSubscriptionParseFailed, "%v", err), nil
	}
	return success(), nil
}

func (c *Controller) processGetConsumerList(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.ConsumerGroupRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	ids := c.clients.consumerIDs(h.ConsumerGroup)
	if len(ids) == 0 {
		return response(remoting.ResponseSystemError, "no consumer of group %s is connected to %s", h.ConsumerGroup, c.addr), nil
	}
	r := success()
	r.Body, _ = json.Marshal(wire.ConsumerListBody{ConsumerIDList: ids})
	return r, nil
}

func (c *Controller) processGetConsumerConnectionList(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.ConsumerGroupRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	g, ok := c.clients.group(h.ConsumerGroup)
	if !ok {
		return response(remoting.ResponseConsumerNotOnline, "the consumer group %s is not online", h.ConsumerGroup)
	}
	cc := wire.ConsumerConnection{SubscriptionTable: g.Subscriptions, ConsumeType: g.ConsumeType,
		MessageModel: g.MessageModel, ConsumeFromWhere: g.ConsumeFromWhere}
	for _, ch := range g.Channels {
		cc.ConnectionSet = append(cc.ConnectionSet, wire.Connection{ClientID: ch.ClientID, ClientAddr: ch.Conn.RemoteAddr(),
			Language: ch.Language, Version: ch.Version})
	}
	r := success()
	r.Body, _ = json.Marshal(cc)
	return r
}

func (c *Controller) String() string { return fmt.Sprintf("broker %s (%s)", c.cfg.BrokerName, c.addr) }
