package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Admin and query codes served by the default pool (RocketMQ
// AdminBrokerProcessor): topic and subscription-group config (replicated
// through Raft), broker config and runtime info, topic stats, and the
// offset/time queries of offset.go.

func (c *Controller) processAdmin(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	switch req.Code {
	case remoting.RequestUpdateAndCreateTopic:
		return c.processUpdateTopic(ctx, req), nil
	case remoting.RequestDeleteTopicInBroker:
		return c.processDeleteTopic(ctx, req), nil
	case remoting.RequestGetAllTopicConfig:
		return c.processGetAllTopicConfig(), nil
	case remoting.RequestUpdateAndCreateSubscriptionGroup:
		return c.processUpdateSubscriptionGroup(ctx, req), nil
	case remoting.RequestDeleteSubscriptionGroup:
		return c.processDeleteSubscriptionGroup(ctx, req), nil
	case remoting.RequestGetAllSubscriptionGroupConfig:
		return c.processGetAllSubscriptionGroups(), nil
	case remoting.RequestGetBrokerConfig:
		return c.processGetBrokerConfig(), nil
	case remoting.RequestUpdateBrokerConfig:
		return c.processUpdateBrokerConfig(req), nil
	case remoting.RequestGetBrokerRuntimeInfo:
		return c.processRuntimeInfo(), nil
	case remoting.RequestGetTopicStatsInfo:
		return c.processTopicStats(req), nil
	case remoting.RequestGetMaxOffset:
		return c.processGetMaxOffset(req), nil
	case remoting.RequestGetMinOffset:
		return c.processGetMinOffset(req), nil
	case remoting.RequestSearchOffsetByTimestamp:
		return c.processSearchOffset(req), nil
	case remoting.RequestGetEarliestMsgStoreTime:
		return c.processEarliestStoreTime(req), nil
	case remoting.RequestGetAllConsumerOffset:
		return c.processGetAllConsumerOffset(), nil
	case remoting.RequestGetConsumeStats:
		return c.processGetConsumeStats(req), nil
	case remoting.RequestGetConsumerConnectionList:
		return c.processGetConsumerConnectionList(req), nil
	}
	if r, ok := c.processAdminTools(ctx, req); ok {
		return r, nil
	}
	return response(remoting.ResponseRequestCodeNotSupported, "request code %d is not supported by raftmq broker %s", req.Code, c.addr), nil
}

func (c *Controller) processUpdateTopic(ctx context.Context, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.CreateTopicRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	if r := checkTopic(h.Topic); r != nil {
		return r
	}
	if r := refuseOwnTopic("changed", h.Topic); r != nil {
		return r
	}
	if h.ReadQueueNums < 1 || h.WriteQueueNums < 1 || h.ReadQueueNums > maxQueueNums || h.WriteQueueNums > maxQueueNums {
		return c.refuse("maxQueueNums", remoting.ResponseInvalidParameter, "queue numbers must be 1..%d (read %d, write %d)",
			maxQueueNums, h.ReadQueueNums, h.WriteQueueNums)
	}
	if h.Perm&^(wire.PermRead|wire.PermWrite|wire.PermInherit) != 0 {
		return response(remoting.ResponseInvalidParameter, "perm %d has unknown bits (4 read, 2 write, 1 inherit)", h.Perm)
	}
	switch h.TopicFilterType {
	case "":
		h.TopicFilterType = "SINGLE_TAG"
	case "SINGLE_TAG", "MULTI_TAG":
	default:
		// RocketMQ's TopicFilterType.valueOf refuses it (SYSTEM_ERROR).
		// Stored, it would go into the broker's registrations, where the
		// compact topic encoding splits fields on spaces and RocketMQ's
		// name server refuses an unknown filter type.
		return response(remoting.ResponseSystemError, "No enum constant org.apache.rocketmq.common.TopicFilterType.%s: topicFilterType must be SINGLE_TAG or MULTI_TAG",
			h.TopicFilterType)
	}
	if !c.rep.IsLeader() {
		// The attributes alter the leader's current ones; a follower's may lag.
		return c.notLeader()
	}
	cur, exists := c.rep.State().Topic(h.Topic)
	attrs, bad := alterTopicAttributes(h.Topic, cur.Attributes, !exists, h.Attributes)
	if bad != "" {
		// RocketMQ answers a refused attribute with SYSTEM_ERROR too
		// (updateAndCreateTopic's catch, its MIXED check).
		return response(remoting.ResponseSystemError, "%s", bad)
	}
	tc := wire.TopicConfig{TopicName: h.Topic, ReadQueueNums: h.ReadQueueNums, WriteQueueNums: h.WriteQueueNums,
		Perm: h.Perm, TopicFilterType: h.TopicFilterType, TopicSysFlag: h.TopicSysFlag, Order: h.Order, Attributes: attrs}
	if r := c.replicate(ctx, "update topic", func(wctx context.Context) error { return c.rep.UpdateTopic(wctx, tc) }); r != nil {
		return r
	}
	c.registerTopicChange(ctx)
	return success()
}

func (c *Controller) processDeleteTopic(ctx context.Context, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.TopicRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	if r := refuseOwnTopic("deleted", h.Topic); r != nil {
		return r
	}
	if !c.rep.IsLeader() {
		return c.notLeader() // before the pending commits are dropped
	}
	if r := c.offsets.deleting("", h.Topic, func() *remoting.RemotingCommand {
		return c.replicate(ctx, "delete topic", func(wctx context.Context) error { return c.rep.DeleteTopic(wctx, h.Topic) })
	}); r != nil {
		return r
	}
	c.registerTopicRemoval(ctx)
	return success()
}

// refuseOwnTopic refuses an admin change of TBW102 or of a topic the
// broker keeps acknowledged messages in until it delivers them (delayed
// and timer messages, transaction halves and op records): deleted or
// made unwritable, those messages would never be delivered. RocketMQ 5
// refuses every system topic (validateSystemTopicWhenUpdateTopic) with
// SYSTEM_ERROR and this remark's first sentence.
func refuseOwnTopic(what, topic string) *remoting.RemotingCommand {
	if !isSystemTopic(topic) {
		return nil
	}
	return response(remoting.ResponseSystemError,
		"The topic[%s] is conflict with system topic. It is the broker's own and cannot be %s: it holds messages the broker delivers later (or is the auto-create template)", topic, what)
}

func (c *Controller) processGetAllTopicConfig() *remoting.RemotingCommand {
	body, _ := c.reg.body()
	r := success()
	r.Body, _ = json.Marshal(body.TopicConfigSerializeWrapper)
	return r
}

func (c *Controller) processUpdateSubscriptionGroup(ctx context.Context, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	// Fields the body leaves out keep RocketMQ's defaults, as the Java
	// broker decodes onto a new SubscriptionGroupConfig: Go's zero values
	// would stop the group (consumeEnable) or dead-letter a message at
	// its first failure (retryMaxTimes).
	sg := wire.DefaultSubscriptionGroupConfig("")
	if err := json.Unmarshal(req.Body, &sg); err != nil {
		return response(remoting.ResponseSystemError, "malformed subscription group body: %v", err)
	}
	if r := checkGroup(sg.GroupName); r != nil {
		return r
	}
	if r := refuseGroupExtras(req.Body); r != nil {
		return r
	}
	// 0 is taken as 1 (the retry topic is created with max(n, 1) queues).
	if sg.RetryQueueNums < 0 || sg.RetryQueueNums > maxQueueNums {
		return c.refuse("maxQueueNums", remoting.ResponseInvalidParameter, "retryQueueNums %d of group %s out of 1..%d",
			sg.RetryQueueNums, sg.GroupName, maxQueueNums)
	}
	if r := c.replicate(ctx, "update subscription group", func(wctx context.Context) error { return c.rep.UpdateSubscriptionGroup(wctx, sg) }); r != nil {
		return r
	}
	return success()
}

// refuseGroupExtras refuses the RocketMQ 5 SubscriptionGroupConfig
// fields raftmq has nothing behind, which decoding would otherwise drop
// while the answer says SUCCESS: any attribute (RocketMQ refuses every
// one too: its SubscriptionGroupAttributes table is empty) and a
// groupRetryPolicy other than the default the Java tools always send
// ({"type":"CUSTOMIZED"}, no policy), which sets the retry delays of the
// proxy's gRPC clients; raftmq's consumers retry by messageDelayLevel.
func refuseGroupExtras(body []byte) *remoting.RemotingCommand {
	var x struct {
		Attributes map[string]string `json:"attributes"`
		Policy     *struct {
			Type        string          `json:"type"`
			Exponential json.RawMessage `json:"exponentialRetryPolicy"`
			Customized  json.RawMessage `json:"customizedRetryPolicy"`
		} `json:"groupRetryPolicy"`
	}
	if err := json.Unmarshal(body, &x); err != nil {
		return response(remoting.ResponseSystemError, "malformed subscription group body: %v", err)
	}
	if len(x.Attributes) > 0 {
		keys := slices.Sorted(maps.Keys(x.Attributes))
		return response(remoting.ResponseSystemError, "unsupported subscription group attribute(s) %s: raftmq supports none, as RocketMQ",
			strings.Join(keys, ", "))
	}
	isNull := func(m json.RawMessage) bool { return len(m) == 0 || string(m) == "null" }
	if p := x.Policy; p != nil && ((p.Type != "" && p.Type != "CUSTOMIZED") || !isNull(p.Exponential) || !isNull(p.Customized)) {
		return response(remoting.ResponseSystemError, "groupRetryPolicy is not supported: it sets the retry delays of RocketMQ proxy (gRPC) "+
			"clients, which raftmq does not serve; consumers retry by the broker's messageDelayLevel (leave the policy out, or type CUSTOMIZED without a policy)")
	}
	return nil
}

// processDeleteSubscriptionGroup deletes a group's config, and its offsets
// only with cleanOffset, as RocketMQ's AdminBrokerProcessor: a group
// deleted without it and created again resumes from its offsets.
func (c *Controller) processDeleteSubscriptionGroup(ctx context.Context, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.DeleteSubscriptionGroupRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	if !c.rep.IsLeader() {
		return c.notLeader() // before the pending commits are dropped
	}
	del := func() *remoting.RemotingCommand {
		return c.replicate(ctx, "delete subscription group", func(wctx context.Context) error {
			return c.rep.DeleteSubscriptionGroup(wctx, h.GroupName, h.CleanOffset)
		})
	}
	var r *remoting.RemotingCommand
	if h.CleanOffset {
		// Flushed after the delete, pending or concurrent commits would
		// bring the offsets back; kept, they are offsets like the
		// replicated ones.
		r = c.offsets.deleting(h.GroupName, "", del)
	} else {
		r = del()
	}
	if r != nil {
		return r
	}
	return success()
}

func (c *Controller) processGetAllSubscriptionGroups() *remoting.RemotingCommand {
	r := success()
	r.Body, _ = json.Marshal(wire.SubscriptionGroupWrapper{
		SubscriptionGroupTable: c.rep.State().SubscriptionGroups(),
		DataVersion:            c.rep.State().TopicsDataVersion(),
	})
	return r
}

// processGetBrokerConfig answers the effective config as properties text
// (what mqadmin getBrokerConfig prints).
func (c *Controller) processGetBrokerConfig() *remoting.RemotingCommand {
	var buf bytes.Buffer
	cfg := *c.live()
	cfg.redactSecrets()
	if err := config.Print(&buf, &cfg); err != nil {
		return response(remoting.ResponseSystemError, "render config: %v", err)
	}
	r := success()
	r.Body = buf.Bytes()
	r.ExtFields = map[string]string{"version": "{\"counter\":0,\"stateVersion\":0,\"timestamp\":0}"}
	return r
}

// processRuntimeInfo answers a KVTable of runtime facts
// (GET_BROKER_RUNTIME_INFO; mqadmin brokerStatus prints it).
func (c *Controller) processRuntimeInfo() *remoting.RemotingCommand {
	cl := c.st.CommitLog()
	t := map[string]string{
		"brokerVersionDesc":   "raftmq",
		"brokerName":          c.cfg.BrokerName,
		"brokerId":            strconv.FormatInt(c.reg.brokerID(), 10),
		"raftLeader":          strconv.FormatBool(c.rep.IsLeader()),
		"leaderAddr":          c.rep.LeaderAddr(),
		"commitLogMinOffset":  strconv.FormatInt(cl.MinOffset(), 10),
		"commitLogMaxOffset":  strconv.FormatInt(cl.MaxOffset(), 10),
		"dispatchBehindBytes": strconv.FormatInt(max(cl.MaxOffset()-c.st.DispatchedOffset(), 0), 10),
		"pullHoldCount":       strconv.Itoa(c.hold.heldCount()),
		"consumerGroups":      strings.Join(c.clients.groups(), ","),
	}
	c.runtimeToolKeys(t)
	runtimeCPUKeys(t)
	r := success()
	r.Body, _ = json.Marshal(wire.KVTable{Table: t})
	return r
}

// processTopicStats answers TopicStatsTable: per queue min/max offset,
// and the topic's put rate.
func (c *Controller) processTopicStats(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.TopicRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	tc, ok := c.rep.State().Topic(h.Topic)
	if !ok {
		return response(remoting.ResponseTopicNotExist, "topic %s does not exist on broker %s", h.Topic, c.cfg.BrokerName)
	}
	b := []byte(`{"offsetTable":{`)
	for i := range queueCount(max(tc.WriteQueueNums, tc.ReadQueueNums)) {
		q := int32(i)
		if i > 0 {
			b = append(b, ',')
		}
		// A store closing under the request fails it: its queues would
		// read as empty, which exporters and dashboards chart as a drop.
		minOff, maxOff, err := c.st.QueueRange(h.Topic, q)
		if err != nil {
			return response(remoting.ResponseSystemError, "stats of %s/%d: %v", h.Topic, q, err)
		}
		// lastUpdateTimestamp is the newest message's store time, as
		// RocketMQ's getTopicStatsInfo fills it (0 for an empty queue).
		b = wire.AppendQueueEntry(b, wire.MessageQueue{Topic: h.Topic, BrokerName: c.cfg.BrokerName, QueueID: q},
			wire.TopicOffset{MinOffset: minOff, MaxOffset: maxOff, LastUpdateTimestamp: c.storeTimeAt(h.Topic, q, maxOff-1)})
	}
	// topicPutTps: the topic's stored messages per second over the last
	// minute, as RocketMQ's tpsTopicPutNums (mqadmin topicStatus prints
	// it as "Topic Put TPS").
	var tps float64
	if it := c.stats.lookup(wire.StatsTopicPutNums, h.Topic); it != nil {
		tps = it.tps(time.Minute, time.Now())
	}
	b = append(b, `},"topicPutTps":`...)
	b = strconv.AppendFloat(b, tps, 'f', -1, 64)
	if math.Trunc(tps) == tps {
		b = append(b, ".0"...) // a double, as fastjson writes it
	}
	b = append(b, '}')
	r := success()
	r.Body = b
	return r
}

// replicate runs a leader-only write through Raft with the apply timeout:
// a follower answers not-leader (naming the leader), a failed write the
// mapped error; nil means it committed.
func (c *Controller) replicate(ctx context.Context, what string, write func(context.Context) error) *remoting.RemotingCommand {
	if !c.rep.IsLeader() {
		return c.notLeader()
	}
	wctx, cancel := c.writeCtx(ctx)
	defer cancel()
	if err := write(wctx); err != nil {
		return c.writeError(what, err)
	}
	return nil
}
