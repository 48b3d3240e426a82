package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/wire"
)

// queueProgress is one queue of consumerProgress.
type queueProgress struct {
	Topic          string `json:"topic"`
	BrokerName     string `json:"brokerName"`
	QueueID        int    `json:"queueId"`
	BrokerOffset   int64  `json:"brokerOffset"`
	ConsumerOffset int64  `json:"consumerOffset"`
	Diff           int64  `json:"diff"`
	LastTimestamp  int64  `json:"lastTimestamp"`
}

// consumerProgress is consumerProgress's result.
type consumerProgress struct {
	Group     string          `json:"group"`
	DiffTotal int64           `json:"diffTotal"`
	Queues    []queueProgress `json:"queues"`
}

// runConsumerProgress is mqadmin consumerProgress -g [-t], sorted by
// topic, broker and queue.
func runConsumerProgress(ctx context.Context, s *adminSession, in flagValues) (consumerProgress, error) {
	res := consumerProgress{Group: in.str("groupName"), Queues: []queueProgress{}}
	qs, err := s.a.ConsumerProgress(ctx, res.Group, in.str("topicName"))
	if err != nil {
		return res, err
	}
	for _, q := range qs {
		last := int64(0)
		if !q.LastTimestamp.IsZero() {
			last = q.LastTimestamp.UnixMilli()
		}
		res.Queues = append(res.Queues, queueProgress{q.Queue.Topic, q.Queue.BrokerName, q.Queue.QueueID, q.BrokerOffset, q.ConsumerOffset, q.Lag, last})
		res.DiffTotal += q.Lag
	}
	slices.SortFunc(res.Queues, func(a, b queueProgress) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		if c := strings.Compare(a.BrokerName, b.BrokerName); c != 0 {
			return c
		}
		return a.QueueID - b.QueueID
	})
	return res, nil
}

func tableConsumerProgress(w *tabwriter.Writer, r consumerProgress) {
	columns([]any{"#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"}, func(q queueProgress) []any {
		last := "-"
		if q.LastTimestamp > 0 {
			last = fmtTime(time.UnixMilli(q.LastTimestamp))
		}
		return []any{q.Topic, q.BrokerName, q.QueueID, q.BrokerOffset, q.ConsumerOffset, q.Diff, last}
	})(w, r.Queues)
	fmt.Fprintf(w, "\nDiff Total: %d\n", r.DiffTotal)
}

// messageView is the JSON shape of a looked-up message.
type messageView struct {
	Topic          string            `json:"topic"`
	Tags           string            `json:"tags,omitempty"`
	Keys           []string          `json:"keys,omitempty"`
	MsgID          string            `json:"msgId"`
	OffsetMsgID    string            `json:"offsetMsgId"`
	QueueID        int32             `json:"queueId"`
	QueueOffset    int64             `json:"queueOffset"`
	CommitLogOff   int64             `json:"commitLogOffset"`
	BornTimestamp  int64             `json:"bornTimestamp"`
	StoreTimestamp int64             `json:"storeTimestamp"`
	BornHost       string            `json:"bornHost"`
	StoreHost      string            `json:"storeHost"`
	ReconsumeTimes int32             `json:"reconsumeTimes"`
	Properties     map[string]string `json:"properties,omitempty"`
	Body           string            `json:"body"`
}

func viewOf(m *client.MessageExt) messageView {
	return messageView{
		Topic: m.Topic, Tags: m.Tags, Keys: m.Keys, MsgID: m.MsgID, OffsetMsgID: m.OffsetMsgID, QueueID: m.QueueID,
		QueueOffset: m.QueueOffset, CommitLogOff: m.CommitLogOffset, BornTimestamp: m.BornTimestamp,
		StoreTimestamp: m.StoreTimestamp, BornHost: m.BornHost, StoreHost: m.StoreHost, ReconsumeTimes: m.ReconsumeTimes,
		Properties: m.Properties, Body: string(m.Body),
	}
}

// runQueryMsgByID is mqadmin queryMsgById -i: an offset msgId whose
// address is a registered broker is looked up there (VIEW_MESSAGE_BY_ID);
// anything else is taken as the client message id (UNIQ_KEY) and found
// through the index, of -t's topic or else of every topic in turn (as
// mqadmin falls back to queryMessageByUniqKey). Both forms are 32 hex
// digits, hence the address check.
func runQueryMsgByID(ctx context.Context, s *adminSession, in flagValues) (messageView, error) {
	id := in.str("msgId")
	if s.isBrokerMsgID(ctx, id) {
		m, err := s.a.ViewMessage(ctx, id)
		if err == nil {
			return viewOf(m), nil
		}
		if !errors.Is(err, client.ErrMessageNotFound) {
			return messageView{}, err
		}
	}
	topics := []string{in.str("topic")}
	if topics[0] == "" {
		var err error
		if topics, err = s.a.TopicList(ctx); err != nil {
			return messageView{}, err
		}
	}
	for _, t := range topics {
		msgs, err := s.a.QueryMessageByUniqueKey(ctx, t, id)
		if err == nil {
			return viewOf(msgs[0]), nil
		}
		if !errors.Is(err, client.ErrMessageNotFound) && !errors.Is(err, client.ErrNoRoute) {
			return messageView{}, err
		}
	}
	return messageView{}, fmt.Errorf("%w: no message with offset msgId or client msgId %s (searched %d topic(s))", errNotFound, id, len(topics))
}

// isBrokerMsgID reports whether id decodes as an offset msgId naming a
// registered broker's address.
func (s *adminSession) isBrokerMsgID(ctx context.Context, id string) bool {
	mid, err := wire.ParseMessageID(id)
	if err != nil {
		return false
	}
	ci, err := s.a.ClusterInfo(ctx)
	if err != nil {
		return true // let the lookup report the name server
	}
	for _, b := range ci.BrokerAddrTable {
		for _, a := range b.BrokerAddrs {
			if a == mid.Addr.String() {
				return true
			}
		}
	}
	return false
}

func tableMessage(w *tabwriter.Writer, v messageView) {
	row(w, "OffsetID:", v.OffsetMsgID)
	row(w, "MsgID:", v.MsgID)
	row(w, "Topic:", v.Topic)
	row(w, "Tags:", "["+v.Tags+"]")
	row(w, "Keys:", "["+strings.Join(v.Keys, " ")+"]")
	row(w, "Queue ID:", v.QueueID)
	row(w, "Queue Offset:", v.QueueOffset)
	row(w, "CommitLog Offset:", v.CommitLogOff)
	row(w, "Reconsume Times:", v.ReconsumeTimes)
	row(w, "Born Timestamp:", fmtTime(time.UnixMilli(v.BornTimestamp)))
	row(w, "Store Timestamp:", fmtTime(time.UnixMilli(v.StoreTimestamp)))
	row(w, "Born Host:", v.BornHost)
	row(w, "Store Host:", v.StoreHost)
	row(w, "Body:", v.Body)
}

// runQueryMsgByKey is mqadmin queryMsgByKey -t -k.
func runQueryMsgByKey(ctx context.Context, s *adminSession, in flagValues) ([]messageView, error) {
	topic, key := in.str("topic"), in.str("msgKey")
	end := time.Now()
	if e := in.int64("endTimestamp"); e > 0 {
		end = time.UnixMilli(e)
	}
	msgs, err := s.a.QueryMessageByKey(ctx, topic, key, in.int("maxNum"), time.UnixMilli(in.int64("beginTimestamp")), end)
	if errors.Is(err, client.ErrMessageNotFound) {
		return nil, fmt.Errorf("%w: no message of topic %s with key %q: %v", errNotFound, topic, key, err)
	}
	if err != nil {
		return nil, err
	}
	views := make([]messageView, 0, len(msgs))
	for _, m := range msgs {
		views = append(views, viewOf(m))
	}
	return views, nil
}

// queueOffset is one queue of resetOffsetByTime.
type queueOffset struct {
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
	Offset     int64  `json:"offset"`
}

// runResetOffsetByTime is mqadmin resetOffsetByTime -g -t -s [-f].
func runResetOffsetByTime(ctx context.Context, s *adminSession, in flagValues) ([]queueOffset, error) {
	offs, err := s.a.ResetOffsetByTime(ctx, in.str("group"), in.str("topic"), in.time("timestamp"), in.bool("force"))
	if err != nil {
		return nil, err
	}
	out := []queueOffset{}
	for _, mq := range slices.SortedFunc(maps.Keys(offs), client.CompareQueues) {
		out = append(out, queueOffset{mq.BrokerName, mq.QueueID, offs[mq]})
	}
	return out, nil
}

// brokerConfigUpdate is updateBrokerConfig's result (fields in the JSON
// key order).
type brokerConfigUpdate struct {
	Brokers []string `json:"brokers"`
	Key     string   `json:"key"`
	Value   string   `json:"value"`
}

// runUpdateBrokerConfig is mqadmin updateBrokerConfig -b|-c -k -v: every
// target is tried; the failures are returned together.
func runUpdateBrokerConfig(ctx context.Context, s *adminSession, in flagValues) (brokerConfigUpdate, error) {
	r := brokerConfigUpdate{Key: in.str("key"), Value: in.str("value")}
	targets := []string{in.str("brokerAddr")}
	if cluster := in.str("clusterName"); cluster != "" {
		ci, err := s.a.ClusterInfo(ctx)
		if err != nil {
			return r, err
		}
		targets = nil
		for _, m := range clusterMembers(ci, cluster) {
			targets = append(targets, m.Addr)
		}
		if len(targets) == 0 {
			return r, fmt.Errorf("%w: cluster %q has no registered broker", errNotFound, cluster)
		}
	}
	var errs []error
	for _, a := range targets {
		if err := s.a.UpdateBrokerConfig(ctx, a, map[string]string{r.Key: r.Value}); err != nil {
			errs = append(errs, err)
			continue
		}
		r.Brokers = append(r.Brokers, a)
	}
	return r, errors.Join(errs...)
}

// runUpdateSubGroup is mqadmin updateSubGroup -g -b|-c with its
// boolean/int options given as values (mqadmin style: -s true).
func runUpdateSubGroup(ctx context.Context, s *adminSession, in flagValues) (targeted[wire.SubscriptionGroupConfig], error) {
	sg := wire.DefaultSubscriptionGroupConfig(in.str("groupName"))
	sg.ConsumeEnable = in.bool("consumeEnable")
	sg.ConsumeFromMinEnable = in.bool("consumeFromMinEnable")
	sg.ConsumeBroadcastEnable = in.bool("consumeBroadcastEnable")
	sg.ConsumeMessageOrderly = in.bool("consumeMessageOrderly")
	sg.NotifyConsumerIdsChangedEnable = in.bool("notifyConsumerIdsChanged")
	sg.RetryQueueNums, sg.RetryMaxTimes = int32(in.int("retryQueueNums")), int32(in.int("retryMaxTimes"))
	addr, cluster := in.str("brokerAddr"), in.str("clusterName")
	err := s.a.UpdateSubscriptionGroup(ctx, sg, cluster, addr)
	return targeted[wire.SubscriptionGroupConfig]{target: addr + cluster, v: sg}, err
}

// sendResult is sendMessage's result.
type sendResult struct {
	BrokerName  string `json:"brokerName"`
	QueueID     int    `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	SendStatus  string `json:"sendStatus"`
	MsgID       string `json:"msgId"`
	OffsetMsgID string `json:"offsetMsgId"`
}

// runSendMessage is mqadmin sendMessage -t -p [-k] [-c], sent by a
// producer of its own group.
func runSendMessage(ctx context.Context, s *adminSession, in flagValues) (sendResult, error) {
	p, err := client.NewProducer(client.NameServers(s.ns...), client.RequestTimeout(s.f.timeout), client.WithLogger(s.f.logger()),
		client.ProducerGroup(fmt.Sprintf("raftmq-admin-%d", os.Getpid())))
	if err != nil {
		return sendResult{}, fmt.Errorf("%w: %v", errAdminUsage, err)
	}
	if err := p.Start(ctx); err != nil {
		return sendResult{}, err
	}
	defer func() { _ = p.Close(context.Background()) }()
	res, err := p.SendSync(ctx, &client.Message{Topic: in.str("topic"), Body: []byte(in.str("body")), Tags: in.str("tags"),
		Keys: strings.Fields(in.str("keys"))})
	if err != nil {
		return sendResult{}, err
	}
	return sendResult{res.Queue.BrokerName, res.Queue.QueueID, res.QueueOffset, res.Status.String(), res.MsgID, res.OffsetMsgID}, nil
}
