package broker

import (
	"context"
	"strconv"

	"github.com/raftmq/raftmq/remoting"
)

// QUERY_MESSAGE (12) by key through the IndexFile and VIEW_MESSAGE_BY_ID
// (33) by physical offset (RocketMQ QueryMessageProcessor). Both answer
// stored-message bytes, as the clients decode them.

type queryMessageHeader struct {
	Topic          string `ext:"topic,required"`
	Key            string `ext:"key,required"`
	MaxNum         int32  `ext:"maxNum,required"`
	BeginTimestamp int64  `ext:"beginTimestamp,required"`
	EndTimestamp   int64  `ext:"endTimestamp,required"`
}

type viewMessageHeader struct {
	Offset int64 `ext:"offset,required"`
}

// maxQueryNum caps QUERY_MESSAGE answers (RocketMQ defaultQueryMaxNum).
const maxQueryNum = 64

func (c *Controller) processQueryMessage(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h queryMessageHeader
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

func (c *Controller) processViewMessageByID(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h viewMessageHeader
	if err := req.DecodeHeader(&h); err != nil {
		return headerError(req, err), nil
	}
	b, err := c.rawMessage(h.Offset)
	if err != nil {
		return response(remoting.ResponseSystemError, "no message at commit log offset %d: %v", h.Offset, err), nil
	}
	r := success()
	r.Body = b
	return r, nil
}

// rawMessage copies the stored bytes of the message at a physical offset.
func (c *Controller) rawMessage(off int64) ([]byte, error) {
	sl, err := c.st.CommitLog().ReadMessage(off)
	if err != nil {
		return nil, err
	}
	defer sl.Release()
	return append([]byte(nil), sl.B...), nil
}
