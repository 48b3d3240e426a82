package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP
// (38), GET_CONSUMER_CONNECTION_LIST (203) (RocketMQ ClientManageProcessor
// and ConsumerManageProcessor).

// heartbeatData is the HEART_BEAT body.
type heartbeatData struct {
	ClientID        string         `json:"clientID"`
	ProducerDataSet []producerData `json:"producerDataSet"`
	ConsumerDataSet []consumerData `json:"consumerDataSet"`
}

type producerData struct {
	GroupName string `json:"groupName"`
}

type consumerData struct {
	GroupName           string             `json:"groupName"`
	ConsumeType         string             `json:"consumeType"`
	MessageModel        string             `json:"messageModel"`
	ConsumeFromWhere    string             `json:"consumeFromWhere"`
	SubscriptionDataSet []subscriptionData `json:"subscriptionDataSet"`
	UnitMode            bool               `json:"unitMode"`
}

// subscriptionData is RocketMQ's SubscriptionData as clients send it.
type subscriptionData struct {
	ClassFilterMode bool            `json:"classFilterMode"`
	Topic           string          `json:"topic"`
	SubString       string          `json:"subString"`
	TagsSet         json.RawMessage `json:"tagsSet,omitempty"`
	CodeSet         json.RawMessage `json:"codeSet,omitempty"`
	SubVersion      int64           `json:"subVersion"`
	ExpressionType  string          `json:"expressionType"`
}

func (c *Controller) processHeartbeat(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var hb heartbeatData
	if err := json.Unmarshal(req.Body, &hb); err != nil {
		return response(remoting.ResponseSystemError, "malformed heartbeat body: %v", err), nil
	}
	if hb.ClientID == "" {
		return response(remoting.ResponseSystemError, "heartbeat without clientID"), nil
	}
	now := time.Now()
	ch := clientChannel{ClientID: hb.ClientID, Conn: conn, Language: req.Language.String(), Version: int(req.Version)}
	for _, cd := range hb.ConsumerDataSet {
		if r := checkGroup(cd.GroupName); r != nil {
			return r, nil
		}
		c.prepareConsumerGroup(ctx, cd.GroupName)
		if c.clients.registerConsumer(cd, ch, now) {
			c.log.Info("consumer group membership changed", zap.String("group", cd.GroupName), zap.String("client", hb.ClientID))
			c.clients.notifyChanged(cd.GroupName)
		}
	}
	for _, pd := range hb.ProducerDataSet {
		c.clients.registerProducer(pd.GroupName, ch, now)
	}
	return success(), nil
}

// prepareConsumerGroup creates, on the leader, the group's config
// (autoCreateSubscriptionGroup) and its retry topic, as RocketMQ does on
// a heartbeat, so the %RETRY% route exists before the first send-back.
func (c *Controller) prepareConsumerGroup(ctx context.Context, group string) {
	if !c.rep.IsLeader() {
		return
	}
	sg, ok := c.rep.State().SubscriptionGroup(group)
	if !ok {
		if !c.live().AutoCreateSubscriptionGroup {
			return
		}
		sg = wire.DefaultSubscriptionGroupConfig(group)
		wctx, cancel := c.writeCtx(ctx)
		err := c.rep.UpdateSubscriptionGroup(wctx, sg)
		cancel()
		if err != nil {
			c.log.Warn("auto-create subscription group failed", zap.String("group", group), zap.Error(err))
			return
		}
	}
	retry := RetryGroupTopicPrefix + group
	if _, ok := c.rep.State().Topic(retry); !ok {
		if _, err := c.ensureTopic(ctx, retry, int(max(sg.RetryQueueNums, 1)), 0); err != nil {
			c.log.Warn("create retry topic failed", zap.String("topic", retry), zap.Error(err))
		}
	}
}

type unregisterClientHeader struct {
	ClientID      string `ext:"clientID,required"`
	ProducerGroup string `ext:"producerGroup"`
	ConsumerGroup string `ext:"consumerGroup"`
}

func (c *Controller) processUnregisterClient(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h unregisterClientHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	for _, g := range c.clients.unregister(h.ClientID, h.ProducerGroup, h.ConsumerGroup) {
		c.clients.notifyChanged(g)
	}
	return success(), nil
}

// processCheckClientConfig accepts any TAG subscription (CHECK_CLIENT_CONFIG).
func (c *Controller) processCheckClientConfig(_ context.Context, _ *remoting.Conn, _ *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	return success(), nil
}

type consumerGroupHeader struct {
	ConsumerGroup string `ext:"consumerGroup,required"`
}

func (c *Controller) processGetConsumerList(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h consumerGroupHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	ids := c.clients.consumerIDs(h.ConsumerGroup)
	if len(ids) == 0 {
		return response(remoting.ResponseSystemError, "no consumer of group %s is connected to %s", h.ConsumerGroup, c.addr), nil
	}
	r := success()
	r.Body, _ = json.Marshal(struct {
		ConsumerIDList []string `json:"consumerIdList"`
	}{ids})
	return r, nil
}

// consumerConnection is GET_CONSUMER_CONNECTION_LIST's body.
type consumerConnection struct {
	ConnectionSet     []connection                `json:"connectionSet"`
	SubscriptionTable map[string]subscriptionData `json:"subscriptionTable"`
	ConsumeType       string                      `json:"consumeType"`
	MessageModel      string                      `json:"messageModel"`
	ConsumeFromWhere  string                      `json:"consumeFromWhere"`
}

type connection struct {
	ClientID   string `json:"clientId"`
	ClientAddr string `json:"clientAddr"`
	Language   string `json:"language"`
	Version    int    `json:"version"`
}

func (c *Controller) processGetConsumerConnectionList(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h consumerGroupHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	g, ok := c.clients.group(h.ConsumerGroup)
	if !ok {
		return response(remoting.ResponseConsumerNotOnline, "the consumer group %s is not online", h.ConsumerGroup)
	}
	cc := consumerConnection{SubscriptionTable: g.Subscriptions, ConsumeType: g.ConsumeType,
		MessageModel: g.MessageModel, ConsumeFromWhere: g.ConsumeFromWhere}
	for _, ch := range g.Channels {
		cc.ConnectionSet = append(cc.ConnectionSet, connection{ClientID: ch.ClientID, ClientAddr: ch.Conn.RemoteAddr(),
			Language: ch.Language, Version: ch.Version})
	}
	r := success()
	r.Body, _ = json.Marshal(cc)
	return r
}

func (c *Controller) String() string { return fmt.Sprintf("broker %s (%s)", c.cfg.BrokerName, c.addr) }
