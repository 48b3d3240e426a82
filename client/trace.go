package client

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Message trace (RocketMQ's msgTrace: TraceDataEncoder, AsyncTraceDispatcher
// and the send and consume trace hooks). With WithTrace, a producer
// records a Pub trace for every message it sent successfully and a push
// consumer a SubBefore and a SubAfter for every listener call, in
// RocketMQ's text format, so the dashboard's and mqadmin's trace queries
// read them: records are CONTENT_SPLITOR (\x01) separated fields, each
// ended by FIELD_SPLITOR (\x02), several per message; each trace message
// carries the traced messages' ids and keys as its KEYS, by which trace
// tools look it up.
//
// Tracing never blocks or fails a send or a listener call: records go
// into a bounded buffer that a background goroutine drains, in batches of
// up to traceBatch records per traced topic, through its own producer;
// when the buffer is full a record is dropped (counted, and logged once
// per traceDropLogEvery). Brokers must accept the trace topic: raftmq
// routes and creates RMQ_SYS_TRACE_TOPIC with traceTopicEnable=true (as
// RocketMQ creates it at start), or auto-creates it with
// autoCreateTopicEnable.

// Trace format constants (TraceConstants, TraceType).
const (
	// DefaultTraceTopic is RocketMQ's trace topic (TopicValidator.RMQ_SYS_TRACE_TOPIC).
	DefaultTraceTopic = "RMQ_SYS_TRACE_TOPIC"

	traceContentSplitor = '\x01'
	traceFieldSplitor   = '\x02'

	traceTypePub       = "Pub"
	traceTypeSubBefore = "SubBefore"
	traceTypeSubAfter  = "SubAfter"

	// traceGroupPrefix names the trace producer's group
	// (TraceConstants.GROUP_NAME_PREFIX + "-" + group).
	traceGroupPrefix = "_INNER_TRACE_PRODUCER-"

	// MessageType ordinals (Normal_Msg, Trans_Msg_Half, Trans_msg_Commit,
	// Delay_Msg, Order_Msg).
	traceMsgNormal = 0
	traceMsgDelay  = 3
	traceMsgOrder  = 4

	// ConsumeReturnType ordinals of SubAfter's context code.
	traceConsumeSuccess = 0
	traceConsumeFailed  = 4
)

// Tracer limits: records buffered, records per trace message (RocketMQ's
// batchNum is at most 20), how long a record may wait for its batch.
const (
	traceBuffer       = 2048
	traceBatch        = 20
	traceFlush        = 100 * time.Millisecond
	traceDropLogEvery = 1000
)

// WithTrace turns on message tracing to topic (DefaultTraceTopic when
// empty) for a producer or push consumer; a LitePullConsumer or Admin
// refuses it (ErrInvalidOption) rather than trace nothing.
func WithTrace(topic string) Opt {
	return commonOpt(func(c *commonConfig) {
		if topic == "" {
			topic = DefaultTraceTopic
		}
		c.traceTopic = topic
	})
}

// refuseTrace fails the construction of a client that records no traces
// when WithTrace was given.
func refuseTrace(cfg commonConfig, what string) error {
	if cfg.traceTopic != "" {
		return fmt.Errorf("%w: WithTrace: a %s records no message traces (producers and push consumers do)", ErrInvalidOption, what)
	}
	return nil
}

// traceRecord is one encoded record and the lookup keys it adds.
type traceRecord struct {
	topic string // the traced message's topic: records are batched per topic
	data  string
	keys  []string
}

// tracer buffers trace records and sends them in the background.
type tracer struct {
	topic   string
	group   string
	log     *zap.Logger
	ids     *UniqIDGenerator
	p       *Producer
	in      chan traceRecord
	dropped atomic.Int64
	done    chan struct{}
	stop    chan struct{}
	once    sync.Once
}

// startTracer starts the tracer of a client of group, or returns nil when
// tracing is off.
func startTracer(ctx context.Context, cfg commonConfig, group string) (*tracer, error) {
	if cfg.traceTopic == "" {
		return nil, nil
	}
	p, err := NewProducer(innerProducer(cfg), ProducerGroup(traceGroupPrefix+group),
		SendTimeout(5*time.Second), RetryTimesWhenSendFailed(1))
	if err != nil {
		return nil, err
	}
	if err := p.Start(ctx); err != nil {
		return nil, err
	}
	t := &tracer{
		topic: cfg.traceTopic, group: group, log: cfg.log.Named("trace"), ids: NewUniqIDGenerator(cfg.clientIP, cfg.now), p: p,
		in: make(chan traceRecord, traceBuffer), done: make(chan struct{}), stop: make(chan struct{}),
	}
	go t.run()
	return t, nil
}

// add queues r without blocking; a full buffer drops it.
func (t *tracer) add(r traceRecord) {
	select {
	case t.in <- r:
	default:
		if n := t.dropped.Add(1); n%traceDropLogEvery == 1 {
			t.log.Warn("trace buffer full; trace records dropped", zap.Int64("dropped", n))
		}
	}
}

// run batches records per traced topic and sends them until close.
func (t *tracer) run() {
	defer close(t.done)
	tick := time.NewTicker(traceFlush)
	defer tick.Stop()
	pending := map[string][]traceRecord{}
	n := 0
	flush := func() {
		for topic, rs := range pending {
			t.send(rs)
			delete(pending, topic)
		}
		n = 0
	}
	for {
		select {
		case r := <-t.in:
			pending[r.topic] = append(pending[r.topic], r)
			if n++; len(pending[r.topic]) >= traceBatch {
				t.send(pending[r.topic])
				n -= len(pending[r.topic])
				delete(pending, r.topic)
			}
		case <-tick.C:
			if n > 0 {
				flush()
			}
		case <-t.stop:
			for {
				select {
				case r := <-t.in:
					pending[r.topic] = append(pending[r.topic], r)
				default:
					flush()
					return
				}
			}
		}
	}
}

// send sends one trace message holding rs.
func (t *tracer) send(rs []traceRecord) {
	var b strings.Builder
	var keys []string
	seen := map[string]bool{}
	for _, r := range rs {
		b.WriteString(r.data)
		for _, k := range r.keys {
			if k != "" && !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	msg := NewMessage(t.topic, []byte(b.String())).WithKeys(keys...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := t.p.SendSync(ctx, msg); err != nil {
		t.log.Debug("trace data not sent", zap.String("topic", t.topic), zap.Int("records", len(rs)), zap.Error(err))
	}
}

// close sends what is buffered and stops the tracer's producer; ctx bounds
// the wait. Safe on nil.
func (t *tracer) close(ctx context.Context) error {
	if t == nil {
		return nil
	}
	t.once.Do(func() { close(t.stop) })
	select {
	case <-t.done:
	case <-ctx.Done():
	}
	return t.p.Close(ctx)
}

// pub records the Pub trace of a send that started at start
// (SendMessageTraceHookImpl): only a send with a result and a broker that
// has tracing on (TRACE_ON) is traced. Safe on nil.
func (t *tracer) pub(group string, msg *Message, start time.Time, res **SendResult, err *error) {
	if t == nil || msg == nil || *err != nil || *res == nil || !(*res).TraceOn || msg.Topic == t.topic {
		return
	}
	r := *res
	typ := traceMsgNormal
	if msg.DelayLevel > 0 {
		typ = traceMsgDelay
	}
	d := traceData{
		traceTypePub, strconv.FormatInt(start.UnixMilli(), 10), r.RegionID, group, msg.Topic, r.MsgID, javaString(msg.Tags), traceKeys(msg.Keys),
		r.Addr, strconv.Itoa(len(msg.Body)), strconv.FormatInt(time.Since(start).Milliseconds(), 10), strconv.Itoa(typ),
		r.OffsetMsgID, strconv.FormatBool(r.Status == SendOK),
	}
	t.add(traceRecord{topic: msg.Topic, data: d.encode(), keys: append([]string{r.MsgID}, msg.Keys...)})
}

// subTrace is a listener call being traced.
type subTrace struct {
	t         *tracer
	requestID string
	start     time.Time
	msgs      []*MessageExt
}

// subBefore records the SubBefore traces of a listener call and returns
// the handle for SubAfter (ConsumeMessageTraceHookImpl); nil when tracing
// is off. Messages whose TRACE_ON property is "false" are not traced.
func (t *tracer) subBefore(group string, msgs []*MessageExt) *subTrace {
	if t == nil || len(msgs) == 0 {
		return nil
	}
	s := &subTrace{t: t, requestID: t.ids.New(), start: time.Now()}
	ts := strconv.FormatInt(s.start.UnixMilli(), 10)
	for _, m := range msgs {
		if m == nil || m.Properties["TRACE_ON"] == "false" {
			continue
		}
		s.msgs = append(s.msgs, m)
		region := m.Properties["MSG_REGION"]
		if region == "" {
			region = "DefaultRegion"
		}
		d := traceData{traceTypeSubBefore, ts, region, group, s.requestID, m.MsgID, strconv.Itoa(int(m.ReconsumeTimes)), traceKeys(m.Keys)}
		t.add(traceRecord{topic: m.Topic, data: d.encode(), keys: append([]string{m.MsgID}, m.Keys...)})
	}
	if len(s.msgs) == 0 {
		return nil
	}
	return s
}

// after records the SubAfter traces of the call: the cost per message,
// whether it succeeded, and the consume result's code. Safe on nil.
func (s *subTrace) after(group string, success bool) {
	if s == nil {
		return
	}
	cost := time.Since(s.start).Milliseconds() / int64(len(s.msgs))
	code := traceConsumeSuccess
	if !success {
		code = traceConsumeFailed
	}
	ts := strconv.FormatInt(s.start.UnixMilli(), 10)
	for _, m := range s.msgs {
		d := traceData{traceTypeSubAfter, s.requestID, m.MsgID, strconv.FormatInt(cost, 10), strconv.FormatBool(success), traceKeys(m.Keys),
			strconv.Itoa(code), ts, group}
		s.t.add(traceRecord{topic: m.Topic, data: d.encode(), keys: append([]string{m.MsgID}, m.Keys...)})
	}
}

// javaString is how RocketMQ's encoder writes a field copied from a
// message's optional value (tags, keys): a StringBuilder appends a null as
// "null". Trace tools expect it, and RocketMQ's decoder needs it for a
// record's last field: Java's split drops a trailing empty field, and the
// decoder then reads past the end.
func javaString(s string) string {
	if s = stripSplitors(s); s == "" {
		return "null"
	}
	return s
}

// traceKeys renders a message's keys as its KEYS property holds them.
func traceKeys(keys []string) string { return javaString(strings.Join(keys, " ")) }

// traceData is one record's fields in order.
type traceData []string

// encode joins the fields with CONTENT_SPLITOR and ends the record with
// FIELD_SPLITOR (TraceDataEncoder.encoderFromContextBean); separators in
// values are dropped (stripSplitors).
func (d traceData) encode() string {
	var b strings.Builder
	for i, f := range d {
		if i > 0 {
			b.WriteByte(traceContentSplitor)
		}
		b.WriteString(stripSplitors(f))
	}
	b.WriteByte(traceFieldSplitor)
	return b.String()
}

// stripSplitors drops the separators from a field's value: one inside a
// field would shift every field after it for a reader.
func stripSplitors(s string) string {
	if !strings.ContainsAny(s, "\x01\x02") {
		return s
	}
	return strings.NewReplacer("\x01", "", "\x02", "").Replace(s)
}
