package broker

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
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// The admin codes RocketMQ's operator tools rely on (AdminBrokerProcessor
// in RocketMQ): broker stats (315) and runtime-info rates, consume stats
// of every group (317), producer connections (204, 328), consumer running
// info forwarded to the client (307), consume-queue inspection (321),
// offset cloning (314), offset resets relayed to the consumers (222,
// admin_reset.go), topic and group lookups (300, 351, 352), and the
// maintenance triggers (306, 316, 329, 27). processAdmin hands them here.

// processAdminTools answers the codes above; ok is false for any other.
func (c *Controller) processAdminTools(ctx context.Context, req *remoting.RemotingCommand) (_ *remoting.RemotingCommand, ok bool) {
	switch req.Code {
	case remoting.RequestViewBrokerStatsData:
		return c.processViewBrokerStats(req), true
	case remoting.RequestGetBrokerConsumeStats:
		return c.processBrokerConsumeStats(req), true
	case remoting.RequestGetProducerConnectionList:
		return c.processProducerConnections(req), true
	case remoting.RequestGetAllProducerInfo:
		return c.processAllProducerInfo(), true
	case remoting.RequestGetConsumerRunningInfo:
		return c.processConsumerRunningInfo(ctx, req), true
	case remoting.RequestConsumeMessageDirectly:
		return c.processConsumeMessageDirectly(ctx, req), true
	case remoting.RequestQueryConsumeQueue:
		return c.processQueryConsumeQueue(req), true
	case remoting.RequestCloneGroupOffset:
		return c.processCloneGroupOffset(ctx, req), true
	case remoting.RequestQueryTopicConsumeByWho:
		return c.processTopicConsumeByWho(req), true
	case remoting.RequestInvokeBrokerToResetOffset:
		return c.processInvokeResetOffset(ctx, req), true
	case remoting.RequestGetTopicConfig:
		return c.processGetTopicConfig(req), true
	case remoting.RequestGetSubscriptionGroupConfig:
		return c.processGetGroupConfig(req), true
	case remoting.RequestCleanExpiredConsumequeue:
		return c.processCleanExpiredCQ(), true
	case remoting.RequestCleanUnusedTopic:
		return c.processCleanUnusedTopic(), true
	case remoting.RequestDeleteExpiredCommitLog, remoting.RequestTriggerDeleteFiles:
		c.st.DeleteExpiredManually()
		c.log.Info("expired CommitLog segments will be deleted by the next retention checks (admin request)")
		return success(), true
	}
	return nil, false
}

func (c *Controller) processViewBrokerStats(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.ViewBrokerStatsDataRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	it := c.stats.lookup(h.StatsName, h.StatsKey)
	if it == nil {
		// RocketMQ's answer for a key nothing was counted under.
		return response(remoting.ResponseSystemError, "The stats <%s> <%s> not exist", h.StatsName, h.StatsKey)
	}
	r := success()
	r.Body, _ = json.Marshal(it.data(time.Now()))
	return r
}

// consumeStats writes one group's ConsumeStats over topics as RocketMQ
// serializes it (MessageQueue objects as keys) and returns the total lag.
// consumeTps is the group's pulled messages per second over the last
// minute; lastTimestamp the store time of the last consumed message.
// pullOffset is the consumer offset: raftmq does not track pulls the
// group has not committed yet, so it reports none in flight (as
// totalInflightDiff of GET_BROKER_CONSUME_STATS) rather than a negative
// count.
//
// It fails while the store closes, when every queue would read as empty:
// a lag of zero for a backlog that is there.
func (c *Controller) consumeStats(group string, topics []string) (body []byte, diff int64, err error) {
	now := time.Now()
	b := []byte(`{"offsetTable":{`)
	first := true
	var tps float64
	for _, t := range topics {
		tc, ok := c.rep.State().Topic(t)
		if !ok {
			continue
		}
		for i := range queueCount(tc.ReadQueueNums) {
			q := int32(i)
			off, _ := c.offsets.lookup(group, t, q)
			off = max(off, 0)
			_, maxOff, err := c.st.QueueRange(t, q)
			if err != nil {
				return nil, 0, fmt.Errorf("consume stats of %s on %s/%d: %w", group, t, q, err)
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = wire.AppendQueueEntry(b, wire.MessageQueue{Topic: t, BrokerName: c.cfg.BrokerName, QueueID: q},
				wire.OffsetWrapper{BrokerOffset: maxOff, ConsumerOffset: off, PullOffset: off, LastTimestamp: c.storeTimeAt(t, q, off-1)})
			diff += max(maxOff-off, 0)
		}
		if it := c.stats.lookup(wire.StatsGroupGetNums, t+"@"+group); it != nil {
			tps += it.tps(time.Minute, now)
		}
	}
	b = append(b, `},"consumeTps":`...)
	b = strconv.AppendFloat(b, tps, 'f', -1, 64)
	if math.Trunc(tps) == tps {
		b = append(b, ".0"...) // a double, as fastjson writes it
	}
	return append(b, '}'), diff, nil
}

// storeTimeAt is the store time of a queue's message at offset, 0 when
// there is none (offset before the first or after the last).
func (c *Controller) storeTimeAt(topic string, queueID int32, offset int64) int64 {
	cq := c.st.ConsumeQueues().Get(topic, queueID)
	if offset < 0 || cq == nil || offset < cq.MinOffset() || offset >= cq.MaxOffset() {
		return 0
	}
	u, err := cq.Get(offset)
	if err != nil {
		return 0
	}
	ts, err := c.st.CommitLog().StoreTimeAt(u.PhyOffset, u.Size)
	if err != nil {
		return 0
	}
	return ts
}

// groupTopics returns the topics each group has committed offsets on.
func (c *Controller) groupTopics() map[string][]string {
	out := map[string][]string{}
	for key := range c.offsetKeys() {
		if i := strings.LastIndexByte(key, '@'); i > 0 {
			out[key[i+1:]] = append(out[key[i+1:]], key[:i])
		}
	}
	for _, ts := range out {
		slices.Sort(ts)
	}
	return out
}

// processBrokerConsumeStats answers GET_BROKER_CONSUME_STATS: every
// configured group's ConsumeStats per topic (ConsumeStatsList), only
// ordered topics with isOrder.
func (c *Controller) processBrokerConsumeStats(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.GetConsumeStatsInBrokerHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	// Every configured group, with the topics it has offsets on, as
	// RocketMQ's fetchAllConsumeStatsInBroker: offsets a deleted group
	// left behind (deleteSubGroup keeps them) are nobody's lag.
	gt := c.groupTopics()
	groups := slices.Sorted(maps.Keys(c.rep.State().SubscriptionGroups()))
	b := []byte(`{"brokerAddr":`)
	b, _ = appendJSON(b, c.addr)
	b = append(b, `,"consumeStatsList":[`...)
	var total int64
	for i, g := range groups {
		if i > 0 {
			b = append(b, ',')
		}
		b, _ = appendJSON(append(b, '{'), g)
		b = append(b, ":["...)
		n := 0
		for _, t := range c.subscribedTopics(g, gt[g]) {
			if tc, ok := c.rep.State().Topic(t); !ok || (h.IsOrder && !tc.Order) {
				continue
			}
			cs, diff, err := c.consumeStats(g, []string{t})
			if err != nil {
				return response(remoting.ResponseSystemError, "%v", err)
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = append(b, cs...)
			total += diff
		}
		b = append(b, "]}"...)
	}
	b = append(b, `],"totalDiff":`...)
	b = strconv.AppendInt(b, total, 10)
	b = append(b, `,"totalInflightDiff":0}`...)
	r := success()
	r.Body = b
	return r
}

func appendJSON(b []byte, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	return append(b, j...), err
}

func (c *Controller) processProducerConnections(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.GetProducerConnectionListRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	chans := c.clients.producerChannels()[h.ProducerGroup]
	if len(chans) == 0 {
		// RocketMQ answers SYSTEM_ERROR naming the group.
		return response(remoting.ResponseSystemError, "the producer group[%s] not exist", h.ProducerGroup)
	}
	pc := wire.ProducerConnection{ConnectionSet: []wire.Connection{}}
	for _, ch := range chans {
		pc.ConnectionSet = append(pc.ConnectionSet, wire.Connection{ClientID: ch.ClientID, ClientAddr: ch.Conn.RemoteAddr(),
			Language: ch.Language, Version: ch.Version})
	}
	r := success()
	r.Body, _ = json.Marshal(pc)
	return r
}

func (c *Controller) processAllProducerInfo() *remoting.RemotingCommand {
	info := wire.ProducerTableInfo{Data: map[string][]wire.ProducerInfo{}}
	for g, chans := range c.clients.producerChannels() {
		for _, ch := range chans {
			info.Data[g] = append(info.Data[g], wire.ProducerInfo{ClientID: ch.ClientID, RemoteIP: ch.Conn.RemoteAddr(),
				Language: ch.Language, Version: ch.Version, LastUpdateTimestamp: ch.LastUpdate.UnixMilli()})
		}
	}
	r := success()
	r.Body, _ = json.Marshal(info)
	return r
}

// producerChannels copies the producer table: group → channels, sorted
// by client id.
func (m *clientManager) producerChannels() map[string][]clientChannel {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]clientChannel, len(m.producers))
	for g, chans := range m.producers {
		for _, ch := range chans {
			out[g] = append(out[g], *ch)
		}
		slices.SortFunc(out[g], func(a, b clientChannel) int { return strings.Compare(a.ClientID, b.ClientID) })
	}
	return out
}

// consumerRunningInfoTimeout bounds the client's answer to a forwarded
// GET_CONSUMER_RUNNING_INFO.
const consumerRunningInfoTimeout = 5 * time.Second

// processConsumerRunningInfo forwards GET_CONSUMER_RUNNING_INFO to the
// named client over its own connection and relays the answer, as
// RocketMQ's broker does (callConsumer).
func (c *Controller) processConsumerRunningInfo(ctx context.Context, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.GetConsumerRunningInfoRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	return c.callConsumer(ctx, remoting.NewRequest(remoting.RequestGetConsumerRunningInfo, &h, nil), h.ConsumerGroup, h.ClientID)
}

// callConsumer relays req to a client of group over its own connection and
// answers what the client answered (RocketMQ Broker2Client.callClient).
func (c *Controller) callConsumer(ctx context.Context, req *remoting.RemotingCommand, group, clientID string) *remoting.RemotingCommand {
	ch, ok := c.clients.consumerChannel(group, clientID)
	if !ok {
		return response(remoting.ResponseSystemError, "The Consumer <%s> <%s> not online", group, clientID)
	}
	cctx, cancel := context.WithTimeout(ctx, consumerRunningInfoTimeout)
	defer cancel()
	resp, err := ch.Conn.InvokeSync(cctx, req)
	if err != nil {
		c.log.Info("relayed request: client did not answer", zap.Int16("code", req.Code), zap.String("client", clientID), zap.Error(err))
		return response(remoting.ResponseSystemError, "invoke consumer <%s> <%s> exception: %v", group, clientID, err)
	}
	r := remoting.NewResponse(resp.Code, resp.Remark)
	r.Body = resp.Body
	return r
}

// processConsumeMessageDirectly relays CONSUME_MESSAGE_DIRECTLY (the
// dashboard's "resend" of a message, DLQ ones included) to the client with
// the message, read by its offset msgId, as the body.
func (c *Controller) processConsumeMessageDirectly(ctx context.Context, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.ConsumeMessageDirectlyResultRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	id, err := wire.ParseMessageID(h.MsgID)
	if err != nil {
		return response(remoting.ResponseSystemError, "msgId %q is not an offset msgId: %v", h.MsgID, err)
	}
	raw, err := c.rawMessage(id.Offset)
	if err != nil {
		return response(remoting.ResponseSystemError, "no message at offset %d (msgId %s): %v", id.Offset, h.MsgID, err)
	}
	// Bytes inside another message's body can read as a message of any
	// topic; relayed, the client would consume them as a message of that
	// topic nobody published there.
	m, _, err := wire.DecodeMessage(raw, false)
	if err != nil {
		return response(remoting.ResponseSystemError, "the message at offset %d (msgId %s) does not decode: %v", id.Offset, h.MsgID, err)
	}
	if _, _, refusal := c.storedUnit(m.Topic, m.QueueID, id.Offset); refusal != nil {
		return refusal
	}
	h.BrokerName = c.cfg.BrokerName
	return c.callConsumer(ctx, remoting.NewRequest(remoting.RequestConsumeMessageDirectly, &h, raw), h.ConsumerGroup, h.ClientID)
}

// maxQueryConsumeQueue bounds QUERY_CONSUME_QUEUE's count.
const maxQueryConsumeQueue = 1000

func (c *Controller) processQueryConsumeQueue(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.QueryConsumeQueueRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	cq := c.st.ConsumeQueues().Get(h.Topic, h.QueueID)
	if cq == nil {
		return response(remoting.ResponseSystemError, "%d@%s is not exist!", h.QueueID, h.Topic)
	}
	minOff, maxOff := cq.MinOffset(), cq.MaxOffset()
	body := wire.QueryConsumeQueueResponseBody{MaxQueueIndex: maxOff, MinQueueIndex: minOff, QueueData: []wire.ConsumeQueueData{}}
	if h.ConsumerGroup != "" {
		if sd, _, ok := c.clients.subscription(h.ConsumerGroup, h.Topic); ok {
			body.SubscriptionData = &sd
		} else {
			body.FilterData = fmt.Sprintf("%s@%s is not online!", h.ConsumerGroup, h.Topic) // RocketMQ's words
		}
	}
	count := min(max(int64(h.Count), 0), maxQueryConsumeQueue)
	r := success()
	notExist := fmt.Sprintf("Index %d of %d@%s is not exist!", h.Index, h.QueueID, h.Topic)
	if h.Index < minOff || h.Index >= maxOff {
		// RocketMQ's ConsumeQueue.iterateFrom has nothing for an index
		// outside [min, max) (below a retired head, negative, or at the
		// end): success with its remark and no units. Units from min
		// would be read as the index's, as the body gives them no offset.
		// The body, which RocketMQ leaves out, still carries the bounds,
		// as for an index a lost file held: a caller learns where the
		// queue starts from the same answer.
		r.Remark = notExist
		r.Body, _ = json.Marshal(body)
		return r
	}
	// The units answered are consecutive from the index, so a file missing
	// in the range ends them, as RocketMQ's iterator ends at its file's
	// end; none at all is RocketMQ's success with its remark for an index
	// no file holds.
	for i := h.Index; i < h.Index+count && i < maxOff; i++ {
		u, err := cq.Get(i)
		if errors.Is(err, store.ErrOutOfRange) {
			if len(body.QueueData) == 0 {
				r.Remark = notExist
			}
			break
		}
		if err != nil {
			return response(remoting.ResponseSystemError, "read %s/%d at %d: %v", h.Topic, h.QueueID, i, err)
		}
		body.QueueData = append(body.QueueData, wire.ConsumeQueueData{PhysicOffset: u.PhyOffset, PhysicSize: u.Size, TagsCode: u.TagsCode})
	}
	r.Body, _ = json.Marshal(body)
	return r
}

// processCloneGroupOffset copies srcGroup's committed offsets (on topic,
// or every topic) to destGroup through Raft. As RocketMQ's
// AdminBrokerProcessor.cloneGroupOffset, a topic this broker has no
// config for is left out (offsets can outlive their topic: a commit
// accepted while the topic was being deleted), and so, unless the
// request says the source group is offline, is a topic its online
// consumers do not subscribe to: its offsets there are not the group's
// current progress. RocketMQ only logs either skip; the answer's remark
// names the skipped topics too (clients ignore a success's remark;
// raftmq admin reports it).
func (c *Controller) processCloneGroupOffset(ctx context.Context, req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.CloneGroupOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	if r := checkGroup(h.DestGroup); r != nil {
		return r
	}
	if !c.rep.IsLeader() {
		// The skips and the copy are decided on the state and offsets a
		// follower may not have applied yet; nothing to copy must not
		// answer success from a member that cannot write.
		return c.notLeader()
	}
	// Checked to replicated without a delete of a topic in between
	// (offsetCoalescer.tables).
	c.offsets.tables.RLock()
	defer c.offsets.tables.RUnlock()
	offsets := c.groupOffsets(h.SrcGroup)
	if h.Topic != "" {
		// The named topic is checked whether or not the group has offsets
		// there, as RocketMQ checks it.
		offsets = map[string]map[int32]int64{h.Topic: offsets[h.Topic]}
	}
	st := c.rep.State()
	online, _ := c.clients.group(h.SrcGroup)
	var commits []OffsetCommit
	var noConfig, unsubscribed []string
	for t, qs := range offsets {
		if _, ok := st.Topic(t); !ok {
			noConfig = append(noConfig, t)
			continue
		}
		if _, subscribed := online.Subscriptions[t]; !h.Offline && len(online.Subscriptions) > 0 && !subscribed {
			unsubscribed = append(unsubscribed, t)
			continue
		}
		for q, off := range qs {
			commits = append(commits, OffsetCommit{Group: h.DestGroup, Topic: t, QueueID: q, Offset: off})
		}
	}
	r := success()
	var skips []string
	if len(noConfig) > 0 {
		slices.Sort(noConfig)
		c.log.Warn("clone group offset: no config for the topic on this broker; not cloned",
			zap.String("srcGroup", h.SrcGroup), zap.String("destGroup", h.DestGroup), zap.Strings("topics", noConfig))
		skips = append(skips, fmt.Sprintf("offsets of %s on %s not cloned: broker %s has no topic config there; "+
			"create the topic on this broker (mqadmin updateTopic) to clone them", h.SrcGroup, strings.Join(noConfig, ", "), c.cfg.BrokerName))
	}
	if len(unsubscribed) > 0 {
		slices.Sort(unsubscribed)
		c.log.Warn("clone group offset: source group online and not subscribed to the topic; not cloned (request not marked offline)",
			zap.String("srcGroup", h.SrcGroup), zap.String("destGroup", h.DestGroup), zap.Strings("topics", unsubscribed))
		skips = append(skips, fmt.Sprintf("offsets of %s on %s not cloned: the group is online and none of its consumers subscribes there; "+
			"mark the request offline (mqadmin cloneGroupOffset -o true) to clone them anyway",
			h.SrcGroup, strings.Join(unsubscribed, ", ")))
	}
	r.Remark = strings.Join(skips, "; ")
	if len(commits) == 0 {
		return r // RocketMQ clones nothing silently too
	}
	// The clone replaces the destination's offsets of these queues: its
	// consumers' queued commits of them must not land after it.
	if f := c.offsets.supersede(commits, func() *remoting.RemotingCommand {
		return c.replicate(ctx, "clone group offset", func(wctx context.Context) error { return c.rep.CommitOffsets(wctx, commits) })
	}); f != nil {
		return f
	}
	return r
}

// processTopicConsumeByWho answers the groups consuming topic: online
// subscribers and groups with committed offsets (GroupList).
func (c *Controller) processTopicConsumeByWho(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.QueryTopicConsumeByWhoRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	set := map[string]bool{}
	for _, g := range c.clients.groups() {
		if _, _, ok := c.clients.subscription(g, h.Topic); ok {
			set[g] = true
		}
	}
	for g, ts := range c.groupTopics() {
		if slices.Contains(ts, h.Topic) {
			set[g] = true
		}
	}
	gl := wire.GroupList{GroupList: []string{}}
	for g := range set {
		gl.GroupList = append(gl.GroupList, g)
	}
	slices.Sort(gl.GroupList)
	r := success()
	r.Body, _ = json.Marshal(gl)
	return r
}

func (c *Controller) processGetTopicConfig(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.GetTopicConfigRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	tc, ok := c.rep.State().Topic(h.Topic)
	if !ok {
		return response(remoting.ResponseTopicNotExist, "No topic in this broker. topic: %s", h.Topic)
	}
	r := success()
	r.Body, _ = json.Marshal(tc)
	return r
}

func (c *Controller) processGetGroupConfig(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	var h wire.GetSubscriptionGroupConfigRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err)
	}
	sg, ok := c.rep.State().SubscriptionGroup(h.Group)
	if !ok {
		return response(remoting.ResponseSubscriptionGroupNotExist, "No group in this broker. group: %s", h.Group)
	}
	r := success()
	r.Body, _ = json.Marshal(sg)
	return r
}

// processCleanExpiredCQ drops consume-queue files that only point below
// the CommitLog's first offset.
func (c *Controller) processCleanExpiredCQ() *remoting.RemotingCommand {
	n, err := c.st.ConsumeQueues().DeleteExpired(c.st.CommitLog().MinOffset())
	if err != nil {
		return response(remoting.ResponseSystemError, "clean expired consume queues: %v", err)
	}
	c.log.Info("cleaned expired consume queue files (admin request)", zap.Int("files", n))
	return success()
}

// processCleanUnusedTopic empties the consume queues of topics this
// group no longer has (deleted topics), keeping system topics: every file
// but a queue's last goes and its minimum moves to its maximum. The queues
// are not destroyed: the request reaches this member only, and queue
// offsets are assigned by every member's FSM, so a queue restarted at 0
// here would give a topic created again under the name other offsets on
// this member than on the others.
func (c *Controller) processCleanUnusedTopic() *remoting.RemotingCommand {
	topics := c.rep.State().Topics()
	var cleaned []string
	for _, cq := range c.st.ConsumeQueues().All() {
		t := cq.Topic()
		if _, ok := topics[t]; ok || isSystemTopic(t) ||
			strings.HasPrefix(t, "RMQ_SYS_") || strings.HasPrefix(t, "rmq_sys_") {
			continue
		}
		if _, err := cq.DeleteExpired(math.MaxInt64); err != nil {
			return response(remoting.ResponseSystemError, "clean unused topic %s: %v", t, err)
		}
		if !slices.Contains(cleaned, t) {
			cleaned = append(cleaned, t)
		}
	}
	c.log.Info("cleaned the consume queues of unused topics (admin request)", zap.Strings("topics", cleaned))
	return success()
}

// runtimeToolKeys adds the GET_BROKER_RUNTIME_INFO keys RocketMQ's tools
// parse (rocketmq-exporter's BrokerRuntimeStats reads every one of them
// as a number, mqadmin clusterList the rates and day totals). Thread-pool
// queue depths and page-cache lock times have no raftmq counterpart and
// are reported as 0.
func (c *Controller) runtimeToolKeys(t map[string]string) {
	now := time.Now()
	s := c.stats
	// Looked up, not created: VIEW_BROKER_STATS_DATA keeps answering "not
	// exist" for a broker that has stored or served nothing.
	putNums := s.lookup(wire.StatsBrokerPutNums, s.cluster)
	getNums := s.lookup(wire.StatsBrokerGetNums, s.cluster)
	tps := func(it *statsItem) string {
		if it == nil {
			return "0.00 0.00 0.00"
		}
		return fmt.Sprintf("%.2f %.2f %.2f", it.tps(10*time.Second, now), it.tps(time.Minute, now), it.tps(10*time.Minute, now))
	}
	putToday, putYest, getToday, getYest := s.morning()
	ratio, capacity := diskUsage(c.storeDir())
	earliest, _ := c.st.GetEarliestStoreTime()
	puts, size := s.putTimesTotal.Load(), s.putSizeTotal.Load()
	avg := 0.0
	if puts > 0 {
		avg = float64(size) / float64(puts)
	}
	cl := c.st.CommitLog()
	for k, v := range map[string]string{
		"brokerVersionDesc":                     brokerVersionDesc,
		"brokerVersion":                         strconv.Itoa(brokerVersionOrdinal),
		"bootTimestamp":                         strconv.FormatInt(s.boot.UnixMilli(), 10),
		"startAcceptSendRequestTimeStamp":       "0",
		"runtime":                               fmtRuntime(now.Sub(s.boot)),
		"putTps":                                tps(putNums),
		"getTransferedTps":                      tps(getNums),
		"getTransferredTps":                     tps(getNums),
		"getTotalTps":                           tps(s.pullTotal),
		"getFoundTps":                           tps(s.pullFound),
		"getMissTps":                            tps(s.pullMiss),
		"msgPutTotalTodayNow":                   strconv.FormatInt(s.putTimesTotal.Load(), 10),
		"msgGetTotalTodayNow":                   strconv.FormatInt(s.getTotal.Load(), 10),
		"msgPutTotalTodayMorning":               strconv.FormatInt(putToday, 10),
		"msgPutTotalYesterdayMorning":           strconv.FormatInt(putYest, 10),
		"msgGetTotalTodayMorning":               strconv.FormatInt(getToday, 10),
		"msgGetTotalYesterdayMorning":           strconv.FormatInt(getYest, 10),
		"putMessageTimesTotal":                  strconv.FormatInt(puts, 10),
		"putMessageSizeTotal":                   strconv.FormatInt(size, 10),
		"putMessageAverageSize":                 strconv.FormatFloat(avg, 'f', 2, 64),
		"putMessageEntireTimeMax":               "0",
		"getMessageEntireTimeMax":               "0",
		"putMessageDistributeTime":              "[<=0ms]:0 [0~10ms]:0 [10~50ms]:0 [50~100ms]:0 [100~200ms]:0 [200~500ms]:0 [500ms~1s]:0 [1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:0",
		"commitLogDiskRatio":                    strconv.FormatFloat(ratio, 'f', -1, 64),
		"consumeQueueDiskRatio":                 strconv.FormatFloat(ratio, 'f', -1, 64),
		"commitLogDirCapacity":                  capacity,
		"earliestMessageTimeStamp":              strconv.FormatInt(max(earliest, 0), 10),
		"remainHowManyDataToFlush":              "0 B",
		"remainTransientStoreBufferNumbs":       "0",
		"dispatchMaxBuffer":                     "0",
		"pageCacheLockTimeMills":                "0",
		"sendThreadPoolQueueSize":               "0",
		"sendThreadPoolQueueCapacity":           strconv.Itoa(c.cfg.SendThreadPoolQueueCapacity),
		"sendThreadPoolQueueHeadWaitTimeMills":  "0",
		"pullThreadPoolQueueSize":               "0",
		"pullThreadPoolQueueCapacity":           strconv.Itoa(c.cfg.PullThreadPoolQueueCapacity),
		"pullThreadPoolQueueHeadWaitTimeMills":  "0",
		"queryThreadPoolQueueSize":              "0",
		"queryThreadPoolQueueCapacity":          "10000",
		"queryThreadPoolQueueHeadWaitTimeMills": "0",
		"brokerActive":                          strconv.FormatBool(c.rep.IsLeader()),
		"msgPutTotalTodayNowBytes":              strconv.FormatInt(size, 10),
		"commitLogMaxOffsetPhy":                 strconv.FormatInt(cl.MaxOffset(), 10),
	} {
		if _, set := t[k]; !set {
			t[k] = v
		}
	}
}

// brokerVersionDesc and brokerVersionOrdinal name the RocketMQ protocol
// level raftmq speaks (MQVersion V4_9_4; brokerVersion is its ordinal, as RocketMQ brokers report).
const (
	brokerVersionDesc    = "V4_9_4"
	brokerVersionOrdinal = 401
)

// fmtRuntime is RocketMQ's runtime key: "[ d days, h hours, m minutes, s seconds ]".
func fmtRuntime(d time.Duration) string {
	s := int64(d / time.Second)
	return fmt.Sprintf("[ %d days, %d hours, %d minutes, %d seconds ]", s/86400, s/3600%24, s/60%60, s%60)
}

// diskUsage returns the used ratio (0..1) of dir's file system, as the
// disk guards count it, and RocketMQ's commitLogDirCapacity text ("Total :
// 50.00 GiB, Free : 20.00 GiB.": the file system's size and its unallocated
// blocks, Java's getTotalSpace and getFreeSpace).
func diskUsage(dir string) (float64, string) {
	var st unix.Statfs_t
	if dir == "" || unix.Statfs(dir, &st) != nil {
		return 0, "Total : 0.00 GiB, Free : 0.00 GiB."
	}
	ratio := 0.0
	if used, total := storage.StatfsUsage(&st); total > 0 {
		ratio = float64(used) / float64(total)
	}
	bs := uint64(st.Bsize)
	const gib = 1 << 30
	return ratio, fmt.Sprintf("Total : %.2f GiB, Free : %.2f GiB.", float64(st.Blocks*bs)/gib, float64(st.Bfree*bs)/gib)
}
