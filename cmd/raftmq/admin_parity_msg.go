package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/raftmq/raftmq/client"
)

// Message commands of mqadmin: lookups, printing, reading and send RT
// checks (rows in admin_parity.go).

// runQueryMsgByUniqueKey is mqadmin queryMsgByUniqueKey -i -t [-a].
func runQueryMsgByUniqueKey(ctx context.Context, s *adminSession, in flagValues) ([]messageView, error) {
	msgs, err := s.a.QueryMessageByUniqueKey(ctx, in.str("topic"), in.str("msgId"))
	if errors.Is(err, client.ErrMessageNotFound) {
		return nil, fmt.Errorf("%w: %v", errNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	if !in.bool("showAll") || directFlags(in) {
		msgs = msgs[:1]
	}
	if directFlags(in) {
		v, err := s.directView(ctx, in, msgs[0])
		return []messageView{v}, err
	}
	out := make([]messageView, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, viewOf(m))
	}
	return out, nil
}

// runQueryMsgByOffset pulls the one message at the offset, where
// mqadmin's pull consumer does: the group's leader, else any member the
// route lists (client.Admin.PullQueue).
func runQueryMsgByOffset(ctx context.Context, s *adminSession, in flagValues) (messageView, error) {
	topic, name := in.str("topic"), in.str("brokerName")
	names, err := s.a.RouteGroups(ctx, topic)
	if err != nil {
		return messageView{}, err
	}
	if !slices.Contains(names, name) {
		return messageView{}, fmt.Errorf("%w: topic %s has no queues on broker group %s (its groups: %s)", errNotFound, topic, name, strings.Join(names, ", "))
	}
	mq := client.MessageQueue{Topic: topic, BrokerName: name, QueueID: in.int("queueId")}
	res, err := s.a.PullQueue(ctx, adminGroup, mq, in.int64("offset"), 1, nil)
	if err != nil {
		return messageView{}, err
	}
	if len(res.Messages) == 0 || res.Messages[0].QueueOffset != in.int64("offset") {
		return messageView{}, fmt.Errorf("%w: no message at %s/%s/%d offset %d (%s; queue holds %d..%d)", errNotFound,
			topic, name, mq.QueueID, in.int64("offset"), res.Status, res.MinOffset, res.MaxOffset)
	}
	return viewOf(res.Messages[0]), nil
}

// adminGroup is the consumer group the read-only commands pull as; they
// never commit, so it leaves no offsets behind.
const adminGroup = "TOOLS_CONSUMER"

// printedMessages is the result of printMsg, printMsgByQueue and
// consumeMessage.
type printedMessages struct {
	Messages  []messageView  `json:"messages"`
	TagCounts map[string]int `json:"tagCounts,omitempty"`
	bodies    bool
	each      bool
}

// printMessages reads the chosen queues (every queue of the topic, or
// brokerName/queueID) from -o or the first offset stored at or after -b/-s
// up to -e, at most limit messages (0: no limit), matching -s. Each group
// is read where mqadmin's pull consumer reads: its leader, else any member
// the route lists (client.Admin.PullQueue), so a group electing or
// without quorum still shows what its members stored.
func (s *adminSession) printMessages(ctx context.Context, in flagValues, brokerName string, queueID int, limit int64) (printedMessages, error) {
	topic := in.str("topic")
	out := printedMessages{Messages: []messageView{}, bodies: true, each: true}
	if v, ok := in["printBody"]; ok {
		out.bodies = v.(bool)
	}
	if v, ok := in["printMsg"]; ok {
		out.each = v.(bool) || out.bodies
	}
	var sub *client.SubscriptionData
	if e, ok := in["subExpression"]; ok && e.(string) != "" {
		var err error
		if sub, err = client.ParseTagExpression(topic, e.(string), time.Now().UnixMilli()); err != nil {
			return out, fmt.Errorf("%w: -s: %v", errAdminUsage, err)
		}
	}
	group := adminGroup
	if g, ok := in["consumerGroup"]; ok && g.(string) != "" {
		group = g.(string)
	}
	begin, end := timeFlag(in, "beginTimestamp"), timeFlag(in, "endTimestamp")
	stats, err := s.a.TopicStatus(ctx, topic)
	if err != nil {
		return out, err
	}
	// As mqadmin's pull consumer (fetchSubscribeMessageQueues), only the
	// read queues: brokers refuse pulls of the others.
	rd, err := s.a.TopicRoute(ctx, topic)
	if err != nil {
		return out, err
	}
	readQueues := map[string]int{}
	for _, qd := range rd.QueueDatas {
		readQueues[qd.BrokerName] = qd.ReadQueueNums
	}
	slices.SortFunc(stats, func(a, b client.QueueStat) int { return client.CompareQueues(a.Queue, b.Queue) })
	for _, q := range stats {
		if (brokerName != "" && q.Queue.BrokerName != brokerName) || (queueID >= 0 && q.Queue.QueueID != queueID) ||
			q.Queue.QueueID >= readQueues[q.Queue.BrokerName] {
			continue
		}
		from, to := q.MinOffset, q.MaxOffset
		if o, ok := in["offset"]; ok && o.(int64) >= 0 {
			from = max(from, o.(int64))
		} else if !begin.IsZero() {
			if from, err = s.a.SearchOffset(ctx, q.Queue, begin); err != nil {
				return out, err
			}
		}
		if !end.IsZero() {
			if to, err = s.a.SearchOffset(ctx, q.Queue, end); err != nil {
				return out, err
			}
		}
		for off := from; off < to; {
			if limit > 0 && int64(len(out.Messages)) >= limit {
				return out, nil
			}
			res, err := s.a.PullQueue(ctx, group, q.Queue, off, 32, sub)
			if err != nil {
				return out, err
			}
			for _, m := range res.Messages {
				if m.QueueOffset >= to || (limit > 0 && int64(len(out.Messages)) >= limit) {
					break
				}
				out.Messages = append(out.Messages, viewOf(m))
			}
			if res.NextBeginOffset <= off {
				break
			}
			off = res.NextBeginOffset
		}
	}
	if v, ok := in["calculate"]; ok && v.(bool) {
		out.TagCounts = map[string]int{}
		for _, m := range out.Messages {
			out.TagCounts[m.Tags]++
		}
	}
	return out, nil
}

// timeFlag reads an optional kindTime flag (zero when not given).
func timeFlag(in flagValues, name string) time.Time {
	if v, ok := in[name].(time.Time); ok {
		return v
	}
	return time.Time{}
}

func tablePrinted(w *tabwriter.Writer, r printedMessages) {
	if r.each {
		for _, m := range r.Messages {
			body := ""
			if r.bodies {
				body = " BODY: " + m.Body
			}
			fmt.Fprintf(w, "MSGID: %s %s QUEUE: %s/%d OFFSET: %d TAGS: %s KEYS: %s STORE: %s%s\n", m.MsgID, m.OffsetMsgID, m.Topic, m.QueueID,
				m.QueueOffset, m.Tags, strings.Join(m.Keys, " "), fmtTime(time.UnixMilli(m.StoreTimestamp)), body)
		}
	}
	if r.TagCounts != nil {
		for _, t := range slices.Sorted(maps.Keys(r.TagCounts)) {
			fmt.Fprintf(w, "Tag: %-30s Count: %d\n", t, r.TagCounts[t])
		}
	}
	fmt.Fprintf(w, "%d message(s)\n", len(r.Messages))
}

// sendRT is checkMsgSendRT's result.
type sendRT struct {
	Sends       []sendTiming `json:"sends"`
	AvgRTMillis float64      `json:"avgRtMillis"`
}

type sendTiming struct {
	BrokerName string  `json:"brokerName"`
	QueueID    int     `json:"queueId"`
	OK         bool    `json:"ok"`
	RTMillis   float64 `json:"rtMillis"`
}

// adminProducer starts a producer of the admin's own group.
// It signs with the session's ACL credentials, if any, and uses its TLS.
func (s *adminSession) adminProducer(ctx context.Context) (*client.Producer, error) {
	creds, err := s.f.credentials()
	if err != nil {
		return nil, err
	}
	p, err := client.NewProducer(client.NameServers(s.ns...), client.RequestTimeout(s.f.timeout), client.WithLogger(s.f.logger()),
		client.ProducerGroup(fmt.Sprintf("raftmq-admin-%d", time.Now().UnixNano())), client.WithCredentials(creds.AccessKey, creds.SecretKey),
		s.f.tls.clientOpt())
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errAdminUsage, err)
	}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

func runCheckMsgSendRT(ctx context.Context, s *adminSession, in flagValues) (sendRT, error) {
	p, err := s.adminProducer(ctx)
	if err != nil {
		return sendRT{}, err
	}
	defer func() { _ = p.Close(context.Background()) }()
	body := []byte(strings.Repeat("a", int(max(in.int64("size"), 1))))
	var r sendRT
	var total time.Duration
	var lastErr error
	ok := 0
	for range max(in.int64("amount"), 1) {
		start := time.Now()
		res, err := p.SendSync(ctx, &client.Message{Topic: in.str("topic"), Body: body})
		rt := time.Since(start)
		total += rt
		t := sendTiming{OK: err == nil, RTMillis: float64(rt.Microseconds()) / 1000}
		if err == nil {
			t.BrokerName, t.QueueID = res.Queue.BrokerName, res.Queue.QueueID
			ok++
		} else if lastErr = err; ctx.Err() != nil {
			return r, err
		}
		r.Sends = append(r.Sends, t)
	}
	if ok == 0 {
		return r, fmt.Errorf("every send failed: %w", lastErr)
	}
	r.AvgRTMillis = float64(total.Microseconds()) / 1000 / float64(len(r.Sends))
	return r, nil
}

// clusterRTRow is one broker group of clusterRT.
type clusterRTRow struct {
	Cluster    string  `json:"cluster"`
	BrokerName string  `json:"brokerName"`
	RTMillis   float64 `json:"rtMillis"`
	Success    int     `json:"successCount"`
	Fail       int     `json:"failCount"`
	Error      string  `json:"error,omitempty"`
}

func runClusterRT(ctx context.Context, s *adminSession, in flagValues) ([]clusterRTRow, error) {
	ci, err := s.a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	p, err := s.adminProducer(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = p.Close(context.Background()) }()
	body := []byte(strings.Repeat("a", int(max(in.int64("size"), 1))))
	amount := max(in.int64("amount"), 2)
	out := []clusterRTRow{}
	for _, c := range slices.Sorted(maps.Keys(ci.ClusterAddrTable)) {
		if want := in.str("cluster"); want != "" && c != want {
			continue
		}
		for _, name := range slices.Sorted(slices.Values(ci.ClusterAddrTable[c])) {
			topic := in.str("topic")
			if topic == "" {
				topic = name
			}
			r := clusterRTRow{Cluster: c, BrokerName: name}
			onBroker := client.SelectorFunc(func(_ *client.Message, qs []client.MessageQueue) (client.MessageQueue, bool) {
				for _, q := range qs {
					if q.BrokerName == name {
						return q, true
					}
				}
				return client.MessageQueue{}, false
			})
			var elapsed time.Duration
			for i := range amount {
				start := time.Now()
				_, err := p.SendWithSelector(ctx, &client.Message{Topic: topic, Body: body}, onBroker)
				if err != nil {
					r.Fail++
					r.Error = err.Error()
				} else {
					r.Success++
				}
				if i > 0 { // as mqadmin: the first send (route lookup) is not timed
					elapsed += time.Since(start)
				}
			}
			r.RTMillis = float64(elapsed.Microseconds()) / 1000 / float64(amount-1)
			out = append(out, r)
		}
	}
	return out, nil
}

// utf8Only refuses a body charset (mqadmin's -c charsetName, -f
// bodyFormat) other than UTF-8, the only one raftmq prints bodies in:
// taken and ignored, it would print other bodies garbled.
func utf8Only(in flagValues, name, short string) error {
	switch cs := strings.ToUpper(strings.TrimSpace(in.str(name))); cs {
	case "", "UTF-8", "UTF8":
		return nil
	default:
		return fmt.Errorf("%w: -%s %s: raftmq prints message bodies as UTF-8 only (leave -%s out)", errAdminUsage, short, in.str(name), short)
	}
}
