package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Transactional messages (RocketMQ 4.9 TransactionalMessageBridge,
// EndTransactionProcessor, TransactionalMessageCheckService).
//
// A half message (sysflag prepared or TRAN_MSG=true) is stored as a normal
// message in RMQ_SYS_TRANS_HALF_TOPIC queue 0 with its real topic and queue
// in REAL_TOPIC / REAL_QID (toHalf), so consumers of the real topic never
// see it. END_TRANSACTION (37) names the half by its CommitLog offset; the
// leader reads it back, builds the real message (commit) and the op record
// in RMQ_SYS_TRANS_OP_HALF_TOPIC, and proposes them as ONE CmdTxnEnd entry.
// Every replica's FSM dispatches that entry only if the half is not yet
// decided in the replicated txnTable (txn_state.go), and then marks it
// decided: a commit becomes visible exactly once whatever the number of
// END_TRANSACTIONs, their concurrency or the leader changes in between.
//
// The check-back walk (txnService) runs on the leader every
// transactionCheckInterval: it reads the half queue from the replicated
// floor, skips decided halves, stops at the first half younger than
// transactionTimeOut, sends CHECK_TRANSACTION_STATE (39) for the others to
// a producer connection of the half's group, discards a half checked
// transactionCheckMax times, and replicates the round (CmdTxnCheck: new
// floor, halves checked, halves discarded). A new leader resumes from the
// replicated floor and check counts; a check whose round was not
// replicated is sent again, which is harmless (the producer answers with
// an END_TRANSACTION and a decided half ignores it).

// TransactionConfig holds RocketMQ's transaction check-back keys.
type TransactionConfig struct {
	// TransactionTimeOut is how old an undecided half must be before it
	// is checked back (6 s; a half's CHECK_IMMUNITY_TIME_IN_SECONDS
	// property may lengthen it for that half, not shorten it: the walk
	// stops at the first half younger than this). The walk caps that
	// property at immunityCap, since an immune half holds the walk's floor
	// and every half decided above it stays in the replicated table.
	TransactionTimeOut time.Duration `prop:"transactionTimeOut"`
	// TransactionCheckInterval is the period of the check walk (60 s).
	TransactionCheckInterval time.Duration `prop:"transactionCheckInterval"`
	// TransactionCheckMax is how many check-backs a half gets before it is
	// discarded (15): logged, counted in
	// raftmq_broker_transaction_discarded_total, never delivered.
	TransactionCheckMax int `prop:"transactionCheckMax"`
	// RejectTransactionMessage refuses half messages with NO_PERMISSION
	// (off; RocketMQ's key of the same name).
	RejectTransactionMessage bool `prop:"rejectTransactionMessage"`
}

func defaultTransactionConfig() TransactionConfig {
	return TransactionConfig{TransactionTimeOut: 6 * time.Second, TransactionCheckInterval: 60 * time.Second, TransactionCheckMax: 15}
}

func (t TransactionConfig) validate() error {
	switch {
	case t.TransactionTimeOut <= 0:
		return fmt.Errorf("%w: transactionTimeOut: must be positive", ErrInvalidBrokerConfig)
	case t.TransactionCheckInterval <= 0:
		return fmt.Errorf("%w: transactionCheckInterval: must be positive", ErrInvalidBrokerConfig)
	case t.TransactionCheckMax < 1:
		return fmt.Errorf("%w: transactionCheckMax: must be at least 1", ErrInvalidBrokerConfig)
	}
	return nil
}

// immunityCap is the longest CHECK_IMMUNITY_TIME_IN_SECONDS the check walk
// honours: transactionTimeOut, or transactionCheckMax ×
// transactionCheckInterval if longer. RocketMQ accepts any value, so a
// half asking for more is stored and checked back once the cap has passed.
func (t TransactionConfig) immunityCap() time.Duration {
	if t.TransactionCheckInterval > 0 && int64(t.TransactionCheckMax) > int64(math.MaxInt64/t.TransactionCheckInterval) {
		return math.MaxInt64 // a "never discard" transactionCheckMax: no cap
	}
	return max(t.TransactionTimeOut, time.Duration(t.TransactionCheckMax)*t.TransactionCheckInterval)
}

// immunitySeconds parses a CHECK_IMMUNITY_TIME_IN_SECONDS value; false
// means none, or one the walk ignores (the half gets transactionTimeOut).
func immunitySeconds(v string) (int64, bool) {
	if v == "" {
		return 0, false
	}
	sec, err := strconv.ParseInt(v, 10, 64)
	return sec, err == nil && sec > 0
}

// toHalf rewrites a half message for TopicTransHalf (RocketMQ
// parseHalfMessageInner): the real topic and queue go to properties, the
// transaction bits are cleared so the half gets a ConsumeQueue unit in the
// half topic.
func (c *Controller) toHalf(ctx context.Context, m *store.Message, producerGroup string) *remoting.RemotingCommand {
	if _, ok := c.rep.(transactionReplica); !ok {
		return response(remoting.ResponseNoPermission,
			"broker %s refuses transactional (half) messages: its replica cannot decide transactions", c.cfg.BrokerName)
	}
	if c.cfg.RejectTransactionMessage {
		return response(remoting.ResponseNoPermission,
			"broker %s refuses transactional (half) messages: rejectTransactionMessage=true", c.cfg.BrokerName)
	}
	if m.Properties == nil {
		m.Properties = wire.ParseProperties(m.EncodedProperties)
		m.EncodedProperties = ""
	}
	// The commit applies the DELAY and timer properties and would refuse a
	// bad one where nobody hears it (END_TRANSACTION is one-way): the
	// half would be acknowledged and never delivered.
	if _, r := delayLevel(m.Properties[wire.PropertyDelayTimeLevel]); r != nil {
		return r
	}
	if _, _, r := c.timerDue(m.Properties); r != nil {
		return r
	}
	m.Properties[wire.PropertyRealTopic] = m.Topic
	m.Properties[wire.PropertyRealQueueID] = strconv.Itoa(int(m.QueueID))
	m.Properties[wire.PropertyTransactionPrep] = "true"
	if m.Properties[wire.PropertyProducerGroup] == "" {
		m.Properties[wire.PropertyProducerGroup] = producerGroup
	}
	c.txn.noteImmunity(m.Properties[wire.PropertyProducerGroup], m.Properties[wire.PropertyCheckImmunityTime])
	// The idempotent producer's sequence is per real queue; kept, it
	// would be deduplicated against the one stream of the half queue.
	// Halves are not deduplicated: the decided set makes each half's
	// commit count once, and a half stored twice is at-least-once.
	delete(m.Properties, wire.PropertyProducerID)
	delete(m.Properties, wire.PropertySequence)
	m.Topic, m.QueueID = wire.TopicTransHalf, 0
	m.SysFlag &^= wire.SysFlagTransMask
	if _, err := c.ensureTopic(ctx, wire.TopicTransHalf, 1, 0, false); err != nil {
		return c.writeError("create "+wire.TopicTransHalf, err)
	}
	return nil
}

// uncommittedTransaction reports whether a stored message's sysFlag marks
// it a prepared or rolled-back transaction message: the store gives it no
// ConsumeQueue unit, so it is never delivered.
func uncommittedTransaction(sysFlag int32) bool {
	t := sysFlag & wire.SysFlagTransMask
	return t == wire.SysFlagTransPrepared || t == wire.SysFlagTransRollback
}

// processEndTransaction is END_TRANSACTION (37). The official clients send
// it one-way, so the answer only reaches callers that wait for it (our
// SDK, tools); a refusal is also logged, at most once a second.
func (c *Controller) processEndTransaction(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.EndTransactionRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	tr, ok := c.rep.(transactionReplica)
	if !ok {
		return response(remoting.ResponseRequestCodeNotSupported, "broker %s cannot decide transactions", c.cfg.BrokerName), nil
	}
	if !c.rep.IsLeader() {
		return c.notLeader(), nil
	}
	var commit bool
	switch h.CommitOrRollback {
	case 0: // TRANSACTION_NOT_TYPE: the producer does not know yet; the check-back asks again.
		return success(), nil
	case wire.SysFlagTransCommit:
		commit = true
	case wire.SysFlagTransRollback:
	default:
		return response(remoting.ResponseSystemError, "commitOrRollback %d is none of 0 (unknown), 8 (commit), 12 (rollback)", h.CommitOrRollback), nil
	}
	half, resp := c.lookHalf(conn, req, &h)
	if resp != nil && resp.Code == remoting.ResponseNoPermission {
		return resp, nil // counted and logged by the ACL check
	}
	if resp != nil {
		if ok, held := c.txnRefusedWarn.Allow(); ok {
			c.log.Warn("END_TRANSACTION refused", zap.String("producerGroup", h.ProducerGroup),
				zap.Int64("commitLogOffset", h.CommitLogOffset), zap.String("msgId", h.MsgID), zap.String("why", resp.Remark),
				zap.Int64("refusalsNotLogged", held))
		}
		return resp, nil
	}
	if tr.TxnDecided(h.CommitLogOffset) {
		return c.decidedAnswer(tr, &h, commit), nil
	}
	msgs := make([]*store.Message, 0, 2)
	if commit {
		m := c.committedMessage(half, h.CommitLogOffset)
		if _, err := c.ensureTopic(ctx, m.Topic, c.live().DefaultTopicQueueNums, 0, false); err != nil {
			return c.writeError("create "+m.Topic, err), nil
		}
		// Delay levels and timer properties take effect now, as on a
		// plain send (the half kept them).
		if r := c.applyDelay(ctx, m); r != nil {
			return r, nil
		}
		if r := c.applyTimer(ctx, m); r != nil {
			return r, nil
		}
		msgs = append(msgs, m)
	}
	if _, err := c.ensureTopic(ctx, wire.TopicTransOpHalf, 1, 0, false); err != nil {
		return c.writeError("create "+wire.TopicTransOpHalf, err), nil
	}
	msgs = append(msgs, c.opRecord(half, h.TranStateTableOffset))
	wctx, cancel := c.writeCtx(ctx)
	defer cancel()
	applied, err := tr.EndTransaction(wctx, h.CommitLogOffset, commit, msgs)
	if err != nil && endOutcomeUnknown(err) {
		c.log.Warn("END_TRANSACTION outcome unknown; a repeat or the check-back settles it", zap.String("producerGroup", h.ProducerGroup),
			zap.Int64("commitLogOffset", h.CommitLogOffset), zap.Error(err))
		// SYSTEM_BUSY: "try again later" to every client. Not
		// SYSTEM_ERROR, which the SDK reads as a refusal: the decision
		// may be recorded, and a repeat is harmless (a decided half
		// ignores it).
		return response(remoting.ResponseSystemBusy,
			"end transaction of %s: outcome unknown (%v): the decision may still take effect; send it again (a decided half ignores a repeat) or leave it to the check-back",
			h.MsgID, err), nil
	}
	if err != nil {
		c.log.Warn("END_TRANSACTION not replicated; the check-back will ask again", zap.String("producerGroup", h.ProducerGroup),
			zap.Int64("commitLogOffset", h.CommitLogOffset), zap.Error(err))
		return c.writeError("end transaction", err), nil
	}
	switch {
	case !applied:
		return c.decidedAnswer(tr, &h, commit), nil
	case commit:
		c.txn.commits.Inc()
		c.countPut(msgs[:1])
	default:
		c.txn.rollbacks.Inc()
	}
	return success(), nil
}

// endOutcomeUnknown reports whether a CmdTxnEnd write failed without
// saying whether the decision took effect: a write that timed out may
// still commit, and one this member failed to apply is committed (the
// other members apply it).
func endOutcomeUnknown(err error) bool {
	var stopped *ApplyStoppedError
	return errors.Is(err, ErrApplyTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &stopped)
}

// decidedAnswer answers an END_TRANSACTION for a half already decided: it
// changes nothing, which is success unless it asks to commit a half the
// check walk discarded or a rollback (a check-back's answer, say) rolled
// back: that message is never delivered, so the commit must not be
// acknowledged.
func (c *Controller) decidedAnswer(tr transactionReplica, h *wire.EndTransactionRequestHeader, commit bool) *remoting.RemotingCommand {
	c.txn.repeated.Inc()
	if commit && tr.TxnDiscarded(h.CommitLogOffset) {
		if ok, held := c.txnRefusedWarn.Allow(); ok {
			c.log.Warn("END_TRANSACTION commit refused: the half was discarded", zap.String("producerGroup", h.ProducerGroup),
				zap.Int64("commitLogOffset", h.CommitLogOffset), zap.String("msgId", h.MsgID), zap.Int64("refusalsNotLogged", held))
		}
		return response(remoting.ResponseSystemError,
			"the half message %s was discarded after transactionCheckMax (%d) check-backs without an answer: it is never delivered and cannot be committed",
			h.MsgID, c.cfg.TransactionCheckMax)
	}
	if commit && tr.TxnRolledBack(h.CommitLogOffset) {
		if ok, held := c.txnRefusedWarn.Allow(); ok {
			c.log.Warn("END_TRANSACTION commit refused: the half was rolled back", zap.String("producerGroup", h.ProducerGroup),
				zap.Int64("commitLogOffset", h.CommitLogOffset), zap.String("msgId", h.MsgID), zap.Int64("refusalsNotLogged", held))
		}
		return response(remoting.ResponseSystemError,
			"the transaction of half message %s was already rolled back: it is never delivered and cannot be committed", h.MsgID)
	}
	return response(remoting.ResponseSuccess, "the transaction of %s was already decided", h.MsgID)
}

// lookHalf reads the half an END_TRANSACTION names and checks that the
// account may publish to its real topic (aclEnable) and that it is a half
// of the request's producer group at the request's half-queue offset
// (RocketMQ checkPrepareMessage).
func (c *Controller) lookHalf(conn *remoting.Conn, req *remoting.RemotingCommand, h *wire.EndTransactionRequestHeader) (*store.Message, *remoting.RemotingCommand) {
	m, err := c.st.LookMessageByOffset(h.CommitLogOffset)
	if err != nil {
		return nil, response(remoting.ResponseSystemError, "no half message at commitLogOffset %d: %v", h.CommitLogOffset, err)
	}
	if m.Topic != wire.TopicTransHalf {
		return nil, response(remoting.ResponseSystemError, "the message at commitLogOffset %d is in topic %s, not a half message",
			h.CommitLogOffset, m.Topic)
	}
	if r := c.aclHalfTopic(conn, req, m); r != nil {
		return nil, r
	}
	if g := m.Properties[wire.PropertyProducerGroup]; g != h.ProducerGroup {
		return nil, response(remoting.ResponseSystemError, "the half message at commitLogOffset %d belongs to producer group %q, not %q",
			h.CommitLogOffset, g, h.ProducerGroup)
	}
	// The stored QUEUEOFFSET is not the half's (the FSM assigns it at
	// apply), so the half queue says where it is. Every half has a unit
	// there before it is acknowledged: none means the bytes are not a
	// stored half (a body can carry a valid-looking one), unless the queue
	// retired its units past there (storedUnit).
	qo, ok, refusal := c.storedUnit(wire.TopicTransHalf, 0, h.CommitLogOffset)
	if refusal != nil {
		return nil, refusal
	}
	if ok && qo != h.TranStateTableOffset {
		return nil, response(remoting.ResponseSystemError, "the half message at commitLogOffset %d has tranStateTableOffset %d, not %d",
			h.CommitLogOffset, qo, h.TranStateTableOffset)
	}
	return m, nil
}

// committedMessage is the real message of a committed half (RocketMQ
// endMessageTransaction): real topic and queue, the producer's properties
// and keys, the commit sysflag and the half's offset. TRAN_MSG goes, as
// RocketMQ's EndTransactionProcessor clears it: a consumer that forwards
// the message it received (or an older client re-sending it to the retry
// topic) would otherwise send a new half of the original producer group,
// acknowledged and never delivered.
func (c *Controller) committedMessage(half *store.Message, halfOffset int64) *store.Message {
	props := copyProps(half.Properties)
	topic := props[wire.PropertyRealTopic]
	qid, _ := strconv.Atoi(props[wire.PropertyRealQueueID])
	for _, k := range []string{wire.PropertyRealTopic, wire.PropertyRealQueueID, wire.PropertyTransactionCheckTimes, wire.PropertyCRC32,
		wire.PropertyTransactionPrep} {
		delete(props, k)
	}
	return &store.Message{
		Topic: topic, QueueID: int32(qid), Flag: half.Flag, Body: half.Body, Properties: props,
		SysFlag:       half.SysFlag&^(wire.SysFlagBornHostV6|wire.SysFlagStoreHostV6|wire.SysFlagTransMask) | wire.SysFlagTransCommit,
		BornTimestamp: half.BornTimestamp, BornHost: half.BornHost, StoreHost: c.storeHost,
		ReconsumeTimes: half.ReconsumeTimes, PreparedTransactionOffset: halfOffset,
	}
}

// opRecord is the op message that marks a half decided (RocketMQ
// deletePrepareMessage): tag "d", body the half's queue offset.
func (c *Controller) opRecord(half *store.Message, halfQueueOffset int64) *store.Message {
	return &store.Message{
		Topic: wire.TopicTransOpHalf, QueueID: 0, Body: []byte(strconv.FormatInt(halfQueueOffset, 10)),
		Properties:    map[string]string{wire.PropertyTags: wire.TransOpRemoveTag},
		BornTimestamp: time.Now().UnixMilli(), BornHost: half.BornHost, StoreHost: c.storeHost,
	}
}

// txnService is the leader's check-back walk and the transaction metrics.
type txnService struct {
	c          *Controller
	batchLimit int

	commits, rollbacks, repeated, checks, discarded prometheus.Counter

	immunityMu sync.Mutex
	// immunityLogged holds the producer groups already told that their
	// CHECK_IMMUNITY_TIME_IN_SECONDS is capped (at most
	// maxImmunityLoggedGroups, then forgotten and told again).
	immunityLogged map[string]struct{}
}

// maxImmunityLoggedGroups bounds txnService.immunityLogged: producer group
// names come from clients.
const maxImmunityLoggedGroups = 1024

func newTxnService(c *Controller) *txnService {
	s := &txnService{c: c, batchLimit: 64, immunityLogged: map[string]struct{}{}}
	counter := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: name, Help: help})
		c.metrics.reg.MustRegister(x)
		return x
	}
	s.commits = counter("transaction_commits_total", "Half messages committed by END_TRANSACTION (made visible once).")
	s.rollbacks = counter("transaction_rollbacks_total", "Half messages rolled back by END_TRANSACTION.")
	s.repeated = counter("transaction_repeated_ends_total", "END_TRANSACTIONs for halves already decided (ignored).")
	s.checks = counter("transaction_checks_total", "CHECK_TRANSACTION_STATE requests sent to producers.")
	s.discarded = counter("transaction_discarded_total", "Half messages discarded after transactionCheckMax check-backs.")
	if tr, ok := c.rep.(transactionReplica); ok {
		gauge := func(name, help string, f func() float64) {
			c.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: name, Help: help}, f))
		}
		gauge("transaction_decided_halves", "Decided halves the replicated transaction table holds (bounded by the check walk's floor).",
			func() float64 { d, _ := tr.TxnSizes(); return float64(d) })
		gauge("transaction_checking_halves", "Undecided halves checked back at least once.",
			func() float64 { _, n := tr.TxnSizes(); return float64(n) })
	}
	return s
}

func (s *txnService) run() {
	t := time.NewTicker(s.c.cfg.TransactionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.c.quit:
			return
		case now := <-t.C:
			if err := s.round(now); err != nil {
				s.c.log.Warn("transaction check round failed; retrying next round", zap.Error(err))
			}
		}
	}
}

// maxTxnChecksPerRound bounds the check-backs and discards of one round,
// so one CmdTxnCheck entry and one burst of requests to the producers stay
// small when many halves are undecided at once (producers gone).
const maxTxnChecksPerRound = 4096

// round walks the half queue once (leader only) and replicates what it
// did.
func (s *txnService) round(now time.Time) error {
	tr, ok := s.c.rep.(transactionReplica)
	if !ok || !s.c.rep.IsLeader() {
		return nil
	}
	if _, ok := s.c.rep.State().Topic(wire.TopicTransHalf); !ok {
		return nil
	}
	floor := tr.TxnFloor()
	prog := &txnCheck{FloorQueue: floor.FloorQueue, FloorPhy: floor.FloorPhy}
	off := max(floor.FloorQueue, s.c.st.GetMinOffsetInQueue(wire.TopicTransHalf, 0))
	// Halves below the queue's minimum are gone (retention): no
	// END_TRANSACTION can find them, so the floor passes them too.
	removed := off > floor.FloorQueue
	prog.FloorQueue = off
	maxOff := s.c.st.GetMaxOffsetInQueue(wire.TopicTransHalf, 0)
	prefix := true // every half before off is decided, discarded or removed
	// discards are logged and counted once the progress that discards
	// them is applied: a round whose update fails walks them again.
	var discards [][]zap.Field
	var err error
walk:
	for off < maxOff {
		var res store.GetMessageResult
		res, err = s.c.st.GetMessage("", wire.TopicTransHalf, 0, off, s.batchLimit, nil)
		if err != nil {
			break
		}
		if res.Status != store.Found {
			if res.NextBeginOffset <= off {
				break
			}
			off = res.NextBeginOffset
			if prefix {
				prog.FloorQueue = off
			}
			continue
		}
		for i, b := range res.Messages {
			if len(prog.Checked)+len(prog.Discarded) >= maxTxnChecksPerRound {
				break walk // the next round goes on from the floor
			}
			qo := res.QueueOffsets[i]
			m, _, derr := wire.DecodeMessage(b, true)
			if derr != nil {
				err = derr
				break walk
			}
			phy := m.PhysicalOffset
			if removed {
				prog.FloorPhy, removed = max(prog.FloorPhy, phy), false
			}
			age := now.Sub(time.UnixMilli(m.StoreTimestamp))
			passed := false
			switch {
			case tr.TxnDecided(phy):
				passed = true
			case age < s.c.cfg.TransactionTimeOut:
				break walk // the queue is in store order: the rest is younger
			case age < s.timeout(m):
				// Its own CHECK_IMMUNITY_TIME_IN_SECONDS is longer: skip it
				// this round, it holds the floor.
			case tr.TxnChecks(phy) >= int32(s.c.cfg.TransactionCheckMax):
				passed = true
				prog.Discarded = append(prog.Discarded, phy)
				discards = append(discards, []zap.Field{
					zap.String("producerGroup", m.Properties[wire.PropertyProducerGroup]), zap.String("msgId", m.UniqKey()),
					zap.String("topic", m.Properties[wire.PropertyRealTopic]), zap.Int64("commitLogOffset", phy),
					zap.Int("transactionCheckMax", s.c.cfg.TransactionCheckMax)})
			default:
				s.sendCheck(m, qo)
				prog.Checked = append(prog.Checked, phy)
			}
			if prefix && passed {
				prog.FloorQueue, prog.FloorPhy = qo+1, phy+1
			} else {
				prefix = false
			}
			off = qo + 1
		}
	}
	if prog.FloorQueue == floor.FloorQueue && prog.FloorPhy == floor.FloorPhy && len(prog.Checked) == 0 && len(prog.Discarded) == 0 {
		return err
	}
	ctx, cancel := context.WithTimeout(s.c.ctx, s.c.cfg.ApplyTimeout)
	defer cancel()
	if uerr := tr.UpdateTxnCheck(ctx, prog); uerr != nil {
		return uerr
	}
	for _, f := range discards {
		s.discarded.Inc()
		s.c.log.Warn("transactional half message discarded after transactionCheckMax check-backs; it is never delivered", f...)
	}
	return err
}

// timeout is a half's transaction timeout: its CHECK_IMMUNITY_TIME_IN_SECONDS
// if set, at most immunityCap, else transactionTimeOut (round only checks
// it for halves at least transactionTimeOut old).
func (s *txnService) timeout(m *store.Message) time.Duration {
	sec, ok := immunitySeconds(m.Properties[wire.PropertyCheckImmunityTime])
	if !ok {
		return s.c.cfg.TransactionTimeOut
	}
	limit := s.c.cfg.immunityCap()
	if sec > int64(limit/time.Second) {
		return limit
	}
	return time.Duration(sec) * time.Second
}

// noteImmunity logs, once per producer group, that a half's
// CHECK_IMMUNITY_TIME_IN_SECONDS is above immunityCap and will be capped:
// the producer then gets its check-back earlier than it asked.
func (s *txnService) noteImmunity(group, v string) {
	group = group[:min(len(group), 255)] // client-chosen: bound the set's bytes
	sec, ok := immunitySeconds(v)
	limit := s.c.cfg.immunityCap()
	if !ok || sec <= int64(limit/time.Second) {
		return
	}
	s.immunityMu.Lock()
	_, seen := s.immunityLogged[group]
	if !seen {
		if len(s.immunityLogged) >= maxImmunityLoggedGroups {
			clear(s.immunityLogged)
		}
		s.immunityLogged[group] = struct{}{}
	}
	s.immunityMu.Unlock()
	if seen {
		return
	}
	s.c.log.Warn("a transactional half's check immunity is capped at max(transactionTimeOut, transactionCheckMax × transactionCheckInterval): it is checked back after the cap, not after the time it asks for",
		zap.String("producerGroup", group), zap.String("property", wire.PropertyCheckImmunityTime), zap.Int64("seconds", sec),
		zap.Duration("cap", limit), zap.Duration("transactionTimeOut", s.c.cfg.TransactionTimeOut),
		zap.Int("transactionCheckMax", s.c.cfg.TransactionCheckMax), zap.Duration("transactionCheckInterval", s.c.cfg.TransactionCheckInterval))
}

// sendCheck sends CHECK_TRANSACTION_STATE one-way to a live producer
// connection of the half's group, with the half in its real topic and
// queue as the body (RocketMQ sendCheckMessage). No connected producer
// only logs: the check counts, as in RocketMQ.
func (s *txnService) sendCheck(half *store.Message, queueOffset int64) {
	group := half.Properties[wire.PropertyProducerGroup]
	ch := s.c.clients.producerChannel(group)
	if ch == nil {
		s.c.log.Debug("no producer of the group is connected; the half is checked again next round",
			zap.String("producerGroup", group), zap.String("msgId", half.UniqKey()))
		return
	}
	m := *half
	m.Properties = copyProps(half.Properties)
	m.Topic = m.Properties[wire.PropertyRealTopic]
	qid, _ := strconv.Atoi(m.Properties[wire.PropertyRealQueueID])
	m.QueueID, m.QueueOffset = int32(qid), queueOffset
	delete(m.Properties, wire.PropertyCRC32)
	body, err := wire.AppendMessage(nil, &m)
	if err != nil {
		s.c.log.Warn("cannot encode a half message for its check-back", zap.Int64("commitLogOffset", half.PhysicalOffset), zap.Error(err))
		return
	}
	txID := half.Properties[wire.PropertyTransactionID]
	if txID == "" {
		txID = half.UniqKey()
	}
	req := remoting.NewRequest(remoting.RequestCheckTransactionState, &wire.CheckTransactionStateRequestHeader{
		TranStateTableOffset: queueOffset, CommitLogOffset: half.PhysicalOffset, MsgID: half.UniqKey(),
		TransactionID: txID, OffsetMsgID: half.MsgID(),
	}, body)
	req.Flag |= remoting.FlagOneway
	ctx, cancel := context.WithTimeout(s.c.ctx, time.Second)
	defer cancel()
	if err := ch.Conn.InvokeOneway(ctx, req); err != nil {
		s.c.log.Debug("check-back not sent", zap.String("producerGroup", group), zap.String("client", ch.ClientID), zap.Error(err))
		return
	}
	s.checks.Inc()
}

// producerChannel picks the producer of group that heartbeat last on a
// connection still open (RocketMQ getAvailableChannel).
func (m *clientManager) producerChannel(group string) *clientChannel {
	m.mu.Lock()
	defer m.mu.Unlock()
	var best *clientChannel
	for _, ch := range m.producers[group] {
		if ch.Conn == nil || ch.Conn.Closed() {
			continue
		}
		if best == nil || ch.LastUpdate.After(best.LastUpdate) {
			best = ch
		}
	}
	if best == nil {
		return nil
	}
	cp := *best
	return &cp
}
