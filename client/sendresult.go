package client

import "fmt"

// SendStatus is the outcome of a stored send (RocketMQ's SendStatus). Every
// status means the broker stored the message; the others say which
// durability or replication wait did not finish in time.
type SendStatus int

const (
	// SendOK: stored and, per the broker's settings, flushed and replicated.
	SendOK SendStatus = iota
	// SendFlushDiskTimeout: stored, but the flush to disk timed out (10).
	SendFlushDiskTimeout
	// SendFlushSlaveTimeout: stored, but replication timed out (12).
	SendFlushSlaveTimeout
	// SendSlaveNotAvailable: stored, but no replica was available (11).
	SendSlaveNotAvailable
)

// String returns RocketMQ's enum name.
func (s SendStatus) String() string {
	switch s {
	case SendOK:
		return "SEND_OK"
	case SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	}
	return fmt.Sprintf("SendStatus(%d)", int(s))
}

// SendResult is a broker's answer to a stored send.
type SendResult struct {
	// Status says how durable the message is.
	Status SendStatus
	// MsgID is the UNIQ_KEY (for a batch, every message's, comma-joined).
	MsgID string
	// OffsetMsgID is the broker's id: store host + physical offset.
	OffsetMsgID string
	// Queue is where the message was stored, QueueOffset its position.
	Queue       MessageQueue
	QueueOffset int64
	// TransactionID is set for transactional messages.
	TransactionID string
	// RegionID is the broker's MSG_REGION ("DefaultRegion" when absent).
	RegionID string
	// TraceOn is the broker's TRACE_ON switch (true unless "false").
	TraceOn bool
	// Addr is the broker address that answered.
	Addr string
}

// String summarizes the result for logs.
func (r *SendResult) String() string {
	return fmt.Sprintf("SendResult{status=%s msgId=%s offsetMsgId=%s queue=%s/%d offset=%d}",
		r.Status, r.MsgID, r.OffsetMsgID, r.Queue.BrokerName, r.Queue.QueueID, r.QueueOffset)
}
