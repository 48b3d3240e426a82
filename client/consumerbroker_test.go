package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// qBroker is a fake broker for consumer tests: in-memory queues, long
// polling, consumer offsets, heartbeats with NOTIFY_CONSUMER_IDS_CHANGED,
// queue locks and send-back — the broker side of every request the
// consumers make, kept simple enough to trust.
type qBroker struct {
	t          testing.TB
	name, addr string
	srv        *remoting.Server
	nsClient   *remoting.Client
	quit       chan struct{}

	mu        sync.Mutex
	queues    map[qKey][]qMsg                         // guarded by mu
	offsets   map[string]int64                        // guarded by mu; group|topic|qid
	members   map[string]map[string]member            // guarded by mu; group → clientID → conn
	locks     map[string]string                       // guarded by mu; group|topic|qid → clientID
	heartbeat []wire.HeartbeatData                    // guarded by mu
	sendBacks []wire.ConsumerSendMsgBackRequestHeader // guarded by mu
	pulls     []wire.PullMessageRequestHeader         // guarded by mu
	codes     map[int16]int                           // guarded by mu
	phys      int64                                   // guarded by mu
	arrived   chan struct{}                           // guarded by mu; closed on every store
	// notLeader, when set, makes the broker answer everything but
	// heartbeats with 501 naming it (a raftmq follower).
	notLeader string // guarded by mu
	// failSendBack answers CONSUMER_SEND_MSG_BACK with SYSTEM_ERROR.
	failSendBack bool // guarded by mu
	// noPullCommit ignores the offsets pulls carry, as a raftmq follower
	// does.
	noPullCommit bool // guarded by mu
	// script answers the codes it has instead of the built-in handlers.
	script map[int16]func(*remoting.RemotingCommand) *remoting.RemotingCommand // guarded by mu
	reqs   []*remoting.RemotingCommand                                         // guarded by mu; every request
	// lockNow, when set, is the clock of the locks: as at a real broker, a
	// lock not renewed for brokerLockLife is free. Unset, locks never expire.
	lockNow  func() time.Time     // guarded by mu
	lockedAt map[string]time.Time // guarded by mu; group|topic|qid → last lock
}

// brokerLockLife is the broker's REBALANCE_LOCK_MAX_LIVE_TIME.
const brokerLockLife = 60 * time.Second

type qKey struct {
	topic string
	qid   int
}

type qMsg struct {
	body      []byte
	props     map[string]string
	phys      int64
	storeTS   int64
	reconsume int32
}

type member struct {
	conn *remoting.Conn
}

func startQBroker(t testing.TB, name string) *qBroker {
	t.Helper()
	b := &qBroker{t: t, name: name, quit: make(chan struct{}), nsClient: remoting.NewClient(remoting.ClientConfig{}, nil),
		queues: map[qKey][]qMsg{}, offsets: map[string]int64{}, members: map[string]map[string]member{},
		locks: map[string]string{}, codes: map[int16]int{}, arrived: make(chan struct{})}
	b.srv = remoting.NewServer(remoting.ServerConfig{}, nil)
	wrap := func(h func(*remoting.Conn, *remoting.RemotingCommand) *remoting.RemotingCommand) remoting.HandlerFunc {
		return func(_ context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
			b.mu.Lock()
			b.codes[req.Code]++
			b.reqs = append(b.reqs, req)
			nl := b.notLeader
			scripted := b.script[req.Code]
			b.mu.Unlock()
			if scripted != nil {
				return scripted(req), nil
			}
			if nl != "" && req.Code != remoting.RequestHeartBeat && req.Code != remoting.RequestUnregisterClient {
				r := remoting.NewResponse(remoting.ResponseNotLeaderForQueue, "not leader")
				r.ExtFields = map[string]string{wire.ExtLeaderAddr: nl}
				return r, nil
			}
			return h(conn, req), nil
		}
	}
	b.srv.Register(remoting.RequestPullMessage, wrap(b.pull), 32, 256)
	b.srv.Register(remoting.RequestSendMessageV2, wrap(b.send), 2, 64)
	b.srv.RegisterDefault(wrap(b.other), 4, 256)
	if err := b.srv.Start(); err != nil {
		t.Fatal(err)
	}
	b.addr = b.srv.Addr().String()
	t.Cleanup(func() {
		close(b.quit)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.srv.Shutdown(ctx)
		_ = b.nsClient.Close()
	})
	return b
}

// register registers the broker as member id of its group serving topics.
func (b *qBroker) register(t testing.TB, ns *namesrv.NameServer, id int64, topics map[string]int) {
	t.Helper()
	table := map[string]wire.TopicConfig{}
	for name, n := range topics {
		table[name] = wire.TopicConfig{TopicName: name, ReadQueueNums: n, WriteQueueNums: n, Perm: 6}
	}
	body, err := wire.EncodeRegisterBrokerBody(&wire.RegisterBrokerBody{
		TopicConfigSerializeWrapper: wire.TopicConfigSerializeWrapper{TopicConfigTable: table, DataVersion: wire.DataVersion{StateVersion: 1, Timestamp: 1, Counter: 1}},
		FilterServerList:            []string{},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	h := &wire.RegisterBrokerRequestHeader{BrokerName: b.name, BrokerAddr: b.addr, ClusterName: "C", BrokerID: id, BodyCrc32: int32(wire.BodyCRC32(body))}
	resp, err := b.nsClient.InvokeSync(context.Background(), ns.Addr().String(), remoting.NewRequest(remoting.RequestRegisterBroker, h, body))
	if err != nil || resp.Code != remoting.ResponseSuccess {
		t.Fatalf("register %s: %v %v", b.name, err, resp)
	}
}

// put stores a message directly (as if produced) and returns its offset.
func (b *qBroker) put(topic string, qid int, body string, props map[string]string) int64 {
	return b.putAt(topic, qid, []byte(body), props, time.Now().UnixMilli(), 0)
}

func (b *qBroker) putAt(topic string, qid int, body []byte, props map[string]string, ts int64, reconsume int32) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := qKey{topic, qid}
	if props == nil {
		props = map[string]string{}
	}
	if props[wire.PropertyUniqKey] == "" {
		props[wire.PropertyUniqKey] = fmt.Sprintf("%032X", b.phys+1)
	}
	b.queues[k] = append(b.queues[k], qMsg{body: body, props: props, phys: b.phys, storeTS: ts, reconsume: reconsume})
	b.phys += 1000
	close(b.arrived)
	b.arrived = make(chan struct{})
	return int64(len(b.queues[k]) - 1)
}

// answer scripts the reply to code.
func (b *qBroker) answer(code int16, f func(*remoting.RemotingCommand) *remoting.RemotingCommand) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.script == nil {
		b.script = map[int16]func(*remoting.RemotingCommand) *remoting.RemotingCommand{}
	}
	b.script[code] = f
}

// requests returns the requests received with code.
func (b *qBroker) requests(code int16) []*remoting.RemotingCommand {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*remoting.RemotingCommand
	for _, r := range b.reqs {
		if r.Code == code {
			out = append(out, r)
		}
	}
	return out
}

func (b *qBroker) setNotLeader(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.notLeader = addr
}

func (b *qBroker) offset(group, topic string, qid int) (int64, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	off, ok := b.offsets[fmt.Sprintf("%s|%s|%d", group, topic, qid)]
	return off, ok
}

// setOffset stores group's committed offset of topic's queue qid, as
// another consumer's commit would.
func (b *qBroker) setOffset(group, topic string, qid int, off int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.offsets[fmt.Sprintf("%s|%s|%d", group, topic, qid)] = off
}

func (b *qBroker) count(code int16) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.codes[code]
}

func (b *qBroker) lockHolder(group string, mq MessageQueue) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := fmt.Sprintf("%s|%s|%d", group, mq.Topic, mq.QueueID)
	if b.lockNow != nil && b.lockNow().Sub(b.lockedAt[k]) > brokerLockLife {
		return ""
	}
	return b.locks[k]
}

// lockRequests counts the LOCK_BATCH_MQ requests from clientID naming mq.
func (b *qBroker) lockRequests(clientID string, mq MessageQueue) int {
	n := 0
	for _, r := range b.requests(remoting.RequestLockBatchMQ) {
		var body wire.LockBatchBody
		if json.Unmarshal(r.Body, &body) != nil || body.ClientID != clientID {
			continue
		}
		for _, q := range body.MQSet {
			if q.Topic == mq.Topic && q.BrokerName == mq.BrokerName && int(q.QueueID) == mq.QueueID {
				n++
			}
		}
	}
	return n
}

func (b *qBroker) pull(_ *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.PullMessageRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return remoting.NewResponse(remoting.ResponseSystemError, err.Error())
	}
	b.mu.Lock()
	if h.SysFlag&wire.PullFlagCommitOffset != 0 && !b.noPullCommit {
		b.offsets[fmt.Sprintf("%s|%s|%d", h.ConsumerGroup, h.Topic, h.QueueID)] = h.CommitOffset
	}
	b.mu.Unlock()
	deadline := time.After(time.Duration(h.SuspendTimeoutMillis) * time.Millisecond)
	for {
		b.mu.Lock()
		b.pulls = append(b.pulls, h)
		msgs := b.queues[qKey{h.Topic, int(h.QueueID)}]
		arrived := b.arrived
		b.mu.Unlock()
		maxOff := int64(len(msgs))
		resp := func(code int16, next int64, body []byte) *remoting.RemotingCommand {
			r := remoting.NewResponse(code, "")
			r.ExtFields = map[string]string{"nextBeginOffset": strconv.FormatInt(next, 10), "minOffset": "0",
				"maxOffset": strconv.FormatInt(maxOff, 10), "suggestWhichBrokerId": "0"}
			r.Body = body
			return r
		}
		if h.QueueOffset > maxOff {
			return resp(remoting.ResponsePullOffsetMoved, maxOff, nil)
		}
		if h.QueueOffset < maxOff {
			var body []byte
			end := min(maxOff, h.QueueOffset+int64(h.MaxMsgNums))
			for off := h.QueueOffset; off < end; off++ {
				m := msgs[off]
				body = append(body, encodeStored(b.t, storedMessage{topic: h.Topic, body: m.body, props: wire.EncodeProperties(m.props),
					queueID: int32(h.QueueID), queueOffset: off, physical: m.phys, bornTS: m.storeTS, storeTS: m.storeTS,
					store: netip.MustParseAddrPort(b.addr), reconsume: m.reconsume})...)
			}
			return resp(remoting.ResponseSuccess, end, body)
		}
		if h.SysFlag&wire.PullFlagSuspend == 0 {
			return resp(remoting.ResponsePullNotFound, maxOff, nil)
		}
		select {
		case <-arrived:
		case <-deadline:
			return resp(remoting.ResponsePullNotFound, maxOff, nil)
		case <-b.quit:
			return resp(remoting.ResponsePullNotFound, maxOff, nil)
		}
	}
}

// send stores SEND_MESSAGE_V2 (the consumer's retry-topic fallback).
func (b *qBroker) send(_ *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.SendMessageRequestHeaderV2
	if err := req.DecodeHeader(&h); err != nil {
		return remoting.NewResponse(remoting.ResponseSystemError, err.Error())
	}
	off := b.putAt(h.Topic, int(h.QueueID), req.Body, wire.DecodeProperties(h.Properties), time.Now().UnixMilli(), int32(h.ReconsumeTimes))
	r := remoting.NewResponse(remoting.ResponseSuccess, "")
	r.ExtFields = map[string]string{"msgId": "7F00000100002A9F0000000000000000", "queueId": strconv.Itoa(int(h.QueueID)), "queueOffset": strconv.FormatInt(off, 10)}
	return r
}

func (b *qBroker) other(conn *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	ok := remoting.NewResponse(remoting.ResponseSuccess, "")
	key := func(group, topic string, qid int) string { return fmt.Sprintf("%s|%s|%d", group, topic, qid) }
	switch req.Code {
	case remoting.RequestHeartBeat:
		var hb wire.HeartbeatData
		if err := json.Unmarshal(req.Body, &hb); err != nil {
			return remoting.NewResponse(remoting.ResponseSystemError, err.Error())
		}
		b.mu.Lock()
		b.heartbeat = append(b.heartbeat, hb)
		var notify []*remoting.Conn
		for _, cd := range hb.ConsumerDataSet {
			g := b.members[cd.GroupName]
			if g == nil {
				g = map[string]member{}
				b.members[cd.GroupName] = g
			}
			if _, known := g[hb.ClientID]; !known {
				g[hb.ClientID] = member{conn: conn}
				for _, m := range g {
					notify = append(notify, m.conn)
				}
			}
		}
		b.mu.Unlock()
		b.notify(notify)
		return ok
	case remoting.RequestUnregisterClient:
		var h wire.UnregisterClientRequestHeader
		_ = req.DecodeHeader(&h)
		b.mu.Lock()
		var notify []*remoting.Conn
		if g := b.members[h.ConsumerGroup]; g != nil {
			delete(g, h.ClientID)
			for _, m := range g {
				notify = append(notify, m.conn)
			}
		}
		b.mu.Unlock()
		b.notify(notify)
		return ok
	case remoting.RequestGetConsumerListByGroup:
		var h wire.ConsumerGroupRequestHeader
		_ = req.DecodeHeader(&h)
		b.mu.Lock()
		ids := []string{}
		for id := range b.members[h.ConsumerGroup] {
			ids = append(ids, id)
		}
		b.mu.Unlock()
		slices.Sort(ids)
		ok.Body, _ = json.Marshal(map[string][]string{"consumerIdList": ids})
		return ok
	case remoting.RequestQueryConsumerOffset:
		var h wire.QueryConsumerOffsetRequestHeader
		_ = req.DecodeHeader(&h)
		off, found := b.offset(h.ConsumerGroup, h.Topic, int(h.QueueID))
		if !found {
			return remoting.NewResponse(remoting.ResponseQueryNotFound, "no offset")
		}
		ok.ExtFields = map[string]string{"offset": strconv.FormatInt(off, 10)}
		return ok
	case remoting.RequestUpdateConsumerOffset:
		var h wire.UpdateConsumerOffsetRequestHeader
		_ = req.DecodeHeader(&h)
		b.mu.Lock()
		b.offsets[key(h.ConsumerGroup, h.Topic, int(h.QueueID))] = h.CommitOffset
		b.mu.Unlock()
		return ok
	case remoting.RequestGetMaxOffset, remoting.RequestGetMinOffset, remoting.RequestSearchOffsetByTimestamp:
		var h wire.SearchOffsetRequestHeader
		_ = req.DecodeHeader(&h)
		b.mu.Lock()
		msgs := b.queues[qKey{h.Topic, int(h.QueueID)}]
		off := int64(len(msgs))
		switch req.Code {
		case remoting.RequestGetMinOffset:
			off = 0
		case remoting.RequestSearchOffsetByTimestamp:
			for i, m := range msgs {
				if m.storeTS >= h.Timestamp {
					off = int64(i)
					break
				}
			}
		}
		b.mu.Unlock()
		ok.ExtFields = map[string]string{"offset": strconv.FormatInt(off, 10)}
		return ok
	case remoting.RequestLockBatchMQ, remoting.RequestUnlockBatchMQ:
		var body wire.LockBatchBody
		if err := json.Unmarshal(req.Body, &body); err != nil {
			return remoting.NewResponse(remoting.ResponseSystemError, err.Error())
		}
		b.mu.Lock()
		granted := []wire.MessageQueue{}
		for _, q := range body.MQSet {
			k := key(body.ConsumerGroup, q.Topic, int(q.QueueID))
			holder := b.locks[k]
			if b.lockNow != nil && holder != "" && b.lockNow().Sub(b.lockedAt[k]) > brokerLockLife {
				holder = ""
			}
			if req.Code == remoting.RequestUnlockBatchMQ {
				if holder == body.ClientID {
					delete(b.locks, k)
				}
				continue
			}
			if holder == "" || holder == body.ClientID {
				b.locks[k] = body.ClientID
				if b.lockNow != nil {
					if b.lockedAt == nil {
						b.lockedAt = map[string]time.Time{}
					}
					b.lockedAt[k] = b.lockNow()
				}
				granted = append(granted, q)
			}
		}
		b.mu.Unlock()
		if req.Code == remoting.RequestLockBatchMQ {
			ok.Body, _ = json.Marshal(wire.LockBatchResponse{LockOKMQSet: granted})
		}
		return ok
	case remoting.RequestConsumerSendMsgBack:
		var h wire.ConsumerSendMsgBackRequestHeader
		_ = req.DecodeHeader(&h)
		b.mu.Lock()
		b.sendBacks = append(b.sendBacks, h)
		fail := b.failSendBack
		var orig *qMsg
		for _, q := range b.queues {
			for i := range q {
				if q[i].phys == h.Offset {
					orig = &q[i]
				}
			}
		}
		b.mu.Unlock()
		if fail {
			return remoting.NewResponse(remoting.ResponseSystemError, "scripted send-back failure")
		}
		if orig == nil {
			return remoting.NewResponse(remoting.ResponseSystemError, "no message at that offset")
		}
		props := map[string]string{}
		for k, v := range orig.props {
			props[k] = v
		}
		if props[wire.PropertyRetryTopic] == "" {
			props[wire.PropertyRetryTopic] = h.OriginTopic
		}
		b.putAt(wire.RetryTopic(h.Group), 0, orig.body, props, time.Now().UnixMilli(), orig.reconsume+1)
		return ok
	}
	return ok
}

// notify sends NOTIFY_CONSUMER_IDS_CHANGED to conns, oneway as brokers do.
func (b *qBroker) notify(conns []*remoting.Conn) {
	for _, c := range conns {
		req := remoting.NewRequest(remoting.RequestNotifyConsumerIDsChanged, nil, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = c.InvokeOneway(ctx, req)
		cancel()
	}
}
