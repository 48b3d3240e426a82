package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Transactional messages (RocketMQ TransactionMQProducer). The producer
// sends a half message, which the broker stores invisibly; it then runs
// the local transaction (TransactionListener.ExecuteLocalTransaction) and
// sends END_TRANSACTION with the outcome. Until a half is decided the
// broker asks the producer group again (CHECK_TRANSACTION_STATE, served
// by CheckLocalTransaction) on a connection of any producer of the group
// that heartbeats it; the answer goes back on the connection the check
// came on. Unlike RocketMQ's clients, which send END_TRANSACTION one-way
// to the route's master, this producer waits for the answer and follows a
// not-leader hint, so a commit still lands when the leader changed
// between the half and the decision (a Raft group's members hold the half
// at the same CommitLog offset); and it heartbeats every member of its
// brokers' groups, so a new leader can check its halves at once.

// LocalTransactionState is a local transaction's outcome.
type LocalTransactionState int

const (
	// TransactionUnknown leaves the half undecided: the broker checks
	// back after its transactionTimeOut.
	TransactionUnknown LocalTransactionState = iota
	// TransactionCommit makes the message visible to consumers.
	TransactionCommit
	// TransactionRollback discards the message.
	TransactionRollback
)

// String names the state.
func (s LocalTransactionState) String() string {
	switch s {
	case TransactionCommit:
		return "COMMIT"
	case TransactionRollback:
		return "ROLLBACK"
	}
	return "UNKNOWN"
}

// wireFlag is END_TRANSACTION's commitOrRollback value.
func (s LocalTransactionState) wireFlag() int32 {
	switch s {
	case TransactionCommit:
		return wire.SysFlagTransCommit
	case TransactionRollback:
		return wire.SysFlagTransRollback
	}
	return 0
}

// TransactionListener runs and checks local transactions. Both methods may
// run concurrently; a panic counts as TransactionUnknown.
type TransactionListener interface {
	// ExecuteLocalTransaction runs the local transaction of msg after its
	// half message was stored; it is called on the goroutine of
	// SendMessageInTransaction, with its ctx. msg carries the half's
	// UNIQ_KEY (wire.PropertyUniqKey), the MsgID CheckLocalTransaction's
	// msg has.
	ExecuteLocalTransaction(ctx context.Context, msg *Message) LocalTransactionState
	// CheckLocalTransaction answers a broker's check-back for a half whose
	// outcome it did not learn (TransactionUnknown, a lost decision, a
	// producer that died); msg is the half in its real topic, its MsgID the
	// UNIQ_KEY SendMessageInTransaction returned. A half whose body cannot
	// be decoded (see UndecodableMessageError) is checked all the same,
	// with its body as stored and wire.SysFlagCompressed still set in
	// msg.SysFlag: left unanswered, the broker would discard it.
	CheckLocalTransaction(ctx context.Context, msg *MessageExt) LocalTransactionState
}

// TransactionSendResult is SendMessageInTransaction's outcome.
type TransactionSendResult struct {
	*SendResult
	// State is what the local transaction returned.
	State LocalTransactionState
	// EndErr is why END_TRANSACTION was not recorded, as far as the
	// producer knows (nil when it was, or when State is
	// TransactionUnknown, for which none is sent); the broker's check-back
	// then asks CheckLocalTransaction. errors.Is(EndErr,
	// ErrTransactionOutcomeUnknown) means no answer said (a replication
	// that timed out, no answer, no leader): it may have been recorded.
	// Otherwise a *BrokerError says why the broker did not record it: for
	// a half it has not decided (a full disk, a store closing), the
	// check-back asks CheckLocalTransaction again and its answer decides;
	// a commit of a half already discarded, or rolled back by an answer
	// to a check-back, is refused for good (its remark says which) and the
	// message is never delivered.
	EndErr error
}

// TransactionProducer is a Producer that sends transactional messages.
// Build it with NewTransactionProducer, Start it, Close it; its Producer
// (plain sends) is usable as well.
type TransactionProducer struct {
	*Producer
	listener TransactionListener
	checks   chan txnCheck

	// mu is a leaf: no Producer or remoting call is made under it.
	mu     sync.Mutex
	ctx    context.Context // guarded by mu; set by Start
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// checker holds the check-back worker, whose listener may call Close.
	checker selfWaits
}

// txnCheck is one check-back waiting for the listener.
type txnCheck struct {
	conn *remoting.Conn
	hdr  wire.CheckTransactionStateRequestHeader
	msg  *MessageExt
}

// maxPendingChecks bounds the check-backs queued for the listener; more are
// dropped (the broker asks again next round).
const maxPendingChecks = 2000

// NewTransactionProducer builds a transaction producer; opts are the
// Producer's (ProducerGroup names the group the broker checks back).
func NewTransactionProducer(listener TransactionListener, opts ...ProducerOpt) (*TransactionProducer, error) {
	if listener == nil {
		return nil, fmt.Errorf("%w: nil TransactionListener", ErrInvalidOption)
	}
	p, err := NewProducer(opts...)
	if err != nil {
		return nil, err
	}
	if p.cfg.idempotent {
		return nil, fmt.Errorf("%w: Idempotent cannot be used by a transaction producer: brokers do not deduplicate half messages by sequence (a half resent by a retry is stored twice; each half commits at most once)", ErrInvalidOption)
	}
	if p.cfg.autoBatch.maxMessages > 1 {
		return nil, fmt.Errorf("%w: AutoBatch cannot be used by a transaction producer (half messages are never batched)", ErrInvalidOption)
	}
	return &TransactionProducer{Producer: p, listener: listener, checks: make(chan txnCheck, maxPendingChecks)}, nil
}

// Start starts the producer, the check-back worker and the producer's
// heartbeats (producer_heartbeat.go).
func (tp *TransactionProducer) Start(ctx context.Context) error {
	if err := tp.Producer.Start(ctx); err != nil {
		return err
	}
	base := tp.Producer.baseContext()
	tp.rc.RegisterProcessor(remoting.RequestCheckTransactionState, tp.onCheck) // replaces itself on a second Start
	tp.mu.Lock()
	if tp.ctx != nil {
		tp.mu.Unlock()
		return nil
	}
	tp.ctx, tp.cancel = context.WithCancel(base)
	tp.wg.Add(1)
	go tp.checker.run(&tp.wg, tp.checkLoop)
	tp.mu.Unlock()
	// Like RocketMQ's producers, heartbeat TBW102's brokers from the
	// start: a restarted producer then gets the check-backs of halves its
	// predecessor left undecided before it sends anything (on clusters
	// with autoCreateTopicEnable, which register TBW102).
	tp.noteTopic(wire.TopicAutoCreate)
	return nil
}

// Close unregisters the producer from its brokers, stops the check-back
// worker (waiting for a listener call in progress, unless that call is
// the caller), then closes the Producer (and its heartbeats).
func (tp *TransactionProducer) Close(ctx context.Context) error {
	tp.mu.Lock()
	cancel := tp.cancel
	tp.mu.Unlock()
	if cancel != nil {
		tp.checker.leave()
		tp.unregisterHeartbeats(ctx)
		cancel()
		if err := waitGroup(ctx, &tp.wg); err != nil {
			_ = tp.Producer.Close(ctx)
			return err
		}
	}
	return tp.Producer.Close(ctx)
}

// SendMessageInTransaction sends msg as a half message, runs the local
// transaction and ends it with the outcome. The error is the half's send
// error (the local transaction did not run); an END_TRANSACTION that did
// not arrive is TransactionSendResult.EndErr. ctx bounds the half's send
// and is given to the local transaction; the END_TRANSACTION of its
// decision is sent within SendTimeout even if ctx ended meanwhile. A half
// stored with a status
// other than SendOK (a RocketMQ broker's flush or replication wait timed
// out) is not acted on: the local transaction does not run and the half
// is rolled back, with a nil error and State TransactionRollback, as in
// RocketMQ; State, not the error, says whether the message will be
// delivered. A half resent by a retried
// attempt is stored twice and each copy commits at most once: such a
// message is at-least-once, as with RocketMQ. A DelayLevel delays the
// committed message on raftmq brokers (RocketMQ's clients drop it).
func (tp *TransactionProducer) SendMessageInTransaction(ctx context.Context, msg *Message) (*TransactionSendResult, error) {
	if msg == nil {
		return nil, fmt.Errorf("%w: nil message", ErrInvalidMessage)
	}
	half := *msg
	half.Properties = maps.Clone(msg.Properties)
	half.WithProperty(wire.PropertyTransactionPrep, "true").WithProperty(wire.PropertyProducerGroup, tp.cfg.group)
	r, err := tp.prepareMsg(&half)
	if err != nil {
		return nil, err
	}
	r.sysFlag |= wire.SysFlagTransPrepared
	res, err := tp.send(ctx, r)
	if err != nil {
		return nil, err
	}
	tp.noteTopic(msg.Topic)
	out := &TransactionSendResult{SendResult: res, State: TransactionUnknown}
	if res.Status == SendOK {
		// The id a check-back's message carries as MsgID, so the listener
		// can record the outcome under it.
		half.Properties[wire.PropertyUniqKey] = res.MsgID
		out.State = tp.execute(ctx, &half)
	} else {
		// Not durable enough to act on (RocketMQ rolls back too).
		out.State = TransactionRollback
	}
	if out.State != TransactionUnknown {
		// An undecided transaction has nothing to end: RocketMQ's brokers
		// do not even answer it, and the check-back asks the listener.
		out.EndErr = tp.endTransaction(ctx, res, out.State)
	}
	return out, nil
}

// execute runs the listener, a panic counting as unknown.
func (tp *TransactionProducer) execute(ctx context.Context, msg *Message) (state LocalTransactionState) {
	defer func() {
		if r := recover(); r != nil {
			tp.log.Error("ExecuteLocalTransaction panicked; the half stays undecided until the check-back", zap.Any("panic", r))
			state = TransactionUnknown
		}
	}()
	return tp.listener.ExecuteLocalTransaction(ctx, msg)
}

// endTransaction sends END_TRANSACTION for a half and waits for the
// answer, within SendTimeout whatever ctx says: it follows not-leader
// hints, waits out an election (a member that names no leader, or names
// one that is down) and asks again after SYSTEM_BUSY (a raftmq leader's
// answer when the decision's replication timed out: sending it again is
// safe, a decided half ignores it). Any other refusal is returned at
// once; running out of time is ErrTransactionOutcomeUnknown.
func (tp *TransactionProducer) endTransaction(ctx context.Context, res *SendResult, state LocalTransactionState) error {
	id, err := wire.ParseMessageID(res.OffsetMsgID)
	if err != nil {
		return fmt.Errorf("client: the half's offset msgId %q: %w", res.OffsetMsgID, err)
	}
	h := wire.EndTransactionRequestHeader{Topic: res.Queue.Topic, ProducerGroup: tp.cfg.group, TranStateTableOffset: res.QueueOffset,
		CommitLogOffset: id.Offset, CommitOrRollback: state.wireFlag(), MsgID: res.MsgID, TransactionID: res.MsgID,
		BrokerName: res.Queue.BrokerName}
	routes, err := tp.running()
	if err != nil {
		return err
	}
	// The local transaction has decided: the decision goes out even when
	// the caller's ctx ended meanwhile (RocketMQ's clients always send it),
	// or a committed message would wait for the broker's check-back.
	// Close still ends the wait.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tp.cfg.sendTimeout)
	defer cancel()
	defer context.AfterFunc(tp.baseContext(), cancel)()
	bn, addr := res.Queue.BrokerName, res.Addr
	var last error
	busyPause := electionPoll
	for {
		if addr == "" {
			addr = routes.brokerAddr(bn)
		}
		if addr != "" {
			resp, err := tp.rc.InvokeSync(ctx, addr, remoting.NewRequest(remoting.RequestEndTransaction, &h, nil))
			switch {
			case err != nil:
				last = err
				routes.markDown(bn, addr, time.Second)
				addr = ""
			case resp.Code == remoting.ResponseSuccess:
				return nil
			case resp.Code == remoting.ResponseSystemBusy:
				last = &BrokerError{Broker: bn, Addr: addr, Code: resp.Code, Remark: resp.Remark}
				if !wait(ctx, busyPause) {
					return fmt.Errorf("%w: %w", ErrTransactionOutcomeUnknown, errors.Join(last, ctx.Err()))
				}
				busyPause = min(2*busyPause, leaderBackoffMax)
				continue
			default:
				leader := resp.ExtFields[wire.ExtLeaderAddr]
				last = &BrokerError{Broker: bn, Addr: addr, Code: resp.Code, Remark: resp.Remark, LeaderAddr: leader}
				if !notLeaderAnswer(last) {
					// Refused by the leader itself (a full disk, a store
					// closing, a bad request): retrying cannot help, and
					// the broker's check-back asks for the decision again.
					return last
				}
				if routes.followable(bn, addr, leader) {
					routes.learnLeader(bn, addr, leader)
					addr = leader
					continue
				}
				addr = ""
			}
		}
		if !waitElection(ctx) {
			return fmt.Errorf("%w: %w", ErrTransactionOutcomeUnknown, errors.Join(last, ctx.Err()))
		}
	}
}

// onCheck is the client side of CHECK_TRANSACTION_STATE (39): it queues
// the check for the worker and answers nothing (the request is one-way).
func (tp *TransactionProducer) onCheck(_ context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.CheckTransactionStateRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		tp.log.Warn("malformed check-back header", zap.Error(err))
		return nil, nil
	}
	msgs, err := DecodeMessages(req.Body)
	var ue *UndecodableMessageError
	if errors.As(err, &ue) && len(msgs) == 0 {
		tp.log.Error("check-back for a half whose body cannot be decoded; checked with its body as stored",
			zap.String("msgId", ue.Message.MsgID), zap.String("topic", ue.Message.Topic), zap.Int32("sysFlag", ue.Message.SysFlag),
			zap.String("reason", ue.Err.Reason))
		msgs, err = []*MessageExt{ue.Message}, nil
	}
	if err != nil || len(msgs) != 1 {
		tp.log.Warn("malformed check-back body", zap.Int("messages", len(msgs)), zap.Error(err))
		return nil, nil
	}
	if g := msgs[0].Properties[wire.PropertyProducerGroup]; g != tp.cfg.group {
		tp.log.Warn("check-back for another producer group ignored", zap.String("group", g))
		return nil, nil
	}
	select {
	case tp.checks <- txnCheck{conn: conn, hdr: h, msg: msgs[0]}:
	default:
		tp.log.Warn("check-back queue full; the broker asks again next round", zap.String("msgId", h.MsgID))
	}
	return nil, nil
}

// checkLoop answers check-backs one by one: END_TRANSACTION one-way on the
// connection the check came on, as RocketMQ's clients do.
func (tp *TransactionProducer) checkLoop() {
	for {
		select {
		case <-tp.ctx.Done():
			return
		case c := <-tp.checks:
			state := tp.check(c.msg)
			h := wire.EndTransactionRequestHeader{Topic: c.msg.Topic, ProducerGroup: tp.cfg.group, TranStateTableOffset: c.hdr.TranStateTableOffset,
				CommitLogOffset: c.hdr.CommitLogOffset, CommitOrRollback: state.wireFlag(), FromTransactionCheck: true,
				MsgID: c.msg.MsgID, TransactionID: c.hdr.TransactionID}
			req := remoting.NewRequest(remoting.RequestEndTransaction, &h, nil)
			req.Flag |= remoting.FlagOneway
			// A call on a Conn skips the client's hooks: sign it here, or a
			// broker with aclEnable drops the answer and the half is
			// discarded after transactionCheckMax checks.
			if cr := tp.cfg.common.credentials; cr.AccessKey != "" {
				cr.Sign(req)
			}
			ctx, cancel := context.WithTimeout(tp.ctx, tp.cfg.sendTimeout)
			if err := c.conn.InvokeOneway(ctx, req); err != nil {
				tp.log.Debug("check-back answer not sent; the broker asks again", zap.String("msgId", c.msg.MsgID), zap.Error(err))
			}
			cancel()
		}
	}
}

func (tp *TransactionProducer) check(msg *MessageExt) (state LocalTransactionState) {
	defer func() {
		if r := recover(); r != nil {
			tp.log.Error("CheckLocalTransaction panicked; answering unknown", zap.Any("panic", r))
			state = TransactionUnknown
		}
	}()
	return tp.listener.CheckLocalTransaction(tp.ctx, msg)
}

// noteTopic makes topic's brokers know the producer, heartbeating them
// soon (not on the caller's goroutine) the first time.
func (tp *TransactionProducer) noteTopic(topic string) {
	if added, err := tp.trackHeartbeat(topic); err == nil && added {
		tp.heartbeatSoon()
	}
}
