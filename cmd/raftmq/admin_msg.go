package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
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
	// ClientIP is the IP part of the client id of the consumer the queue
	// is allocated to (-s); "" when no online client holds it.
	ClientIP string `json:"clientIP,omitempty"`
}

// consumerProgress is consumerProgress's result.
type consumerProgress struct {
	Group     string          `json:"group"`
	DiffTotal int64           `json:"diffTotal"`
	Queues    []queueProgress `json:"queues"`
	clientIP  bool            // -s: the table has the #Client IP column
}

// runConsumerProgress is mqadmin consumerProgress -g [-t] [-s], sorted by
// topic, broker and queue.
func runConsumerProgress(ctx context.Context, s *adminSession, in flagValues) (consumerProgress, error) {
	res := consumerProgress{Group: in.str("groupName"), Queues: []queueProgress{}, clientIP: in.bool("showClientIP")}
	qs, err := s.a.ConsumerProgress(ctx, res.Group, in.str("topicName"))
	if err != nil {
		return res, err
	}
	var owners map[client.MessageQueue]string
	if res.clientIP {
		if owners, err = s.queueOwners(ctx, res.Group); err != nil {
			return res, err
		}
	}
	for _, q := range qs {
		last := int64(0)
		if !q.LastTimestamp.IsZero() {
			last = q.LastTimestamp.UnixMilli()
		}
		res.Queues = append(res.Queues, queueProgress{Topic: q.Queue.Topic, BrokerName: q.Queue.BrokerName, QueueID: q.Queue.QueueID,
			BrokerOffset: q.BrokerOffset, ConsumerOffset: q.ConsumerOffset, Diff: q.Lag, LastTimestamp: last, ClientIP: owners[q.Queue]})
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
	// -s puts #Client IP before #Diff, where mqadmin prints it.
	header := []any{"#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"}
	if r.clientIP {
		header = slices.Insert(header, 5, any("#Client IP"))
	}
	columns(header, func(q queueProgress) []any {
		last := "-"
		if q.LastTimestamp > 0 {
			last = fmtTime(time.UnixMilli(q.LastTimestamp))
		}
		if r.clientIP {
			ip := q.ClientIP
			if ip == "" {
				ip = "N/A"
			}
			return []any{q.Topic, q.BrokerName, q.QueueID, q.BrokerOffset, q.ConsumerOffset, ip, q.Diff, last}
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
	// Direct is the consumer's verdict when -g and -d had it consume the
	// message (admin_direct.go).
	Direct *wire.ConsumeMessageDirectlyResult `json:"consumeMessageDirectlyResult,omitempty"`
	// Resend is where queryMsgById -s true sent the message again.
	Resend *sendResult `json:"resendResult,omitempty"`
	// resentID is the -i id a resend was asked for (mqadmin prints it).
	resentID string
}

func viewOf(m *client.MessageExt) messageView {
	return messageView{
		Topic: m.Topic, Tags: m.Tags, Keys: m.Keys, MsgID: m.MsgID, OffsetMsgID: m.OffsetMsgID, QueueID: m.QueueID,
		QueueOffset: m.QueueOffset, CommitLogOff: m.CommitLogOffset, BornTimestamp: m.BornTimestamp,
		StoreTimestamp: m.StoreTimestamp, BornHost: m.BornHost, StoreHost: m.StoreHost, ReconsumeTimes: m.ReconsumeTimes,
		Properties: m.Properties, Body: string(m.Body),
	}
}

// msgLookups is queryMsgById's result: the messages of -i's ids, in
// -i's order. -i with one id prints (and encodes) that message alone.
type msgLookups struct {
	views []messageView
	list  bool // -i names several ids: the JSON is an array
}

// MarshalJSON encodes the one message of a single -i id, else the array.
func (l msgLookups) MarshalJSON() ([]byte, error) {
	if !l.list && len(l.views) == 1 {
		return json.Marshal(l.views[0])
	}
	if l.views == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(l.views)
}

// tableMsgLookups prints each message as a single lookup prints it, a
// blank line between two.
func tableMsgLookups(w *tabwriter.Writer, l msgLookups) {
	for i, v := range l.views {
		if i > 0 {
			fmt.Fprintln(w)
		}
		tableMessage(w, v)
	}
}

// runQueryMsgByID is mqadmin queryMsgById -i: each comma-separated id of
// -i in turn (blank ones skipped, as mqadmin's StringUtils.split does),
// looked up by queryMsgByID. An id not found is reported after the
// others are done; any other failure ends the command there, as it ends
// mqadmin's. -f is mqadmin's body charset: raftmq prints bodies as UTF-8
// only (the Body: line is always there, where mqadmin prints its
// "Message Body:" only with -f), so another charset is refused.
func runQueryMsgByID(ctx context.Context, s *adminSession, in flagValues) (msgLookups, error) {
	if err := checkResendFlags(in); err != nil {
		return msgLookups{}, err
	}
	if err := utf8Only(in, "bodyFormat", "f"); err != nil {
		return msgLookups{}, err
	}
	var ids []string
	for id := range strings.SplitSeq(in.str("msgId"), ",") {
		if id = strings.TrimSpace(id); id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return msgLookups{}, fmt.Errorf("%w: -i %q names no message id (give one, or several separated by commas)", errAdminUsage, in.str("msgId"))
	}
	scope := &msgSearch{topic: in.str("topic"), cluster: in.str("cluster")}
	if scope.cluster != "" {
		names, err := s.a.ClusterGroups(ctx, scope.cluster)
		if errors.Is(err, client.ErrNoBroker) {
			return msgLookups{}, fmt.Errorf("%w: -c %s: %v", errNotFound, scope.cluster, err)
		}
		if err != nil {
			return msgLookups{}, err
		}
		scope.groups = append([]string{}, names...) // non-nil: filter even when empty
	}
	res := msgLookups{list: len(ids) > 1}
	var errs []error
	for _, id := range ids {
		v, err := s.queryMsgByID(ctx, in, scope, id)
		if err == nil {
			res.views = append(res.views, v)
			continue
		}
		errs = append(errs, err)
		if !errors.Is(err, errNotFound) {
			break
		}
	}
	return res, partial(len(res.views), errs)
}

// msgSearch is where queryMsgById looks client msgIds up: -t's topic or
// else every topic, and with -c only the broker groups of that cluster
// (as RocketMQ's MQAdminImpl.queryMessage asks only the brokers of its
// clusterName). Its lists are read once for all of -i's ids.
type msgSearch struct {
	topic, cluster string
	topics         []string // nil until first needed
	groups         []string // -c's broker groups; nil without -c
}

// queryMsgByID finds the message of one id (findMsgByID) and prints it,
// has a client consume it (-g -d) or resends it (-s true).
func (s *adminSession) queryMsgByID(ctx context.Context, in flagValues, scope *msgSearch, id string) (messageView, error) {
	m, err := s.findMsgByID(ctx, scope, id)
	if err != nil {
		return messageView{}, err
	}
	if in.bool("sendMessage") {
		return s.resend(ctx, id, m)
	}
	return s.directView(ctx, in, m)
}

// findMsgByID looks one id up: an offset msgId whose address is a
// registered broker is read there (VIEW_MESSAGE_BY_ID; -c does not apply,
// as in mqadmin: the id names its broker); anything else is taken as the
// client message id (UNIQ_KEY) and found through the index, of -t's topic
// or else of every topic in turn (as mqadmin falls back to
// queryMessageByUniqKey). Both forms are 32 hex digits, hence the address
// check.
func (s *adminSession) findMsgByID(ctx context.Context, scope *msgSearch, id string) (*client.MessageExt, error) {
	if s.isBrokerMsgID(ctx, id) {
		m, err := s.a.ViewMessage(ctx, id)
		if err == nil || !errors.Is(err, client.ErrMessageNotFound) {
			return m, err
		}
	}
	if scope.topics == nil {
		scope.topics = []string{scope.topic}
		if scope.topic == "" {
			var err error
			if scope.topics, err = s.a.TopicList(ctx); err != nil {
				scope.topics = nil
				return nil, err
			}
		}
	}
	for _, t := range scope.topics {
		m, err := s.uniqueKeyMsg(ctx, scope, t, id)
		if err == nil || (!errors.Is(err, client.ErrMessageNotFound) && !errors.Is(err, client.ErrNoRoute)) {
			return m, err
		}
	}
	where := ""
	if scope.cluster != "" {
		where = " in cluster " + scope.cluster
	}
	return nil, fmt.Errorf("%w: no message with offset msgId or client msgId %s%s (searched %d topic(s))", errNotFound, id, where, len(scope.topics))
}

// uniqueKeyMsg finds topic's message whose client msgId is id, on every
// broker group of the topic's route or, with -c, on that cluster's only.
// ErrMessageNotFound when none has it.
func (s *adminSession) uniqueKeyMsg(ctx context.Context, scope *msgSearch, topic, id string) (*client.MessageExt, error) {
	var msgs []*client.MessageExt
	var err error
	if scope.groups == nil {
		msgs, err = s.a.QueryMessageByUniqueKey(ctx, topic, id)
	} else {
		msgs, err = s.a.QueryMessageByUniqueKeyOn(ctx, scope.groups, topic, id)
	}
	if err != nil {
		return nil, err
	}
	return msgs[0], nil
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
	if v.Direct != nil {
		tableDirect(w, v.Direct)
		return
	}
	if v.Resend != nil {
		tableResend(w, v)
		return
	}
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
	begin, end := queryKeyWindow(in)
	maxNum, cluster := in.int("maxNum"), in.str("cluster")
	if n, err := strconv.Atoi(cluster); err == nil {
		maxNum, cluster = n, ""
	}
	var msgs []*client.MessageExt
	var err error
	if cluster == "" {
		msgs, err = s.a.QueryMessageByKey(ctx, topic, key, maxNum, begin, end)
	} else {
		names, cerr := s.a.ClusterGroups(ctx, cluster)
		if errors.Is(cerr, client.ErrNoBroker) {
			return nil, fmt.Errorf("%w: -c %s: %v", errNotFound, cluster, cerr)
		}
		if cerr != nil {
			return nil, cerr
		}
		msgs, err = s.a.QueryMessageByKeyOn(ctx, names, topic, key, maxNum, begin, end)
	}
	if errors.Is(err, client.ErrMessageNotFound) {
		where := ""
		if cluster != "" {
			where = " in cluster " + cluster
		}
		return nil, fmt.Errorf("%w: no message of topic %s with key %q%s: %v", errNotFound, topic, key, where, err)
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

// queryKeyWindow is queryMsgByKey's store-time window: -b (default 0)
// to -e, which defaults to no bound (mqadmin's Long.MAX_VALUE). Bounded
// by this host's clock, a message a broker stored moments ago by a
// clock ahead of it would not be found.
func queryKeyWindow(in flagValues) (begin, end time.Time) {
	end = time.UnixMilli(math.MaxInt64)
	if e := in.int64("endTimestamp"); e > 0 {
		end = time.UnixMilli(e)
	}
	return time.UnixMilli(in.int64("beginTimestamp")), end
}

// queueOffset is one queue of resetOffsetByTime.
type queueOffset struct {
	BrokerName string `json:"brokerName"`
	QueueID    int    `json:"queueId"`
	Offset     int64  `json:"offset"`
}

// runResetOffsetByTime is mqadmin resetOffsetByTime -g -t -s [-f].
func runResetOffsetByTime(ctx context.Context, s *adminSession, in flagValues) ([]queueOffset, error) {
	if in.str("broker") != "" || in.int("queue") >= 0 || in.int64("offset") >= 0 {
		return s.resetQueue(ctx, in)
	}
	// A group that failed ends the resets; the groups reset before it
	// are listed with the error.
	offs, err := s.a.ResetOffsetByTime(ctx, in.str("group"), in.str("topic"), in.time("timestamp"), in.bool("force"))
	out := []queueOffset{}
	for _, mq := range slices.SortedFunc(maps.Keys(offs), client.CompareQueues) {
		out = append(out, queueOffset{mq.BrokerName, mq.QueueID, offs[mq]})
	}
	return out, partial(len(out), []error{err})
}

// resetQueue is RocketMQ 5's resetOffsetByTime -b -q [-o]: one queue of
// -b's group, to -o or else to the offset found for -s, whatever the
// group's offset is (mqadmin's resetOffsetByQueueId). The group's leader
// commits it through Raft and tells the group's live consumers; -b may
// name any member.
func (s *adminSession) resetQueue(ctx context.Context, in flagValues) ([]queueOffset, error) {
	addr, q, off := in.str("broker"), in.int("queue"), in.int64("offset")
	if addr == "" || q < 0 {
		return nil, fmt.Errorf("%w: -b brokerAddr and -q queueId go together (one queue of one broker group); -o needs both", errAdminUsage)
	}
	h := &wire.ResetOffsetRequestHeader{Topic: in.str("topic"), Group: in.str("group"), Timestamp: in.time("timestamp").UnixMilli(),
		IsForce: true, QueueID: int32(q), Offset: off}
	resp, _, err := s.leaderRequest(ctx, groupTarget{addr: addr}, remoting.RequestInvokeBrokerToResetOffset, h)
	if err != nil {
		return nil, err
	}
	entries, err := wire.DecodeQueueTable(resp.Body, "offsetTable")
	if err != nil {
		return nil, err
	}
	out := []queueOffset{}
	for _, e := range entries {
		n, err := strconv.ParseInt(string(e.Value), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reset offset answer of %s: %w", addr, err)
		}
		out = append(out, queueOffset{e.Queue.BrokerName, int(e.Queue.QueueID), n})
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
	if _, err := client.ConfigUpdateBody(map[string]string{r.Key: r.Value}); err != nil {
		return r, fmt.Errorf("%w: %v", errAdminUsage, err)
	}
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
	return r, partial(len(r.Brokers), errs)
}

// runUpdateSubGroup is mqadmin updateSubGroup -g -b|-c with its
// boolean/int options given as values (mqadmin style: -s true). The
// config is sent whole: an option left out takes its default again.
func runUpdateSubGroup(ctx context.Context, s *adminSession, in flagValues) (subGroupUpdate, error) {
	sg := wire.DefaultSubscriptionGroupConfig(in.str("groupName"))
	sg.ConsumeEnable = in.bool("consumeEnable")
	sg.ConsumeFromMinEnable = in.bool("consumeFromMinEnable")
	sg.ConsumeBroadcastEnable = in.bool("consumeBroadcastEnable")
	sg.ConsumeMessageOrderly = in.bool("consumeMessageOrderly")
	sg.NotifyConsumerIdsChangedEnable = in.bool("notifyConsumerIdsChanged")
	sg.RetryQueueNums, sg.RetryMaxTimes = int32(in.int("retryQueueNums")), int32(in.int("retryMaxTimes"))
	sg.BrokerID, sg.WhichBrokerWhenConsumeSlowly = in.int64("brokerId"), in.int64("whichBrokerWhenConsumeSlowly")
	addr, cluster := in.str("brokerAddr"), in.str("clusterName")
	accepted, err := s.a.UpdateSubscriptionGroup(ctx, sg, cluster, addr)
	return subGroupUpdate{brokers: accepted, v: sg}, partial(len(accepted), []error{err})
}

// subGroupUpdate is updateSubGroup's result: the config (its JSON) and
// the masters that took it (its table, one line each as mqadmin prints).
type subGroupUpdate struct {
	brokers []string
	v       wire.SubscriptionGroupConfig
}

// MarshalJSON encodes the config alone.
func (u subGroupUpdate) MarshalJSON() ([]byte, error) { return json.Marshal(u.v) }

// sendResult is sendMessage's result.
type sendResult struct {
	BrokerName  string `json:"brokerName"`
	QueueID     int    `json:"queueId"`
	QueueOffset int64  `json:"queueOffset"`
	SendStatus  string `json:"sendStatus"`
	MsgID       string `json:"msgId"`
	OffsetMsgID string `json:"offsetMsgId"`
}

// runSendMessage is mqadmin sendMessage -t -p [-k] [-c] [-b [-i]], sent
// by a producer of its own group (signed and over TLS as the session is):
// -b -i to that queue (-b alone is ignored, as in mqadmin), else
// wherever the producer's round robin puts it.
func runSendMessage(ctx context.Context, s *adminSession, in flagValues) (sendResult, error) {
	broker, qid := in.str("broker"), in.int("qid")
	if qid >= 0 && broker == "" {
		return sendResult{}, fmt.Errorf("%w: -i %d needs -b brokerName: a queue id names a queue of one broker group", errAdminUsage, qid)
	}
	p, err := s.adminProducer(ctx)
	if err != nil {
		return sendResult{}, err
	}
	defer func() { _ = p.Close(context.Background()) }()
	msg := &client.Message{Topic: in.str("topic"), Body: []byte(in.str("body")), Tags: in.str("tags"), Keys: strings.Fields(in.str("keys"))}
	var res *client.SendResult
	if qid < 0 {
		// As SendMessageCommand: -b picks a queue only together with -i;
		// alone it is ignored and the producer chooses as usual.
		res, err = p.SendSync(ctx, msg)
	} else {
		var mq client.MessageQueue
		if mq, err = chooseQueue(ctx, p, msg.Topic, broker, qid); err == nil {
			res, err = p.SendWithSelector(ctx, msg, client.ManualSelector(mq))
		}
	}
	if err != nil {
		return sendResult{}, err
	}
	return sendResult{res.Queue.BrokerName, res.Queue.QueueID, res.QueueOffset, res.Status.String(), res.MsgID, res.OffsetMsgID}, nil
}

// chooseQueue is sendMessage's queue for -b broker -i qid, if the route
// has it writable.
func chooseQueue(ctx context.Context, p *client.Producer, topic, broker string, qid int) (client.MessageQueue, error) {
	qs, err := p.PublishQueues(ctx, topic)
	if err != nil {
		return client.MessageQueue{}, err
	}
	for _, q := range qs {
		if q.BrokerName == broker && q.QueueID == qid {
			return q, nil
		}
	}
	return client.MessageQueue{}, fmt.Errorf("%w: queue %d of broker %s is not a writable queue of %s; writable queues of %s: %s",
		errNotFound, qid, broker, topic, topic, describeQueues(qs))
}

// describeQueues lists queues by broker group with their ids as ranges:
// "broker-a 0-3, broker-b 0-1,5".
func describeQueues(qs []client.MessageQueue) string {
	ids := map[string][]int{}
	for _, q := range qs {
		ids[q.BrokerName] = append(ids[q.BrokerName], q.QueueID)
	}
	var parts []string
	for _, b := range slices.Sorted(maps.Keys(ids)) {
		l := slices.Sorted(slices.Values(ids[b]))
		var runs []string
		for i := 0; i < len(l); {
			j := i
			for j+1 < len(l) && l[j+1] == l[j]+1 {
				j++
			}
			if j > i {
				runs = append(runs, fmt.Sprintf("%d-%d", l[i], l[j]))
			} else {
				runs = append(runs, strconv.Itoa(l[i]))
			}
			i = j + 1
		}
		parts = append(parts, b+" "+strings.Join(runs, ","))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
