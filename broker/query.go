package broker

import (
	"context"
	"strconv"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// QUERY_MESSAGE (12) by key through the IndexFile and VIEW_MESSAGE_BY_ID
// (33) by physical offset (RocketMQ QueryMessageProcessor). Both answer
// stored-message bytes with QUEUEOFFSET patched from the ConsumeQueue, like
// pulls: in Raft mode the leader's encoder cannot know the queue offset
// (the FSM assigns it at Apply), so the stored field is not the real one.
// The entry CRC leaves QUEUEOFFSET out, so patched copies still verify.

// maxQueryNum caps QUERY_MESSAGE answers (RocketMQ defaultQueryMaxNum).
const maxQueryNum = 64

// maxQueryBodyBytes bounds the messages one QUERY_MESSAGE answer carries
// (at least one is always sent): 64 messages of a few MiB would make a
// frame past every client's 16 MiB limit, so the whole lookup failed,
// and held that much memory per query. Clients merge what each broker
// answers, as with maxNum.
const maxQueryBodyBytes = 8 << 20

func (c *Controller) processQueryMessage(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.QueryMessageRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	n := int(h.MaxNum)
	if n <= 0 || n > maxQueryNum {
		n = maxQueryNum
	}
	res, err := c.st.QueryMessage(h.Topic, h.Key, n, h.BeginTimestamp, h.EndTimestamp)
	if err != nil {
		return response(remoting.ResponseSystemError, "query %s by key %q: %v", h.Topic, h.Key, err), nil
	}
	var body []byte
	for _, m := range res.Messages {
		b, err := c.rawMessage(m.PhysicalOffset)
		if err != nil {
			continue // removed by retention since the index lookup
		}
		if len(body) > 0 && len(body)+len(b) > maxQueryBodyBytes {
			break
		}
		c.patchQueueOffset(b, m.Topic, m.QueueID, m.PhysicalOffset)
		body = append(body, b...)
	}
	if len(body) == 0 {
		return response(remoting.ResponseQueryNotFound, "no message of topic %s with key %q in [%d, %d]",
			h.Topic, h.Key, h.BeginTimestamp, h.EndTimestamp), nil
	}
	r := success()
	r.Body = body
	r.ExtFields = map[string]string{
		"indexLastUpdateTimestamp": strconv.FormatInt(res.IndexLastUpdateTimestamp, 10),
		"indexLastUpdatePhyoffset": strconv.FormatInt(res.IndexLastUpdatePhyOffset, 10),
	}
	return r, nil
}

func (c *Controller) processViewMessageByID(_ context.Context, conn *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.ViewMessageRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	b, err := c.rawMessage(h.Offset)
	if err != nil {
		return response(remoting.ResponseSystemError, "no message at commit log offset %d: %v", h.Offset, err), nil
	}
	m, _, err := wire.DecodeMessage(b, false)
	if err != nil {
		// The read checked the entry CRC, so only bytes the broker never
		// encoded (a BODYCRC that does not match the body) get here: a
		// forged message whose queue unit cannot be looked up either.
		return response(remoting.ResponseSystemError,
			"the entry at commit log offset %d does not decode (%v), so the bytes are not a stored message", h.Offset, err), nil
	}
	if r := c.aclStoredMessage(conn, req, m); r != nil {
		return r, nil
	}
	qo, found, refusal := c.storedUnit(m.Topic, m.QueueID, h.Offset)
	if refusal != nil {
		return refusal, nil
	}
	if found {
		wire.PatchQueueOffset(b, qo)
	}
	r := success()
	r.Body = b
	return r, nil
}

// rawMessage copies the stored bytes of the applied message at a physical
// offset (MessageStore.ReadAppliedMessage).
func (c *Controller) rawMessage(off int64) ([]byte, error) {
	sl, err := c.st.ReadAppliedMessage(off)
	if err != nil {
		return nil, err
	}
	defer sl.Release()
	return append([]byte(nil), sl.B...), nil
}

// patchQueueOffset writes the message's ConsumeQueue offset into its
// copy b; when the queue no longer holds it (retention) b is left as is.
func (c *Controller) patchQueueOffset(b []byte, topic string, queueID int32, phy int64) {
	cq := c.st.ConsumeQueues().Get(topic, queueID)
	if cq == nil {
		return
	}
	if off, ok, err := cq.OffsetOfPhy(phy); err == nil && ok {
		wire.PatchQueueOffset(b, off)
	}
}

// storedUnit checks that the message read at CommitLog offset phy, naming
// topic and queue qid, is one this broker stored there and not bytes in
// another message's body that read as a message (a producer can make its
// body hold a complete, valid one naming any topic): a stored message has
// a unit there in its queue once dispatched. It returns the unit's queue
// offset (found), nothing when the unit may be gone (the queue retired
// units past phy: retention, cleanUnusedTopic; or the topic was deleted
// after phy, which destroyed its queues), or the refusal to answer.
func (c *Controller) storedUnit(topic string, qid int32, phy int64) (offset int64, found bool, refusal *remoting.RemotingCommand) {
	if phy < c.st.ConsumeQueues().DeletedAt(topic) {
		return 0, false, nil
	}
	cq := c.st.ConsumeQueues().Get(topic, qid)
	if cq == nil {
		return 0, false, response(remoting.ResponseSystemError,
			"no message at commit log offset %d: topic %s has no queue %d here, so the bytes are not a stored message", phy, topic, qid)
	}
	off, ok, err := cq.OffsetOfPhy(phy)
	switch {
	case err != nil:
		return 0, false, response(remoting.ResponseSystemError, "could not check queue %s/%d for commit log offset %d: %v", topic, qid, phy, err)
	case ok:
		return off, true, nil
	case phy < cq.RetiredBelow():
		return 0, false, nil
	case phy >= cq.MaxPhysicOffset():
		return 0, false, response(remoting.ResponseSystemError,
			"no message at commit log offset %d: queue %s/%d has no unit there (its units end at %d), so the bytes are not a stored message of that queue, or one this member has not indexed yet",
			phy, topic, qid, cq.MaxPhysicOffset())
	}
	return 0, false, response(remoting.ResponseSystemError,
		"no message at commit log offset %d: queue %s/%d has no unit there, so the bytes are not a stored message of that queue", phy, topic, qid)
}
