package client

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// txnTestListener executes with execState and checks with checkState.
type txnTestListener struct {
	execState, checkState LocalTransactionState
	mu                    sync.Mutex
	checked               []*MessageExt
}

func (l *txnTestListener) ExecuteLocalTransaction(context.Context, *Message) LocalTransactionState {
	return l.execState
}

func (l *txnTestListener) CheckLocalTransaction(_ context.Context, m *MessageExt) LocalTransactionState {
	l.mu.Lock()
	l.checked = append(l.checked, m)
	l.mu.Unlock()
	return l.checkState
}

// TestTransactionProducerWire: the half goes out with the prepared sysflag,
// TRAN_MSG and PGROUP; END_TRANSACTION names it by the send result's
// offsets with the listener's decision; the producer heartbeats its group;
// a broker's CHECK_TRANSACTION_STATE on that connection is answered by an
// END_TRANSACTION from the check, one-way, on the same connection.
func TestTransactionProducerWire(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	fb := startFakeBroker(t, "b", log)
	fb.register(t, ns, 0, 1, map[string]int{"T": 1})

	w := recordTxnWire(fb)

	l := &txnTestListener{execState: TransactionRollback, checkState: TransactionCommit}
	tp := startTxnProducer(t, ns, l)
	res, err := tp.SendMessageInTransaction(context.Background(), NewMessage("T", []byte("half")))
	if err != nil || res.State != TransactionRollback || res.EndErr != nil {
		t.Fatalf("send: %+v %v", res, err)
	}
	sent := log.all()[0]
	props := wire.ParseProperties(sent.header.Properties)
	if sent.header.SysFlag&wire.SysFlagTransMask != wire.SysFlagTransPrepared || props[wire.PropertyTransactionPrep] != "true" ||
		props[wire.PropertyProducerGroup] != "TPG" {
		t.Fatalf("half sent with sysflag %#x properties %v", sent.header.SysFlag, props)
	}
	ends := w.endTxns()
	if len(ends) != 1 {
		t.Fatalf("%d END_TRANSACTIONs; want 1", len(ends))
	}
	var h wire.EndTransactionRequestHeader
	if err := ends[0].DecodeHeader(&h); err != nil {
		t.Fatal(err)
	}
	id, _ := wire.ParseMessageID(res.OffsetMsgID)
	if h.Topic != "T" || h.ProducerGroup != "TPG" || h.CommitOrRollback != wire.SysFlagTransRollback || h.CommitLogOffset != id.Offset ||
		h.TranStateTableOffset != res.QueueOffset || h.MsgID != res.MsgID || h.FromTransactionCheck {
		t.Fatalf("END_TRANSACTION header %+v for result %+v", h, res.SendResult)
	}

	testutil.WaitFor(t, 5*time.Second, "a producer heartbeat", func() bool { return w.heartbeatConn() != nil })
	half := &wire.Message{Topic: "T", Body: []byte("half"), Properties: map[string]string{
		wire.PropertyProducerGroup: "TPG", wire.PropertyUniqKey: res.MsgID}, StoreHost: id.Addr, BornHost: id.Addr}
	body, err := wire.AppendMessage(nil, half)
	if err != nil {
		t.Fatal(err)
	}
	check := remoting.NewRequest(remoting.RequestCheckTransactionState, &wire.CheckTransactionStateRequestHeader{
		TranStateTableOffset: 7, CommitLogOffset: 4242, MsgID: res.MsgID}, body)
	check.Flag |= remoting.FlagOneway
	if err := w.heartbeatConn().InvokeOneway(context.Background(), check); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "the check-back's END_TRANSACTION", func() bool { return len(w.endTxns()) == 2 })
	end := w.endTxns()[1]
	h = wire.EndTransactionRequestHeader{}
	err = end.DecodeHeader(&h)
	oneway := end.IsOneway()
	if err != nil || !oneway || !h.FromTransactionCheck || h.Topic != "T" || h.CommitOrRollback != wire.SysFlagTransCommit ||
		h.CommitLogOffset != 4242 || h.TranStateTableOffset != 7 || h.MsgID != res.MsgID {
		t.Fatalf("check answer %+v oneway=%v err=%v", h, oneway, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.checked) != 1 || string(l.checked[0].Body) != "half" || l.checked[0].MsgID != res.MsgID {
		t.Fatalf("listener checked %v", l.checked)
	}
}

// TestTransactionProducerOptions: options that cannot work with halves are
// refused at construction.
func TestTransactionProducerOptions(t *testing.T) {
	l := &txnTestListener{}
	for name, opts := range map[string][]ProducerOpt{
		"idempotent": {NameServers("127.0.0.1:9876"), Idempotent(true)},
		"autobatch":  {NameServers("127.0.0.1:9876"), AutoBatch(8, 1<<16, time.Millisecond)},
	} {
		if _, err := NewTransactionProducer(l, opts...); !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("%s: %v; want ErrInvalidOption", name, err)
		}
	}
	if _, err := NewTransactionProducer(nil, NameServers("127.0.0.1:9876")); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("nil listener: %v", err)
	}
}

// TestTransactionProducerHeartbeatsNewMember: a member that joins the
// route after the producer's first heartbeat gets one as soon as the
// route shows it, not a heartbeat interval later (it could not check
// transactions back with the producer until then).
func TestTransactionProducerHeartbeatsNewMember(t *testing.T) {
	ns := startNameServer(t)
	members := [2]*fakeBroker{startFakeBroker(t, "b", &requestLog{}), startFakeBroker(t, "b", &requestLog{})}
	var beats [2]atomic.Int32
	for i, fb := range members {
		fb.srv.Register(remoting.RequestHeartBeat, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
			beats[i].Add(1)
			return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
		}, 1, 16)
		fb.srv.Register(remoting.RequestEndTransaction, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
			return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
		}, 1, 16)
	}
	members[0].register(t, ns, 0, 1, map[string]int{"T": 1})
	tp := startTxnProducer(t, ns, &txnTestListener{execState: TransactionCommit, checkState: TransactionCommit},
		RouteRefreshInterval(50*time.Millisecond))
	if res, err := tp.SendMessageInTransaction(context.Background(), NewMessage("T", []byte("half"))); err != nil || res.EndErr != nil {
		t.Fatalf("send: %+v %v", res, err)
	}
	testutil.WaitFor(t, 5*time.Second, "a heartbeat to the first member", func() bool { return beats[0].Load() > 0 })
	members[1].register(t, ns, 1, 2, map[string]int{"T": 1})
	testutil.WaitFor(t, 5*time.Second, "a heartbeat to the member that joined (the interval is "+ProducerHeartbeatInterval.String()+")",
		func() bool { return beats[1].Load() > 0 })
}

// TestTransactionProducerNoHeartbeatStorm: sends failing on a dead member
// (marked down on every attempt) do not start heartbeat rounds; only a
// route with other members does. The producer also heartbeats the dead
// member's group once it sent there.
func TestTransactionProducerNoHeartbeatStorm(t *testing.T) {
	ns := startNameServer(t)
	live, dead := startFakeBroker(t, "a", &requestLog{}), startFakeBroker(t, "b", &requestLog{})
	var beats atomic.Int32
	live.srv.Register(remoting.RequestHeartBeat, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		beats.Add(1)
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 16)
	live.srv.Register(remoting.RequestEndTransaction, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 16)
	live.register(t, ns, 0, 1, map[string]int{"T": 1})
	dead.register(t, ns, 0, 1, map[string]int{"D": 1})
	// Its server goes, its registration stays (the name server drops a
	// broker whose own connection closes): the route still lists it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := dead.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	tp := startTxnProducer(t, ns, &txnTestListener{execState: TransactionCommit, checkState: TransactionCommit})
	testutil.WaitFor(t, 10*time.Second, "a transaction stored on the live group", func() bool {
		res, err := tp.SendMessageInTransaction(context.Background(), NewMessage("T", []byte("half")))
		return err == nil && res.EndErr == nil
	})
	testutil.WaitFor(t, 5*time.Second, "the first heartbeat", func() bool { return beats.Load() > 0 })
	before := beats.Load()
	// A load window, not a wait: sends fail on the dead member for 500 ms.
	end := time.Now().Add(500 * time.Millisecond)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				_, _ = tp.SendSync(context.Background(), NewMessage("D", []byte("x")))
			}
		}()
	}
	wg.Wait()
	if n := beats.Load() - before; n > 10 {
		t.Fatalf("%d heartbeats to the live member in 500 ms of sends failing on a dead member; want a few at most", n)
	}
}

// startTxnProducer starts a TransactionProducer of group TPG on ns,
// closed when the test ends.
func startTxnProducer(t *testing.T, ns *namesrv.NameServer, l TransactionListener, opts ...ProducerOpt) *TransactionProducer {
	t.Helper()
	tp, err := NewTransactionProducer(l, append([]ProducerOpt{NameServers(ns.Addr().String()), ProducerGroup("TPG")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tp.Close(context.Background()) })
	return tp
}

// TestTransactionProducerUnknownEndsNothing: a local transaction that
// returns TransactionUnknown decides nothing, so nothing is sent for it:
// a RocketMQ broker does not even answer an END_TRANSACTION without a
// decision (EndTransactionProcessor returns null for TRANSACTION_NOT_TYPE),
// and waiting for that answer held SendMessageInTransaction for the whole
// SendTimeout and reported an END_TRANSACTION that did not arrive.
func TestTransactionProducerUnknownEndsNothing(t *testing.T) {
	ns := startNameServer(t)
	log := &requestLog{}
	fb := startFakeBroker(t, "b", log)
	fb.register(t, ns, 0, 1, map[string]int{"T": 1})
	var ends atomic.Int32
	fb.srv.Register(remoting.RequestEndTransaction, func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		var h wire.EndTransactionRequestHeader
		_ = req.DecodeHeader(&h)
		ends.Add(1)
		if h.CommitOrRollback == 0 {
			return nil, nil // RocketMQ's answer: none
		}
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 16)
	tp := startTxnProducer(t, ns, &txnTestListener{execState: TransactionUnknown}, SendTimeout(time.Second))
	res, err := tp.SendMessageInTransaction(context.Background(), NewMessage("T", []byte("half")))
	if err != nil || res.State != TransactionUnknown || res.EndErr != nil {
		t.Fatalf("send: %+v %v", res, err)
	}
	if n := ends.Load(); n != 0 {
		t.Fatalf("%d END_TRANSACTIONs for an undecided local transaction", n)
	}
}

// idListener records the UNIQ_KEY of the message ExecuteLocalTransaction
// gets.
type idListener struct {
	txnTestListener
	executed string
}

func (l *idListener) ExecuteLocalTransaction(_ context.Context, m *Message) LocalTransactionState {
	l.executed = m.Property(wire.PropertyUniqKey)
	return TransactionCommit
}

// TestTransactionProducerExecuteSeesTransactionID: the local transaction
// gets the message's UNIQ_KEY, the id a check-back's message carries as
// MsgID, so a listener can record its outcome under the id the check asks
// by (Java's executeLocalTransaction reads it as msg.getTransactionId()).
func TestTransactionProducerExecuteSeesTransactionID(t *testing.T) {
	ns := startNameServer(t)
	fb := startFakeBroker(t, "b", &requestLog{})
	fb.register(t, ns, 0, 1, map[string]int{"T": 1})
	fb.srv.Register(remoting.RequestEndTransaction, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 16)
	l := &idListener{}
	tp := startTxnProducer(t, ns, l)
	msg := NewMessage("T", []byte("half"))
	res, err := tp.SendMessageInTransaction(context.Background(), msg)
	if err != nil || res.EndErr != nil {
		t.Fatalf("send: %+v %v", res, err)
	}
	if l.executed == "" || l.executed != res.MsgID {
		t.Fatalf("ExecuteLocalTransaction saw UNIQ_KEY %q, the send's MsgID is %q", l.executed, res.MsgID)
	}
	if msg.Properties[wire.PropertyUniqKey] != "" {
		t.Fatalf("the caller's message was changed: %v", msg.Properties)
	}
}

// cancellingListener commits its local transaction and cancels the
// caller's context meanwhile, as a server's request context ends when its
// client goes away.
type cancellingListener struct {
	txnTestListener
	cancel context.CancelFunc
}

func (l *cancellingListener) ExecuteLocalTransaction(context.Context, *Message) LocalTransactionState {
	l.cancel()
	return TransactionCommit
}

// TestTransactionProducerEndsAfterCallerGaveUp: a local transaction that
// committed is ended at the broker even when the caller's context ended
// while it ran, as RocketMQ's clients always send END_TRANSACTION: the
// decision is made, and withheld it left a committed message undelivered
// until the broker's check-back asked for it.
func TestTransactionProducerEndsAfterCallerGaveUp(t *testing.T) {
	ns := startNameServer(t)
	fb := startFakeBroker(t, "b", &requestLog{})
	fb.register(t, ns, 0, 1, map[string]int{"T": 1})
	var commits atomic.Int32
	fb.srv.Register(remoting.RequestEndTransaction, func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		var h wire.EndTransactionRequestHeader
		_ = req.DecodeHeader(&h)
		if h.CommitOrRollback == wire.SysFlagTransCommit {
			commits.Add(1)
		}
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tp := startTxnProducer(t, ns, &cancellingListener{cancel: cancel})
	res, err := tp.SendMessageInTransaction(ctx, NewMessage("T", []byte("half")))
	if err != nil || res.State != TransactionCommit {
		t.Fatalf("send: %+v %v", res, err)
	}
	if res.EndErr != nil || commits.Load() != 1 {
		t.Fatalf("EndErr %v, %d commits reached the broker", res.EndErr, commits.Load())
	}
}

// TestTransactionProducerEndRefusedByLeader: the group's leader refuses
// END_TRANSACTION itself with SERVICE_NOT_AVAILABLE (a full disk): no
// election will change that, so EndErr carries the broker's code and
// remark at once instead of after SendTimeout of polling. A not-leader
// answer naming no leader is still waited out.
func TestTransactionProducerEndRefusedByLeader(t *testing.T) {
	ns := startNameServer(t)
	fb := startFakeBroker(t, "b", &requestLog{})
	fb.register(t, ns, 0, 1, map[string]int{"T": 1})
	const remark = "end transaction: store: service not available: disk full"
	var ends atomic.Int32
	var electing atomic.Bool
	fb.srv.Register(remoting.RequestEndTransaction, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		n := ends.Add(1)
		if electing.Load() {
			if n <= 2 {
				return remoting.NewResponse(remoting.ResponseServiceNotAvailable, wire.NotLeaderRemark("")), nil
			}
			return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
		}
		return remoting.NewResponse(remoting.ResponseServiceNotAvailable, remark), nil
	}, 1, 16)
	tp := startTxnProducer(t, ns, &txnTestListener{execState: TransactionCommit}, SendTimeout(20*time.Second))
	start := time.Now()
	res, err := tp.SendMessageInTransaction(context.Background(), NewMessage("T", []byte("half")))
	if err != nil || res.State != TransactionCommit {
		t.Fatalf("send: %+v %v", res, err)
	}
	var be *BrokerError
	if !errors.As(res.EndErr, &be) || be.Code != remoting.ResponseServiceNotAvailable || be.Remark != remark {
		t.Fatalf("EndErr %v", res.EndErr)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the refusal took %v to report, SendTimeout is 20s", took)
	}

	ends.Store(0)
	electing.Store(true)
	res, err = tp.SendMessageInTransaction(context.Background(), NewMessage("T", []byte("half")))
	if err != nil || res.EndErr != nil || ends.Load() != 3 {
		t.Fatalf("end through an election: %+v %v, %d END_TRANSACTIONs", res, err, ends.Load())
	}
}

// TestTransactionProducerEndOutcomeUnknown: a raftmq leader whose
// replication of the decision timed out answers SYSTEM_BUSY (the decision
// may still take effect). That is no refusal: the producer asks again
// (harmless, a decided half ignores a repeat) and reports success once an
// answer says so; if none does within SendTimeout, EndErr is
// ErrTransactionOutcomeUnknown, not a refusal the user would take as
// "never delivered".
func TestTransactionProducerEndOutcomeUnknown(t *testing.T) {
	ns := startNameServer(t)
	fb := startFakeBroker(t, "b", &requestLog{})
	fb.register(t, ns, 0, 1, map[string]int{"T": 1})
	const remark = "end transaction of X: outcome unknown (broker: raft write timed out after 5s)"
	var ends, busyFor atomic.Int32
	fb.srv.Register(remoting.RequestEndTransaction, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		if n := ends.Add(1); n <= busyFor.Load() {
			return remoting.NewResponse(remoting.ResponseSystemBusy, remark), nil
		}
		return remoting.NewResponse(remoting.ResponseSuccess, "the transaction of X was already decided"), nil
	}, 1, 16)
	tp := startTxnProducer(t, ns, &txnTestListener{execState: TransactionCommit}, SendTimeout(time.Second))

	busyFor.Store(2)
	res, err := tp.SendMessageInTransaction(context.Background(), NewMessage("T", []byte("half")))
	if err != nil || res.State != TransactionCommit {
		t.Fatalf("send: %+v %v", res, err)
	}
	if res.EndErr != nil || ends.Load() != 3 {
		t.Fatalf("EndErr %v after %d END_TRANSACTIONs; want success on the third", res.EndErr, ends.Load())
	}

	ends.Store(0)
	busyFor.Store(1 << 30)
	res, err = tp.SendMessageInTransaction(context.Background(), NewMessage("T", []byte("half")))
	if err != nil || res.State != TransactionCommit {
		t.Fatalf("send: %+v %v", res, err)
	}
	if !errors.Is(res.EndErr, ErrTransactionOutcomeUnknown) {
		t.Fatalf("EndErr %v: want ErrTransactionOutcomeUnknown", res.EndErr)
	}
	var be *BrokerError
	if !errors.As(res.EndErr, &be) || be.Code != remoting.ResponseSystemBusy || be.Remark != remark {
		t.Fatalf("EndErr %v does not carry the broker's answer", res.EndErr)
	}
}

// TestTransactionCheckUndecodableHalf: a check-back for a half whose body
// cannot be decoded (here compressed with an unknown type) is still put to
// CheckLocalTransaction, with the body as stored and the compressed flag
// kept, and answered: ignored, it would be asked again until the broker
// discarded the half, a committed transaction's message with it.
func TestTransactionCheckUndecodableHalf(t *testing.T) {
	ns := startNameServer(t)
	fb := startFakeBroker(t, "b", &requestLog{})
	fb.register(t, ns, 0, 1, map[string]int{"T": 1})
	w := recordTxnWire(fb)
	l := &txnTestListener{execState: TransactionUnknown, checkState: TransactionCommit}
	tp := startTxnProducer(t, ns, l)
	if _, err := tp.SendMessageInTransaction(context.Background(), NewMessage("T", []byte("half"))); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "a producer heartbeat", func() bool { return w.heartbeatConn() != nil })
	stored := []byte("a body of compression type 5")
	sysFlag := wire.SysFlagCompressed | 5<<8 | wire.SysFlagTransPrepared
	body := encodeStored(t, storedMessage{topic: "T", body: stored, sysFlag: sysFlag, physical: 4242,
		props: wire.EncodeProperties(map[string]string{wire.PropertyProducerGroup: "TPG", wire.PropertyUniqKey: "HALF"})})
	check := remoting.NewRequest(remoting.RequestCheckTransactionState, &wire.CheckTransactionStateRequestHeader{
		TranStateTableOffset: 7, CommitLogOffset: 4242, MsgID: "HALF"}, body)
	check.Flag |= remoting.FlagOneway
	if err := w.heartbeatConn().InvokeOneway(context.Background(), check); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "the check-back's END_TRANSACTION", func() bool { return len(w.endTxns()) == 1 })
	var h wire.EndTransactionRequestHeader
	err := w.endTxns()[0].DecodeHeader(&h)
	if err != nil || !h.FromTransactionCheck || h.CommitOrRollback != wire.SysFlagTransCommit || h.CommitLogOffset != 4242 || h.MsgID != "HALF" {
		t.Fatalf("check answer %+v, err %v", h, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.checked) != 1 || !bytes.Equal(l.checked[0].Body, stored) || l.checked[0].SysFlag != sysFlag || l.checked[0].MsgID != "HALF" {
		t.Fatalf("listener checked %v", l.checked)
	}
}

// txnWire records what a fake broker gets from a transaction producer:
// its END_TRANSACTIONs, and the connection its heartbeats came on, where
// a broker sends check-backs.
type txnWire struct {
	mu     sync.Mutex
	ends   []*remoting.RemotingCommand
	hbConn *remoting.Conn
}

func recordTxnWire(fb *fakeBroker) *txnWire {
	w := &txnWire{}
	fb.srv.Register(remoting.RequestEndTransaction, func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		w.mu.Lock()
		w.ends = append(w.ends, req)
		w.mu.Unlock()
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 16)
	fb.srv.Register(remoting.RequestHeartBeat, func(_ context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		w.mu.Lock()
		w.hbConn = conn
		w.mu.Unlock()
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 16)
	return w
}

// endTxns returns the END_TRANSACTIONs received so far.
func (w *txnWire) endTxns() []*remoting.RemotingCommand {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ends)
}

// heartbeatConn is the connection of the latest heartbeat, nil before one.
func (w *txnWire) heartbeatConn() *remoting.Conn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hbConn
}
