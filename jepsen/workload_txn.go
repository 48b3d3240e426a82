package jepsen

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/raftmq/raftmq/client"
)

// The transactional workload: TxnProducers SDK transaction producers send
// to Topic through client.TransactionProducer. A value's decision is fixed
// by its name (every third one, "-rb-", rolls back; the others commit), so
// the local transaction and every check-back agree, whichever producer of
// the group answers and whatever faults lost END_TRANSACTIONs. The checker
// then requires every committed value whose half was acknowledged to be
// consumed, and no rolled-back value ever to be consumed or stored.

// Transactional op decisions (Op.Txn).
const (
	TxnCommit   = "commit"
	TxnRollback = "rollback"
)

// ResultHalfOK is a transactional op whose half message was acknowledged:
// the broker owes its decision (delivery for a commit, nothing for a
// rollback), not an offset: the queue and offset of the half are not the
// message's.
const ResultHalfOK = "half-ok"

// TxnProducerGroup is the transaction producers' group (the brokers check
// back on any member of it).
const TxnProducerGroup = "JepsenTxnProducers"

// txnListener decides by the value's name.
type txnListener struct{}

func txnDecision(body []byte) client.LocalTransactionState {
	v, _ := decodeBody(body)
	if strings.Contains(v, "-rb-") {
		return client.TransactionRollback
	}
	return client.TransactionCommit
}

func (txnListener) ExecuteLocalTransaction(_ context.Context, m *client.Message) client.LocalTransactionState {
	return txnDecision(m.Body)
}

func (txnListener) CheckLocalTransaction(_ context.Context, m *client.MessageExt) client.LocalTransactionState {
	return txnDecision(m.Body)
}

// mustDeliver reports whether the cluster owes a delivery of o's value:
// an acknowledged plain send, or a committed transaction whose half was
// acknowledged.
func mustDeliver(o Op) bool {
	return o.Result == ResultOK || (o.Result == ResultHalfOK && o.Txn == TxnCommit)
}

// startTxnProducers starts the transaction producers.
func (w *workload) startTxnProducers(ctx context.Context) error {
	for i := 0; i < w.cfg.TxnProducers; i++ {
		tp, err := client.NewTransactionProducer(txnListener{},
			client.NameServers(w.c.NamesrvAddr()),
			client.ProducerGroup(TxnProducerGroup),
			client.InstanceName(fmt.Sprintf("jepsen-t%d", i)),
			client.AutoCreateTopic(true, w.queues),
			client.SendTimeout(w.cfg.SendTimeout),
			client.AttemptTimeout(w.cfg.AttemptTimeout),
			client.RouteRefreshInterval(time.Second),
			client.WithLogger(w.log.Named(fmt.Sprintf("t%d", i))),
		)
		if err != nil {
			return err
		}
		if err := tp.Start(ctx); err != nil {
			return err
		}
		w.txnProd = append(w.txnProd, tp)
	}
	return nil
}

// txnInterval paces each transactional worker (a transaction is two
// requests and a local decision; the plain producers carry the load).
const txnInterval = 20 * time.Millisecond

// runTxnProducers starts the transactional workers on w.wg.
func (w *workload) runTxnProducers(ctx context.Context) {
	for i, tp := range w.txnProd {
		for k := 0; k < w.cfg.WorkersPerProducer; k++ {
			w.wg.Add(1)
			go func(i, k int, tp *client.TransactionProducer) {
				defer w.wg.Done()
				proc := fmt.Sprintf("t%d-w%d", i, k)
				t := time.NewTicker(txnInterval)
				defer t.Stop()
				for seq := 0; ctx.Err() == nil; seq++ {
					value := fmt.Sprintf("%s-%d", proc, seq)
					if seq%3 == 2 {
						value = fmt.Sprintf("%s-rb-%d", proc, seq)
					}
					w.sendTxn(ctx, tp, value, proc)
					select {
					case <-ctx.Done():
					case <-t.C:
					}
				}
			}(i, k, tp)
		}
	}
}

// sendTxn performs and records one transactional send.
func (w *workload) sendTxn(ctx context.Context, tp *client.TransactionProducer, value, process string) {
	msg := &client.Message{Topic: Topic, Body: encodeBody(value), Keys: []string{value}}
	decision := TxnCommit
	if txnDecision(msg.Body) == client.TransactionRollback {
		decision = TxnRollback
	}
	inv := time.Now()
	sctx, cancel := context.WithTimeout(ctx, w.cfg.SendTimeout)
	res, err := tp.SendMessageInTransaction(sctx, msg)
	cancel()
	o := Op{Process: process, Value: value, Txn: decision, InvokeMs: w.rec.since(inv), CompleteMs: w.rec.since(time.Now()), Queue: -1, Offset: -1}
	switch {
	case err != nil:
		o.Result, o.Err = ResultUnknown, err.Error()
	case res.Status != client.SendOK:
		o.Result, o.Err = ResultUnknown, "half stored with status "+res.Status.String()
	default:
		o.Result, o.Broker = ResultHalfOK, res.Queue.BrokerName
		if res.EndErr != nil {
			o.Err = "END_TRANSACTION: " + res.EndErr.Error() // the check-back decides
		}
	}
	w.rec.op(o)
}

// closeTxnProducers closes the transaction producers (once).
func (w *workload) closeTxnProducers() {
	for _, tp := range w.txnProd {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = tp.Close(ctx)
		cancel()
	}
	w.txnProd = nil
}
