package client

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// sendRequest is one message (or batch) ready to go: validated, with its
// UNIQ_KEY, its body compressed if it had to be.
type sendRequest struct {
	topic    string
	msg      *Message   // single message; nil for a batch
	batch    []*Message // batch messages
	uniqIDs  []string
	body     []byte // single: possibly compressed body
	sysFlag  int32
	selector MessageQueueSelector
	oneway   bool
	uniq1    [1]string // uniqIDs' storage for a single message

	// Per-attempt request storage, rebuilt by encode: the command, its
	// header (written into the frame by AppendExt) and the single
	// message's wire properties. The command is only read while the
	// attempt encodes it, so one per send is enough.
	cmd      remoting.RemotingCommand
	hdr      wire.SendMessageRequestHeaderV2
	props    []byte
	propsBuf [192]byte // props' first storage: UNIQ_KEY, tags, keys fit
}

// prepare validates msg for a plain send and fixes what every attempt
// shares.
func (p *Producer) prepare(msg *Message) (*sendRequest, error) {
	if msg != nil && msg.half() {
		return nil, errHalfOutsideTransaction(msg)
	}
	return p.prepareMsg(msg)
}

// prepareMsg is prepare without the plain send's checks, for the
// transaction producer's half message.
func (p *Producer) prepareMsg(msg *Message) (*sendRequest, error) {
	if err := msg.validate(p.cfg.maxMessageSize); err != nil {
		return nil, err
	}
	r := sendRequestPool.Get().(*sendRequest)
	r.topic, r.msg, r.body = msg.Topic, msg, msg.Body
	r.uniq1[0] = p.uniqID(msg)
	r.uniqIDs = r.uniq1[:]
	if p.cfg.compressOver > 0 && len(msg.Body) > p.cfg.compressOver {
		var buf bytes.Buffer
		zw, err := zlib.NewWriterLevel(&buf, p.cfg.compressLevel)
		if err != nil {
			return nil, fmt.Errorf("client: compress body: %w", err)
		}
		_, _ = zw.Write(msg.Body)
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("client: compress body: %w", err)
		}
		r.body = buf.Bytes()
		r.sysFlag |= wire.SysFlagCompressed
	}
	return r, nil
}

// uniqID is the UNIQ_KEY m is sent with: the one it carries, as RocketMQ's
// clients keep it (MessageClientIDSetter.setUniqID), so that a message
// forwarded or sent again by its caller keeps its id; else a new one.
func (p *Producer) uniqID(m *Message) string {
	if id := m.Properties[wire.PropertyUniqKey]; id != "" {
		return id
	}
	return p.ids.newAt(p.cfg.common.now())
}

// sendRequestPool recycles the requests of plain SendSync and SendAsync
// calls (sendOne): a request (command, header and properties storage) is
// ~800 bytes, and nothing refers to it once the send returned (the frame
// was encoded into the connection's buffer, results copy strings out).
// Auto-batched requests, which the accumulator may still hold, and the
// other send kinds are left to the collector.
var sendRequestPool = sync.Pool{New: func() any { return new(sendRequest) }}

// recycle returns r to sendRequestPool; r must not be used afterwards.
func (r *sendRequest) recycle() {
	*r = sendRequest{}
	sendRequestPool.Put(r)
}

// prepareBatch validates a batch (MessageBatch.generateFromList rules).
func (p *Producer) prepareBatch(msgs []*Message) (*sendRequest, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: empty batch", ErrInvalidMessage)
	}
	r := &sendRequest{batch: msgs}
	total := 0
	for i, m := range msgs {
		if err := m.validate(p.cfg.maxMessageSize); err != nil {
			return nil, fmt.Errorf("batch message %d: %w", i, err)
		}
		if i == 0 {
			r.topic = m.Topic // read once validate ruled out a nil message
		}
		if m.half() {
			return nil, fmt.Errorf("batch message %d: %w", i, errHalfOutsideTransaction(m))
		}
		if m.Topic != r.topic {
			return nil, fmt.Errorf("%w: batch message %d is for topic %q, the batch for %q; a batch has one topic", ErrInvalidMessage, i, m.Topic, r.topic)
		}
		if m.delayed() || m.timer() {
			return nil, fmt.Errorf("%w: batch message %d is delayed; batches cannot hold delayed or timer messages, send it alone", ErrInvalidMessage, i)
		}
		if strings.HasPrefix(m.Topic, wire.RetryGroupTopicPrefix) {
			return nil, fmt.Errorf("%w: batches cannot be sent to retry topics", ErrInvalidMessage)
		}
		total += len(m.Body)
		r.uniqIDs = append(r.uniqIDs, p.uniqID(m))
	}
	if total > p.cfg.maxMessageSize {
		return nil, fmt.Errorf("%w: batch bodies total %d bytes, above the limit %d", ErrInvalidMessage, total, p.cfg.maxMessageSize)
	}
	return r, nil
}

// encode builds the request for one attempt at mq, in r's own storage
// (valid until the next encode of r). extra holds the idempotence
// property pairs per message (nil when off).
func (p *Producer) encode(r *sendRequest, mq MessageQueue, extra [][]string, now time.Time) (*remoting.RemotingCommand, error) {
	h := &r.hdr
	*h = wire.SendMessageRequestHeaderV2{
		ProducerGroup:         p.cfg.group,
		Topic:                 r.topic,
		DefaultTopic:          wire.TopicAutoCreate,
		DefaultTopicQueueNums: int32(p.cfg.defaultTopicQueueNums),
		QueueID:               int32(mq.QueueID),
		SysFlag:               r.sysFlag,
		BornTimestamp:         now.UnixMilli(),
		BrokerName:            mq.BrokerName,
	}
	r.cmd = remoting.RemotingCommand{
		Language:      remoting.LanguageGo,
		Version:       remoting.DefaultVersion,
		Opaque:        remoting.NextOpaque(),
		SerializeType: p.cfg.serializeType,
		ExtAppender:   h,
		// The answer is read by decodeSendResponse and ExtValue.
		LazyResponseExt: true,
	}
	if r.msg != nil {
		h.Flag = r.msg.Flag
		if strings.HasPrefix(r.topic, wire.RetryGroupTopicPrefix) {
			// A consumer's send-back fallback: the counts travel in the
			// header (sendKernelImpl reads them from these properties).
			reconsume, _ := strconv.Atoi(r.msg.Properties[wire.PropertyReconsumeTime])
			h.ReconsumeTimes = int32(reconsume)
			if v, ok := r.msg.Properties[wire.PropertyMaxReconsumeTimes]; ok {
				maxReconsume, _ := strconv.Atoi(v)
				h.MaxReconsumeTimes, h.MaxReconsumeTimesSet = int32(maxReconsume), true
			}
		}
		if r.props == nil {
			r.props = r.propsBuf[:0]
		}
		if extra != nil {
			kv := append([]string{wire.PropertyUniqKey, r.uniqIDs[0]}, extra[0]...)
			r.props = r.msg.appendWireProperties(r.props[:0], kv...)
		} else {
			r.props = r.msg.appendWireProperties(r.props[:0], wire.PropertyUniqKey, r.uniqIDs[0])
		}
		if len(r.props) > maxPropertiesLength {
			return nil, fmt.Errorf("%w: properties are %d bytes, above %d", ErrInvalidMessage, len(r.props), maxPropertiesLength)
		}
		h.PropertiesRaw = r.props
		r.cmd.Code = sendCode(r.msg)
		r.cmd.Body = r.body
		return &r.cmd, nil
	}
	entries := make([]wire.BatchEntry, len(r.batch))
	for i, m := range r.batch {
		kv := []string{wire.PropertyUniqKey, r.uniqIDs[i]}
		if extra != nil {
			kv = append(kv, extra[i]...)
		}
		e := wire.BatchEntry{Flag: m.Flag, Body: m.Body, Properties: string(m.appendWireProperties(make([]byte, 0, 128), kv...))}
		if len(e.Properties) > maxPropertiesLength {
			return nil, fmt.Errorf("%w: properties are %d bytes, above %d", ErrInvalidMessage, len(e.Properties), maxPropertiesLength)
		}
		entries[i] = e
	}
	body, err := wire.EncodeBatch(entries)
	if err != nil {
		return nil, err
	}
	h.Batch = true
	h.Properties = wire.EncodeProperties(map[string]string{wire.PropertyWaitStoreMsgOK: "true"})
	r.cmd.Code = remoting.RequestSendBatchMessage
	r.cmd.Body = body
	return &r.cmd, nil
}

// noLeaderBackoff is how long a member that answered "not leader" without
// naming one is avoided: an election is under way and usually ends within
// a few hundred milliseconds.
const noLeaderBackoff = 200 * time.Millisecond

// electionPoll is how often a send asks a member again while its group
// elects a leader (the member names none, or names one that cannot be
// reached). Sends wait out an election within their context instead of
// failing in a few milliseconds: a Raft election takes a few hundred.
const electionPoll = 20 * time.Millisecond

// waitElection pauses for electionPoll; false when ctx ends first.
func waitElection(ctx context.Context) bool {
	t := time.NewTimer(electionPoll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// sendDeadline bounds one send: its caller's context and, when that has
// no deadline, SendTimeout from the start. The context carrying that
// bound is built only when a rarer path needs one (a route fetch, an
// election wait, the last attempt, a oneway send): the usual first attempt
// derives its context from the caller's directly, one context per send
// instead of two (a context with a deadline is five allocations).
type sendDeadline struct {
	caller context.Context
	dl     time.Time // the send's deadline
	own    bool      // dl is SendTimeout's, not the caller's
	ctx    context.Context
	cancel context.CancelFunc
}

func (p *Producer) newSendDeadline(ctx context.Context) sendDeadline {
	if dl, ok := ctx.Deadline(); ok {
		return sendDeadline{caller: ctx, dl: dl}
	}
	return sendDeadline{caller: ctx, dl: time.Now().Add(p.cfg.sendTimeout), own: true}
}

// context returns a context that ends with the send.
func (d *sendDeadline) context() context.Context {
	if !d.own {
		return d.caller
	}
	if d.ctx == nil {
		d.ctx, d.cancel = context.WithDeadline(d.caller, d.dl)
	}
	return d.ctx
}

// release frees the context built by context, if any.
func (d *sendDeadline) release() {
	if d.cancel != nil {
		d.cancel()
	}
}

// err is the send context's error, without building it.
func (d *sendDeadline) err() error {
	if err := d.caller.Err(); err != nil {
		return err
	}
	if d.own && !time.Now().Before(d.dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// attempt is the deadline of one request: AttemptTimeout from now when
// more attempts may follow (sendMsgMaxTimeoutPerRequest), whatever is
// left of the send for the last one. It is a value, not a context: the
// remoting client waits for it with a pooled timer.
func (d *sendDeadline) attempt(now time.Time, attemptTimeout time.Duration, last bool) time.Time {
	dl := d.dl
	if attemptTimeout > 0 && !last {
		if a := now.Add(attemptTimeout); a.Before(dl) {
			dl = a
		}
	}
	return dl
}

// errStoredUnreadable marks a send a broker answered as stored with an
// answer that cannot be read: sending it again would store it twice.
var errStoredUnreadable = errors.New("client: the broker stored the message, but its answer is unreadable")

// retriableCode lists the answers worth another attempt elsewhere: the
// Go client's TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE, SYSTEM_ERROR,
// NO_PERMISSION, plus SYSTEM_BUSY and NOT_LEADER_FOR_QUEUE.
func retriableCode(code int16) bool {
	switch code {
	case remoting.ResponseTopicNotExist, remoting.ResponseServiceNotAvailable, remoting.ResponseSystemError,
		remoting.ResponseNoPermission, remoting.ResponseSystemBusy, remoting.ResponseNotLeaderForQueue:
		return true
	}
	return false
}

// send runs the attempts of one request.
func (p *Producer) send(ctx context.Context, r *sendRequest) (*SendResult, error) {
	routes, err := p.running()
	if err != nil {
		return nil, err
	}
	sd := p.newSendDeadline(ctx)
	defer sd.release()
	info := routes.cachedPublishInfo(r.topic)
	if info == nil {
		if info, err = routes.publishInfo(sd.context(), r.topic, p.cfg.autoCreate, p.cfg.defaultTopicQueueNums); err != nil {
			return nil, err
		}
	}
	return p.runAttempts(&sd, routes, info, r, &attemptState{topic: r.topic})
}

// attemptState is where a send's attempt loop stands: how many attempts
// were used, the queue of the last one and the attempts' errors. An
// auto-batched message whose batch failed continues from the batch's state
// (one attempt used, on the batch's queue).
type attemptState struct {
	done       int // attempts used
	mq         MessageQueue
	chosen     bool // mq was chosen (sticky sends keep it)
	lastBroker string
	extra      [][]string // idempotence properties, assigned once
	sendErr    *SendError // built by errs at the first failure
	topic      string     // sendErr's topic
	// first, when set, is the answer to the first attempt's request,
	// already sent on mq by SendAsync's callback path: the attempt loop
	// takes it as its first call's outcome instead of sending again.
	first *firstAnswer
}

// errs returns the send's error record, creating it on the first failure
// (a send that succeeds at once allocates none).
func (st *attemptState) errs() *SendError {
	if st.sendErr == nil {
		st.sendErr = &SendError{Topic: st.topic}
	}
	return st.sendErr
}

// sticky reports whether every attempt of r must go to its first queue:
// order and deduplication only hold within one queue.
func (p *Producer) sticky(r *sendRequest) bool { return r.selector != nil || p.seq != nil }

// maxAttempts is how many attempts r gets.
func (p *Producer) maxAttempts(r *sendRequest) int {
	if r.oneway {
		return 1
	}
	return 1 + p.cfg.retries
}

// retryAfter decides whether the failed attempt err of r is worth another
// one and readies it: a sticky send re-reads the route of its group
// (returned; nil keeps info), others ask the refresh loop.
func (p *Producer) retryAfter(sd *sendDeadline, routes *routeManager, r *sendRequest, err error) (bool, *TopicPublishInfo) {
	var be *BrokerError
	if errors.As(err, &be) && !retriableCode(be.Code) {
		return false, nil
	}
	if errors.Is(err, ErrInvalidMessage) || errors.Is(err, ErrNoQueue) || errors.Is(err, errStoredUnreadable) || sd.err() != nil {
		return false, nil
	}
	if p.sticky(r) {
		// The next attempt goes to the same group: let it see the
		// latest route first.
		if fresh, ferr := routes.refresh(sd.context(), r.topic, p.cfg.autoCreate, p.cfg.defaultTopicQueueNums); ferr == nil {
			return true, fresh
		}
		return true, nil
	}
	p.requestRefresh(r.topic)
	return true, nil
}

// runAttempts runs the attempts of r left after st.
func (p *Producer) runAttempts(sd *sendDeadline, routes *routeManager, info *TopicPublishInfo, r *sendRequest, st *attemptState) (*SendResult, error) {
	attempts := p.maxAttempts(r)
	sticky := p.sticky(r)
	for ; st.done < attempts; st.done++ {
		if st.done > 0 && sd.err() != nil {
			break
		}
		if (!st.chosen || !sticky) && st.first == nil {
			mq, ok := p.chooseQueue(info, r, st.lastBroker)
			if !ok {
				if r.selector != nil {
					return nil, fmt.Errorf("%w: the selector chose no queue of topic %q", ErrNoQueue, r.topic)
				}
				return nil, fmt.Errorf("%w: topic %q", ErrNoQueue, r.topic)
			}
			st.mq, st.chosen = mq, true
		}
		if p.seq != nil && st.extra == nil {
			st.extra = make([][]string, max(1, len(r.batch)))
			for j := range st.extra {
				st.extra[j] = p.seq.assign(st.mq)
			}
		}
		waitOK := sticky || info.singleGroup()
		res, err := p.attempt(sd, routes, r, st.mq, st.extra, st, st.done == attempts-1, waitOK)
		if err == nil {
			return res, nil
		}
		st.lastBroker = st.mq.BrokerName
		more, fresh := p.retryAfter(sd, routes, r, err)
		if !more {
			break
		}
		if fresh != nil {
			info = fresh
		}
	}
	if se := st.errs(); len(se.Attempts) == 0 {
		se.Attempts = append(se.Attempts, SendAttempt{Broker: st.mq.BrokerName, QueueID: st.mq.QueueID, Err: sd.err()})
	}
	return nil, st.errs()
}

// chooseQueue picks the queue of one attempt.
func (p *Producer) chooseQueue(info *TopicPublishInfo, r *sendRequest, lastBroker string) (MessageQueue, bool) {
	if r.selector != nil {
		msg := r.msg
		if msg == nil {
			msg = r.batch[0]
		}
		mq, ok := r.selector.Select(msg, append([]MessageQueue(nil), info.Queues...))
		// The message goes to its own topic whatever Topic the selector's
		// queue names (a queue built by hand may name none), and brokers
		// key an idempotent stream by that topic: so must the sequencer.
		mq.Topic = r.topic
		return mq, ok
	}
	notLast := func(mq MessageQueue) bool { return lastBroker == "" || mq.BrokerName != lastBroker }
	// Groups that just timed out are skipped even with fault tolerance off
	// (latencyFault.stalled).
	responsive := func(mq MessageQueue) bool { return p.fault.responsive(mq.BrokerName) }
	if p.cfg.faultEnable {
		available := func(mq MessageQueue) bool { return p.fault.available(mq.BrokerName) }
		if mq, ok := info.selectQueue(available, responsive, notLast); ok {
			return mq, true
		}
	}
	if mq, ok := info.selectQueue(responsive, notLast); ok {
		return mq, true
	}
	if mq, ok := info.selectQueue(notLast); ok {
		return mq, true
	}
	return info.selectQueue()
}

// attempt sends r to mq's group, following "not leader" answers and
// trying other members after a connection failure, up to MaxLeaderHops
// times. With waitOK (no other group to retry on, or a sticky send) or on
// the last attempt it waits out an election in the group within ctx
// instead of failing.
// Every failure is appended to st's error record.
func (p *Producer) attempt(sd *sendDeadline, routes *routeManager, r *sendRequest, mq MessageQueue, extra [][]string, st *attemptState, last, waitOK bool) (*SendResult, error) {
	// The first answer belongs to this attempt whatever the route says
	// now: left in st, a later attempt would take it as its own.
	first := st.first
	st.first = nil
	var addr string
	if first != nil {
		addr = first.addr
	} else if addr = routes.brokerAddr(mq.BrokerName); addr == "" {
		err := fmt.Errorf("%w: broker group %q of topic %q has no known address", ErrNoQueue, mq.BrokerName, r.topic)
		se := st.errs()
		se.Attempts = append(se.Attempts, SendAttempt{Broker: mq.BrokerName, QueueID: mq.QueueID, Err: err})
		return nil, err
	}
	fail := func(addr string, err error) error {
		se := st.errs()
		se.Attempts = append(se.Attempts, SendAttempt{Broker: mq.BrokerName, Addr: addr, QueueID: mq.QueueID, Err: err})
		return err
	}
	for hop := 0; ; hop++ {
		var start time.Time
		var resp *remoting.RemotingCommand
		var err error
		if first != nil {
			start, resp, err = first.start, first.resp, first.err
			first = nil
		} else {
			if err := sd.err(); err != nil {
				// The caller has given up: a request sent now could be
				// stored while the send reports a failure, and the
				// timeout it would get says nothing of the group.
				return nil, fail(addr, err)
			}
			start = p.cfg.common.now()
			req, encErr := p.encode(r, mq, extra, start)
			if encErr != nil {
				return nil, fail(addr, encErr)
			}
			if r.oneway {
				err := p.rc.InvokeOneway(sd.context(), addr, req)
				if err != nil {
					routes.markDown(mq.BrokerName, addr, routes.downFor)
					p.requestRefresh(r.topic)
					return nil, fail(addr, err)
				}
				return nil, nil
			}
			resp, err = p.rc.InvokeSyncUntil(sd.caller, addr, req, sd.attempt(p.wallClock(start), p.cfg.attemptTimeout, last))
		}
		latency := p.cfg.common.now().Sub(start)
		if err != nil {
			p.fault.update(mq.BrokerName, latency, true)
			if errors.Is(err, remoting.ErrTimeout) {
				p.fault.stalled(mq.BrokerName)
				// A member that does not answer within AttemptTimeout may be
				// a frozen leader whose connection stays up: steer the next
				// attempt (ordered and idempotent sends stay on this queue)
				// to another member, which names the new leader once elected.
				routes.markDown(mq.BrokerName, addr, noLeaderBackoff)
				p.requestRefresh(r.topic)
			}
			fail(addr, err)
			if !errIsConnFailure(err) || sd.err() != nil {
				return nil, err
			}
			// The process behind addr is gone or unreachable: avoid it,
			// ask the name servers for news, and try another member of
			// the group, which names the leader if it is not it.
			routes.markDown(mq.BrokerName, addr, routes.downFor)
			p.requestRefresh(r.topic)
			if next := routes.brokerAddr(mq.BrokerName); hop < p.cfg.maxLeaderHops && next != "" && next != addr {
				p.log.Info("connection to broker failed, trying another member of its group",
					zap.String("brokerName", mq.BrokerName), zap.String("failed", addr), zap.String("next", next), zap.Error(err))
				addr = next
				continue
			}
			return nil, err
		}
		routes.markUp(mq.BrokerName, addr)
		switch resp.Code {
		case remoting.ResponseSuccess, remoting.ResponseFlushDiskTimeout, remoting.ResponseFlushSlaveTimeout, remoting.ResponseSlaveNotAvailable:
			p.fault.update(mq.BrokerName, latency, false)
			res, err := p.result(r, mq, addr, resp)
			if err != nil {
				return nil, fail(addr, err)
			}
			return res, nil
		}
		leaderHint, _ := resp.ExtValue(wire.ExtLeaderAddr)
		be := &BrokerError{Broker: mq.BrokerName, Addr: addr, Code: resp.Code, Remark: resp.Remark, LeaderAddr: leaderHint}
		fail(addr, be)
		notLeader := resp.Code == remoting.ResponseNotLeaderForQueue || resp.Code == remoting.ResponseServiceNotAvailable
		leader := be.LeaderAddr
		if !routes.followable(mq.BrokerName, addr, leader) {
			leader = "" // the group is about to elect
		}
		if notLeader && leader != "" && hop < p.cfg.maxLeaderHops {
			// Not a failure of the group: its leader moved. Go there now
			// and let the route catch up in the background.
			routes.learnLeader(mq.BrokerName, addr, leader)
			p.requestRefresh(r.topic)
			addr = leader
			continue
		}
		// A raftmq member without a usable leader (501, an answer whose
		// hint we just discarded, or 14 with the not-leader remark, which
		// fails over to another group while there is one to try): an
		// election is under way. A 14 without hint or raftmq's not-leader
		// remark comes from the group's leader itself (a full disk, a store
		// closing): waiting cannot help, so it fails the attempt at once
		// with the broker's remark and the send retries elsewhere, or on
		// the same group, as RocketMQ's clients do (retryResponseCodes),
		// instead of waiting out SendTimeout.
		electing := notLeader && (resp.Code == remoting.ResponseNotLeaderForQueue || be.LeaderAddr != "" ||
			((waitOK || last) && wire.IsNotLeaderRemark(resp.Remark)))
		if electing && hop < p.cfg.maxLeaderHops {
			routes.markDown(mq.BrokerName, addr, noLeaderBackoff)
			p.requestRefresh(r.topic)
			next := routes.brokerAddr(mq.BrokerName)
			if waitOK || last {
				// Nowhere else to go (one group, the message must stay on
				// its queue, or no attempt follows this one): wait out the
				// election within ctx, asking the members in turn, rather
				// than fail in milliseconds what a few hundred would
				// store (every group electing at once: a stall of the
				// whole cluster, a restart). A wait is not a hop.
				if !waitElection(sd.context()) {
					return nil, be
				}
				if next != "" {
					addr = next
				}
				hop--
				continue
			}
			if next != "" && next != addr {
				addr = next
				continue
			}
		}
		p.fault.update(mq.BrokerName, latency, true)
		return nil, be
	}
}

// result turns a stored-send response into a SendResult
// (MQClientAPIImpl.processSendResponse).
func (p *Producer) result(r *sendRequest, mq MessageQueue, addr string, resp *remoting.RemotingCommand) (*SendResult, error) {
	h, err := decodeSendResponse(resp)
	if err != nil {
		return nil, fmt.Errorf("%w (%s answered code %d): %w", errStoredUnreadable, addr, resp.Code, err)
	}
	res := &SendResult{
		MsgID:         strings.Join(r.uniqIDs, ","),
		OffsetMsgID:   h.MsgID,
		Queue:         MessageQueue{Topic: r.topic, BrokerName: mq.BrokerName, QueueID: int(h.QueueID)},
		QueueOffset:   h.QueueOffset,
		TransactionID: h.TransactionID,
		RegionID:      h.MsgRegion,
		TraceOn:       h.TraceOn != "false",
		Addr:          addr,
	}
	if h.BatchUniqID != "" {
		res.MsgID = h.BatchUniqID
	}
	if res.RegionID == "" {
		res.RegionID = "DefaultRegion"
	}
	switch resp.Code {
	case remoting.ResponseFlushDiskTimeout:
		res.Status = SendFlushDiskTimeout
	case remoting.ResponseFlushSlaveTimeout:
		res.Status = SendFlushSlaveTimeout
	case remoting.ResponseSlaveNotAvailable:
		res.Status = SendSlaveNotAvailable
	}
	return res, nil
}
