package broker

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320)
// (RocketMQ SendMessageProcessor).

// decodeSendHeader reads either header shape. SEND_BATCH_MESSAGE may come
// with either (the official Go client sends 320 with long names).
//
// It is req.DecodeHeader of wire.SendMessageRequestHeader or
// wire.SendMessageRequestHeaderV2 without reflection: the fields' values
// are collected — by map lookups from ExtFields, or in
// one pass over the raw ROCKETMQ ext block of a request the server decoded
// lazily (AsyncOptions.LazyExt: no map is built for it) — then parsed in
// struct order so the first bad field and its *remoting.HeaderError are
// DecodeHeader's (TestDecodeSendHeaderV2Equiv, TestDecodeSendHeaderV1Equiv,
// TestDecodeSendHeaderRaw). It runs on the connection's reader for every
// inline send, where a reflective decode would be a large share of the
// reader's work per request.
func decodeSendHeader(req *remoting.RemotingCommand) (wire.SendMessageRequestHeader, error) {
	v2code := req.Code == remoting.RequestSendMessageV2 || req.Code == remoting.RequestSendBatchMessage
	if req.ExtFields != nil {
		if _, ok := req.ExtFields["b"]; ok && v2code {
			return decodeSendHeaderV2(req.ExtFields)
		}
		return lookupSendHeader(req.ExtFields, &sendHeaderNames)
	}
	var long, short sendHeaderFields
	req.RangeExt(func(k, v string) bool {
		if len(k) == 1 && k[0] >= 'a' && k[0] <= 'n' {
			short.set(int(k[0]-'a'), v)
		} else if i := sendHeaderIndex(k); i >= 0 {
			long.set(i, v)
		}
		return true
	})
	if short.present(1) && v2code {
		return short.decode(&sendHeaderV2Names)
	}
	return long.decode(&sendHeaderNames)
}

// asSendRequest is req under the send code whose header shape it carries:
// SEND_REPLY_MESSAGE has SEND_MESSAGE's header and SEND_REPLY_MESSAGE_V2
// SEND_MESSAGE_V2's. The send codes are returned as they are.
func asSendRequest(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	code := req.Code
	switch code {
	case remoting.RequestSendReplyMessage:
		code = remoting.RequestSendMessage
	case remoting.RequestSendReplyMessageV2:
		code = remoting.RequestSendMessageV2
	default:
		return req
	}
	as := *req
	as.Code = code
	return &as
}

// decodeSendHeaderV2 decodes a…n extFields.
func decodeSendHeaderV2(ext map[string]string) (wire.SendMessageRequestHeader, error) {
	return lookupSendHeader(ext, &sendHeaderV2Names)
}

// lookupSendHeader decodes the fields named names from ext.
func lookupSendHeader(ext map[string]string, names *[14]string) (wire.SendMessageRequestHeader, error) {
	var f sendHeaderFields
	for i, k := range names {
		if v, ok := ext[k]; ok {
			f.set(i, v)
		}
	}
	return f.decode(names)
}

// sendHeaderNames and sendHeaderV2Names are the extFields keys of
// wire.SendMessageRequestHeader's fields in struct order, long
// (SEND_MESSAGE) and short.
var (
	sendHeaderNames = [14]string{"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
		"sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch", "bname"}
	sendHeaderV2Names = [14]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n"}
)

// sendFieldMaxReconsumeTimes is maxReconsumeTimes' index in the names.
const sendFieldMaxReconsumeTimes = 11

// sendHeaderHas reports whether a send request's header carries field i
// (struct order), under the names of the shape decodeSendHeader reads:
// Java's nullable fields (maxReconsumeTimes) mean something when present.
func sendHeaderHas(req *remoting.RemotingCommand, i int) bool {
	names := &sendHeaderNames
	if _, ok := req.ExtValue(sendHeaderV2Names[1]); ok &&
		(req.Code == remoting.RequestSendMessageV2 || req.Code == remoting.RequestSendBatchMessage) {
		names = &sendHeaderV2Names
	}
	_, ok := req.ExtValue(names[i])
	return ok
}

// sendHeaderIndex is the field index of a long extFields name, -1 if none.
// Only ROCKETMQ-serialized SEND_MESSAGE headers with long names come here
// (our SDK sends the short V2 names, official clients JSON), so a scan
// of the 14 names is enough.
func sendHeaderIndex(k string) int { return slices.Index(sendHeaderNames[:], k) }

// sendHeaderFields holds the values of wire.SendMessageRequestHeader's
// fields by index (struct order); has marks the ones present (the last of a repeated key
// wins, as in a map).
type sendHeaderFields struct {
	v   [14]string
	has uint16
	err error
}

func (f *sendHeaderFields) set(i int, v string) { f.v[i], f.has = v, f.has|1<<i }

func (f *sendHeaderFields) present(i int) bool { return f.has&(1<<i) != 0 }

// decode parses the fields in struct order; names gives the keys errors
// name. After the first error every read returns the zero value.
func (f *sendHeaderFields) decode(names *[14]string) (wire.SendMessageRequestHeader, error) {
	var h wire.SendMessageRequestHeader
	h.ProducerGroup = f.str(names, 0, true)
	h.Topic = f.str(names, 1, true)
	h.DefaultTopic = f.str(names, 2, true)
	h.DefaultTopicQueueNums = int32(f.num(names, 3, true, 32))
	h.QueueID = int32(f.num(names, 4, true, 32))
	h.SysFlag = int32(f.num(names, 5, true, 32))
	h.BornTimestamp = f.num(names, 6, true, 64)
	h.Flag = int32(f.num(names, 7, true, 32))
	h.Properties = f.str(names, 8, false)
	h.ReconsumeTimes = int32(f.num(names, 9, false, 32))
	h.UnitMode = f.boolean(names, 10)
	h.MaxReconsumeTimes = int32(f.num(names, 11, false, 32))
	h.Batch = f.boolean(names, 12)
	h.BrokerName = f.str(names, 13, false)
	if f.err != nil {
		return wire.SendMessageRequestHeader{}, f.err
	}
	return h, nil
}

func (f *sendHeaderFields) str(names *[14]string, i int, required bool) string {
	if f.err != nil {
		return ""
	}
	if !f.present(i) && required {
		f.err = &remoting.HeaderError{Field: names[i], Reason: "required field missing"}
	}
	return f.v[i]
}

func (f *sendHeaderFields) num(names *[14]string, i int, required bool, bits int) int64 {
	if f.err != nil {
		return 0
	}
	if !f.present(i) {
		if required {
			f.err = &remoting.HeaderError{Field: names[i], Reason: "required field missing"}
		}
		return 0
	}
	v := f.v[i]
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		n, err = strconv.ParseInt(strings.TrimSpace(v), 10, bits)
	}
	if err != nil {
		f.err = &remoting.HeaderError{Field: names[i], Value: v, Reason: "not an int" + strconv.Itoa(bits)}
		return 0
	}
	return n
}

func (f *sendHeaderFields) boolean(names *[14]string, i int) bool {
	if f.err != nil || !f.present(i) {
		return false
	}
	v := f.v[i]
	switch v { // strconv.ParseBool's words, without lower-casing them first
	case "true", "false":
		return v == "true"
	}
	b, err := strconv.ParseBool(strings.ToLower(v))
	if err != nil {
		f.err = &remoting.HeaderError{Field: names[i], Value: v, Reason: "not a bool"}
		return false
	}
	return b
}

// Name and size limits.
const (
	// maxPropertiesLength is the int16 properties length of the format.
	maxPropertiesLength = 32767
)

// checkTopic validates a topic name; nil means fine.
func checkTopic(topic string) *remoting.RemotingCommand {
	switch {
	case topic == "":
		return response(remoting.ResponseInvalidParameter, "the topic is empty")
	case len(topic) > wire.MaxTopicLength:
		return response(remoting.ResponseInvalidParameter, "the topic %q is %d bytes, longer than %d", topic[:32]+"…", len(topic), wire.MaxTopicLength)
	case !wire.ValidName(topic):
		return response(remoting.ResponseInvalidParameter,
			"the topic %q contains illegal characters; allowed are letters, digits, '%%', '-', '_' and '|'", topic)
	}
	return nil
}

// checkGroup validates a consumer or producer group name; nil means fine.
func checkGroup(group string) *remoting.RemotingCommand {
	switch {
	case group == "":
		return response(remoting.ResponseInvalidParameter, "the group name is empty")
	case len(group) > wire.MaxGroupLength:
		return response(remoting.ResponseInvalidParameter, "the group name is %d bytes, longer than %d", len(group), wire.MaxGroupLength)
	case !wire.ValidName(group):
		return response(remoting.ResponseInvalidParameter,
			"the group %q contains illegal characters; allowed are letters, digits, '%%', '-', '_' and '|'", group)
	}
	return nil
}

func isSystemTopic(t string) bool {
	return t == wire.TopicAutoCreate || t == wire.TopicSchedule || t == wire.TopicTimer ||
		t == wire.TopicTransHalf || t == wire.TopicTransOpHalf
}

// processSend is the synchronous send processor: the worker waits for the
// Raft entry. Used when the Replica has no AsyncPutter.
func (c *Controller) processSend(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	msgs, resp := c.prepareSend(ctx, conn, req, false)
	if resp != nil {
		return resp, nil
	}
	wctx, cancel := c.writeCtx(ctx)
	defer cancel()
	results, err := c.rep.PutMessages(wctx, msgs)
	return c.sendResult(msgs, results, err), nil
}

// processSendAsync is the send processor of the asynchronous path
// (RocketMQ's asyncProcessRequest + CompletableFuture): the worker checks
// and decodes the request, hands the messages to the batcher and goes back
// to its pool; the goroutine that completes the Raft entry answers every
// request of the entry straight into their connections' write queues.
// Leadership-transfer waits and not-leader answers are the batcher's, as
// on the synchronous path.
func (c *Controller) processSendAsync(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand, r *remoting.Responder) (*remoting.RemotingCommand, error) {
	return c.sendAsync(ctx, conn, req, r)
}

// responder is what the send path needs of a *remoting.Responder; the
// send-path benchmarks answer into a frame encoder instead.
type responder interface {
	Respond(*remoting.RemotingCommand) bool
}

// sendAsync is processSendAsync with the answer going to r.
func (c *Controller) sendAsync(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand, r responder) (*remoting.RemotingCommand, error) {
	ap, ok := c.rep.(AsyncPutter)
	if !ok {
		return c.processSend(ctx, conn, req)
	}
	msgs, resp := c.prepareSend(ctx, conn, req, true)
	if resp != nil {
		return resp, nil
	}
	// ctx (the connection's) bounds only the hand-off to the batcher; the
	// server's pending bound keeps the batcher's queue from filling.
	ap.PutMessagesAsync(ctx, msgs, func(results []PutResult, err error) {
		r.Respond(c.sendResult(msgs, results, err))
	})
	return nil, nil
}

// sendInline picks the sends that may run on the connection's reader: the
// ones whose handling cannot wait for a Raft round trip of its own — the
// topic exists (no auto-create), it is no retry topic (DLQ redirection may
// create topics), no delay level is set (SCHEDULE_TOPIC_XXXX may need
// creating) and it is no half (TRAN_MSG: RMQ_SYS_TRANS_HALF_TOPIC may need
// creating; a half marked by its sysflag alone creates it on the reader
// the first time). The rest go to the send pool. A follower's sends are
// answered not-leader at once, so they qualify too.
func (c *Controller) sendInline(req *remoting.RemotingCommand) bool {
	if _, ok := c.rep.(AsyncPutter); !ok {
		return false
	}
	var topic, props string
	if req.ExtFields != nil {
		topic, props = req.ExtFields["topic"], req.ExtFields["properties"]
		if t, ok := req.ExtFields["b"]; ok {
			topic, props = t, req.ExtFields["i"]
		}
	} else { // raw extFields (LazyExt): one pass, the last of a repeated key wins
		var long, short [2]string
		v2 := false
		req.RangeExt(func(k, v string) bool {
			switch k {
			case "b":
				short[0], v2 = v, true
			case "i":
				short[1] = v
			case "topic":
				long[0] = v
			case "properties":
				long[1] = v
			}
			return true
		})
		topic, props = long[0], long[1]
		if v2 {
			topic, props = short[0], short[1]
		}
	}
	if strings.HasPrefix(topic, wire.RetryGroupTopicPrefix) || strings.Contains(props, wire.PropertyDelayTimeLevel) || hasTimerProperty(props) ||
		strings.Contains(props, wire.PropertyTransactionPrep) { // a half may create RMQ_SYS_TRANS_HALF_TOPIC
		return false
	}
	_, ok := c.rep.State().Topic(topic)
	return ok
}

// sendResult is the answer to a send once its messages were replicated.
func (c *Controller) sendResult(msgs []*store.Message, results []PutResult, err error) *remoting.RemotingCommand {
	if err != nil {
		return c.writeError("send", err)
	}
	for i, r := range results {
		// A sequence below its stream's dedup window: an old retry of a
		// stored message, or a first send that came after more than a
		// window of later ones (retries reordered by a failover). Nothing
		// was stored, and SEND_OK could acknowledge a message no queue
		// holds.
		if r.Duplicate && r.QueueOffset < 0 {
			return response(remoting.ResponseSystemError, "send: message %d's idempotence sequence is older than its queue's "+
				"dedup window (raftDedupWindow): whether it was stored before cannot be told, and it was not stored now; "+
				"send it again as a new message if it must be delivered", i)
		}
	}
	c.countPut(msgs)
	return sendResponse(results)
}

// prepareSend checks a send request and decodes its messages; a non-nil
// response is the request's answer (bad header, not leader, bad topic,
// …) and nothing is to be written. direct lets plain messages carry their
// properties as store.Message.EncodedProperties (see newMessage); only
// the AsyncPutter path's encoder (wire.AppendMessage) reads that.
func (c *Controller) prepareSend(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand, direct bool) ([]*store.Message, *remoting.RemotingCommand) {
	h, err := decodeSendHeader(req)
	if err != nil {
		return nil, headerError(req, err)
	}
	if !c.rep.IsLeader() {
		return nil, c.notLeader()
	}
	if r := checkTopic(h.Topic); r != nil {
		return nil, r
	}
	if wire.SendForbidden(h.Topic) { // raftmq's own topics and the rest of TopicValidator.isNotAllowedSendTopic's
		return nil, response(remoting.ResponseNoPermission, "sending to the system topic %s is not allowed", h.Topic)
	}
	if len(h.Properties) > maxPropertiesLength {
		return nil, response(remoting.ResponseMessageIllegal, "the properties are %d bytes, above %d", len(h.Properties), maxPropertiesLength)
	}
	if r := refuseMultiDispatch(h.Properties); r != nil {
		return nil, r
	}
	half := isTransactionHalf(&h)
	if !half && h.SysFlag&wire.SysFlagTransMask == wire.SysFlagTransRollback {
		// The ConsumeQueue dispatch skips a rolled-back transaction
		// message (RocketMQ's too): it would be acknowledged and never
		// delivered.
		return nil, response(remoting.ResponseMessageIllegal,
			"sysFlag %#x marks a rolled-back transaction message, which is never delivered; send it without the transaction bits", h.SysFlag)
	}
	if req.Code == remoting.RequestSendBatchMessage || h.Batch {
		// RocketMQ's asyncPutMessages refuses a batch with any transaction
		// type, or a delay level in its header.
		switch {
		case half:
			return nil, response(remoting.ResponseMessageIllegal, "transactional (half) messages cannot be sent in a batch")
		case h.SysFlag&wire.SysFlagTransMask != 0:
			return nil, response(remoting.ResponseMessageIllegal, "a batch cannot carry a transaction type (sysFlag %#x)", h.SysFlag)
		case strings.Contains(h.Properties, wire.PropertyDelayTimeLevel):
			if d := wire.ParseProperties(h.Properties)[wire.PropertyDelayTimeLevel]; d != "" && d != "0" {
				return nil, response(remoting.ResponseMessageIllegal, "a batch cannot carry a delay level (%s=%s in its header)",
					wire.PropertyDelayTimeLevel, d)
			}
		}
	}
	if group, ok := strings.CutPrefix(h.Topic, wire.RetryGroupTopicPrefix); ok {
		// RocketMQ's handleRetryAndDLQ: a message a consumer sends back
		// itself needs its group; checked before the retry topic is made.
		if r := c.uncreatedGroup(group); r != nil {
			return nil, r
		}
	}
	tc, resp := c.sendTopicConfig(ctx, &h)
	if resp != nil {
		return nil, resp
	}
	if tc.Perm&wire.PermWrite == 0 {
		return nil, response(remoting.ResponseNoPermission, "the topic %s is not writable on broker %s", h.Topic, c.cfg.BrokerName)
	}
	// Counts bounded by queueCount: a topic stored by an older version may
	// claim no write queue (a random pick would panic) or up to 2^31 (a
	// ConsumeQueue for each).
	queueID := h.QueueID
	if queueID < 0 {
		n := queueCount(tc.WriteQueueNums)
		if n == 0 {
			return nil, response(remoting.ResponseSystemError, "topic %s has no write queues on broker %s (writeQueueNums %d); update it with updateTopic",
				h.Topic, c.cfg.BrokerName, tc.WriteQueueNums)
		}
		queueID = rand.Int32N(int32(n))
	}
	if int(queueID) >= queueCount(max(tc.WriteQueueNums, tc.ReadQueueNums)) {
		return nil, response(remoting.ResponseSystemError, "request queueId[%d] is illegal: topic %s has %d write queues on broker %s",
			h.QueueID, h.Topic, tc.WriteQueueNums, c.cfg.BrokerName)
	}

	var msgs []*store.Message
	if req.Code == remoting.RequestSendBatchMessage || h.Batch {
		if msgs, resp = c.decodeBatch(req.Body, &h, queueID, conn, direct); resp != nil {
			return nil, resp
		}
	} else {
		if len(req.Body) > c.live().Store.MaxMessageSize {
			return nil, response(remoting.ResponseMessageIllegal, "the message body is %d bytes, above maxMessageSize %d",
				len(req.Body), c.live().Store.MaxMessageSize)
		}
		one := &singleSend{}
		m := &one.m
		c.initMessage(m, &h, queueID, conn, req.Body, h.Properties, direct && !half)
		one.msgs[0] = m
		msgs = one.msgs[:]
		if strings.HasPrefix(h.Topic, wire.RetryGroupTopicPrefix) {
			if r := c.handleRetryTopicSend(ctx, m, &h, sendHeaderHas(req, sendFieldMaxReconsumeTimes)); r != nil {
				return nil, r
			}
		}
		// A half keeps its DELAY and timer properties: the commit applies
		// them (RocketMQ delays a committed message, never a half).
		if half {
			if r := c.toHalf(ctx, m, h.ProducerGroup); r != nil {
				return nil, r
			}
		} else {
			if r := c.applyDelay(ctx, m); r != nil {
				return nil, r
			}
			if r := c.applyTimer(ctx, m); r != nil {
				return nil, r
			}
		}
	}
	return msgs, nil
}

// refuseMultiDispatch refuses a message that asks to be dispatched to
// light message queues too (RocketMQ's INNER_MULTI_DISPATCH, acted on
// under enableMultiDispatch): raftmq has no LMQ, so acknowledged it would
// reach its topic and none of the queues it names. nil means fine.
func refuseMultiDispatch(props string) *remoting.RemotingCommand {
	if !strings.Contains(props, wire.PropertyInnerMultiDispatch) {
		return nil
	}
	v, ok := wire.ParseProperties(props)[wire.PropertyInnerMultiDispatch]
	if !ok {
		return nil
	}
	return response(remoting.ResponseMessageIllegal,
		"the message asks for dispatch to light message queues (%s=%s): LMQ and multi-dispatch are not supported by raftmq",
		wire.PropertyInnerMultiDispatch, v)
}

// isTransactionHalf reports whether a send carries a transaction's half
// message: the prepared sysflag (what RocketMQ clients set) or the
// TRAN_MSG property set to true (what RocketMQ's broker checks).
func isTransactionHalf(h *wire.SendMessageRequestHeader) bool {
	if h.SysFlag&wire.SysFlagTransMask == wire.SysFlagTransPrepared {
		return true
	}
	if !strings.Contains(h.Properties, wire.PropertyTransactionPrep) {
		return false
	}
	return strings.EqualFold(wire.ParseProperties(h.Properties)[wire.PropertyTransactionPrep], "true")
}

// sendResponse renders the SendMessageResponseHeader: msgId (comma-joined
// for a batch), queueId, queueOffset, and the region/trace fields the Go
// client reads. The fields are written straight into the response frame
// (sendAnswer), not through an ExtFields map.
func sendResponse(results []PutResult) *remoting.RemotingCommand {
	a := &sendAnswer{cmd: *success()}
	switch len(results) {
	case 0:
	case 1:
		a.msgID = results[0].MsgID
	default:
		var b strings.Builder
		b.Grow(len(results) * (len(results[0].MsgID) + 1))
		for i, pr := range results {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(pr.MsgID)
		}
		a.msgID = b.String()
	}
	if len(results) > 0 {
		a.queueID, a.queueOffset = results[0].QueueID, results[0].QueueOffset
	}
	a.cmd.ExtAppender = a
	return &a.cmd
}

// sendAnswer is a send's response command and its header fields in one
// allocation; it writes the fields in the order an ExtFields map of them
// is encoded (sorted keys), so the frame is byte for byte what the map
// gave (TestSendResponseFrame).
type sendAnswer struct {
	cmd         remoting.RemotingCommand
	msgID       string
	queueID     int32
	queueOffset int64
}

// AppendExt implements remoting.ExtAppender.
func (a *sendAnswer) AppendExt(w *remoting.ExtWriter) {
	w.String("MSG_REGION", "DefaultRegion")
	w.String("TRACE_ON", "true")
	w.String("msgId", a.msgID)
	w.Int("queueId", int64(a.queueID))
	w.Int("queueOffset", a.queueOffset)
}

// sendTopicConfig finds the topic, auto-creating it (through Raft) when
// allowed: autoCreateTopicEnable, a retry topic, which RocketMQ always
// creates on demand, or a routed system topic (reply.go).
func (c *Controller) sendTopicConfig(ctx context.Context, h *wire.SendMessageRequestHeader) (wire.TopicConfig, *remoting.RemotingCommand) {
	if tc, ok := c.rep.State().Topic(h.Topic); ok {
		return tc, nil
	}
	switch {
	case strings.HasPrefix(h.Topic, wire.RetryGroupTopicPrefix):
		return c.autoCreateTopic(ctx, h.Topic, 1)
	case c.routedSystemTopic(h.Topic):
		tc, err := c.ensureTopic(ctx, h.Topic, 1, 0, true)
		if err != nil {
			return tc, c.writeError("create topic "+h.Topic, err)
		}
		return tc, nil
	case !c.live().AutoCreateTopicEnable:
		return wire.TopicConfig{}, response(remoting.ResponseTopicNotExist,
			"topic %s does not exist on broker %s and autoCreateTopicEnable is off; create it with updateTopic", h.Topic, c.cfg.BrokerName)
	}
	n := c.live().DefaultTopicQueueNums
	if h.DefaultTopicQueueNums > 0 && int(h.DefaultTopicQueueNums) < n {
		n = int(h.DefaultTopicQueueNums)
	}
	return c.autoCreateTopic(ctx, h.Topic, n)
}

// queueCount is a stored queue count bounded to 0..maxQueueNums, for the
// loops and allocations sized by it: a topic stored by an older version
// (or a retry topic created from an unchecked retryQueueNums) may claim
// up to 2^31 queues.
func queueCount(n int) int { return min(max(n, 0), maxQueueNums) }

// ensureTopic returns the topic's config, creating it with queueNums
// read/write queues (clamped to 1..maxQueueNums) through Raft if it is
// missing (broker-plan decision 8: the topic entry is committed before any
// message for it is proposed) and registering it with the name servers.
// routed: a client is about to look the topic up (a send's topic, a retry
// or dead-letter topic), so the answer waits for the registration;
// otherwise (the broker's own delivery loops) it only starts one.
func (c *Controller) ensureTopic(ctx context.Context, topic string, queueNums, sysFlag int, routed bool) (wire.TopicConfig, error) {
	if tc, ok := c.rep.State().Topic(topic); ok {
		return tc, nil
	}
	queueNums = max(queueCount(queueNums), 1)
	tc := wire.TopicConfig{TopicName: topic, ReadQueueNums: queueNums, WriteQueueNums: queueNums,
		Perm: wire.PermRead | wire.PermWrite, TopicFilterType: "SINGLE_TAG", TopicSysFlag: sysFlag}
	wctx, cancel := c.writeCtx(ctx)
	defer cancel()
	if err := c.rep.UpdateTopic(wctx, tc); err != nil {
		return tc, err
	}
	// RocketMQ registers a topic it created for a send before answering
	// (createTopicInSendMessageMethod), so a client that subscribes right
	// after the send finds its route.
	if routed {
		c.registerTopicChange(ctx)
	} else {
		c.reg.trigger()
	}
	if got, ok := c.rep.State().Topic(topic); ok {
		return got, nil
	}
	return tc, nil
}

// singleSend is the message of a single send and the one-element slice
// handed to the Replica, allocated together (one allocation per request on
// the connection's reader instead of two).
type singleSend struct {
	m    store.Message
	msgs [1]*store.Message
}

// initMessage fills m, the stored message of a send, from the header and
// the wire properties. With direct, a message whose properties nothing on
// the send path reads or rewrites keeps them as EncodedProperties, built
// straight from the wire string (wire.CanonicalProperties: no map, and
// no copy when the client sent them sorted); the rest get the Properties
// map the retry, delay and idempotence code reads.
func (c *Controller) initMessage(m *store.Message, h *wire.SendMessageRequestHeader, queueID int32, conn *remoting.Conn, body []byte, props string, direct bool) {
	*m = store.Message{
		Topic: h.Topic, QueueID: queueID, Flag: h.Flag, Body: body,
		SysFlag: h.SysFlag &^ (wire.SysFlagBornHostV6 | wire.SysFlagStoreHostV6), BornTimestamp: h.BornTimestamp,
		BornHost: bornHost(conn), StoreHost: c.storeHost, ReconsumeTimes: h.ReconsumeTimes,
	}
	retry := strings.HasPrefix(h.Topic, wire.RetryGroupTopicPrefix)
	if direct && !retry && !needsPropertyMap(props) {
		m.EncodedProperties = wire.CanonicalProperties(props)
		return
	}
	m.Properties = wire.ParseProperties(props)
	sealProducerID(m.Properties)
	c.stampRequest(m.Properties, conn)
	if h.MaxReconsumeTimes > 0 && retry {
		m.Properties[wire.PropertyMaxReconsumeTimes] = strconv.Itoa(int(h.MaxReconsumeTimes))
	}
}

// needsPropertyMap reports whether a properties string may hold a property
// that code after the send processor reads from store.Message.Properties:
// DELAY (applyDelay), the idempotent producer's id (Group.encodeRequest's
// dedup keys) and WAIT=false (MessageStore.PutMessages). A substring test:
// a false positive only costs the map.
func needsPropertyMap(props string) bool {
	return strings.Contains(props, wire.PropertyDelayTimeLevel+"\x01") || strings.Contains(props, wire.PropertyProducerID+"\x01") ||
		strings.Contains(props, wire.PropertyWaitStoreMsgOK+"\x01false") || hasTimerProperty(props) || isRequestMessage(props)
}

// bornHost is the producer's address as seen on the connection.
func bornHost(conn *remoting.Conn) netip.AddrPort {
	if conn != nil {
		if ap := conn.RemoteAddrPort(); ap.IsValid() {
			return ap
		}
	}
	return netip.AddrPortFrom(netip.IPv4Unspecified(), 0)
}

// decodeBatch splits a SEND_BATCH_MESSAGE body into messages of the
// header's topic and queue.
func (c *Controller) decodeBatch(body []byte, h *wire.SendMessageRequestHeader, queueID int32, conn *remoting.Conn, direct bool) ([]*store.Message, *remoting.RemotingCommand) {
	if len(body) > c.live().Store.MaxMessageSize {
		return nil, response(remoting.ResponseMessageIllegal, "the batch body is %d bytes, above maxMessageSize %d",
			len(body), c.live().Store.MaxMessageSize)
	}
	if strings.HasPrefix(h.Topic, wire.RetryGroupTopicPrefix) {
		return nil, response(remoting.ResponseMessageIllegal, "batch messages cannot be sent to a retry topic (%s)", h.Topic)
	}
	entries, err := wire.DecodeBatch(body)
	if err != nil {
		return nil, response(remoting.ResponseMessageIllegal, "malformed batch body: %v", err)
	}
	if len(entries) == 0 {
		return nil, response(remoting.ResponseMessageIllegal, "the batch is empty")
	}
	if limit := c.live().MaxBatchMessages; len(entries) > limit {
		return nil, c.refuse("maxBatchMessages", remoting.ResponseMessageIllegal,
			"the batch holds %d messages, above maxBatchMessages %d", len(entries), limit)
	}
	msgs := make([]*store.Message, len(entries))
	stored := make([]store.Message, len(entries))
	for i, e := range entries {
		m := &stored[i]
		c.initMessage(m, h, queueID, conn, e.Body, e.Properties, direct)
		if d := m.Property(wire.PropertyDelayTimeLevel); d != "" && d != "0" {
			return nil, response(remoting.ResponseMessageIllegal, "batch messages cannot carry a delay level")
		}
		if r := c.refuseBatchTimer(m); r != nil {
			return nil, r
		}
		if r := refuseMultiDispatch(e.Properties); r != nil {
			return nil, r
		}
		m.Flag = e.Flag
		msgs[i] = m
	}
	return msgs, nil
}

// countPut feeds the put counters and clears the disk-full flag.
func (c *Controller) countPut(msgs []*store.Message) {
	n := 0
	for _, m := range msgs {
		n += len(m.Body)
	}
	c.metrics.putMsgs.Add(float64(len(msgs)))
	c.metrics.putBytes.Add(float64(n))
	if len(msgs) > 0 {
		c.metrics.traffic.countPut(msgs[0].Topic, len(msgs), n) // a request's messages share one topic
	}
	c.metrics.diskFull.Store(false)
	c.stats.putAll(msgs)
}
