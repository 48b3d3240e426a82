package wire

// Transactional messages (RocketMQ 4.9 TransactionalMessageBridge,
// EndTransactionProcessor, AbstractTransactionalMessageCheckListener).
//
// A producer sends the half (prepared) message with TRAN_MSG=true and
// PGROUP; the broker stores it in TopicTransHalf with the real topic and
// queue in REAL_TOPIC / REAL_QID. END_TRANSACTION (37, one-way from the
// official clients) commits or rolls it back; an op record in
// TopicTransOpHalf marks it decided. A half still undecided after the
// transaction timeout is checked back with CHECK_TRANSACTION_STATE (39),
// sent by the broker on a producer connection of the half's group.

// System topics of transactions (RocketMQ TopicValidator).
const (
	// TopicTransHalf holds half messages (queue 0), invisible to consumers.
	TopicTransHalf = "RMQ_SYS_TRANS_HALF_TOPIC"
	// TopicTransOpHalf holds the op records that mark halves decided.
	TopicTransOpHalf = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	// TransOpRemoveTag is the tag of an op record (RocketMQ
	// TransactionalMessageUtil.REMOVETAG).
	TransOpRemoveTag = "d"
)

// Transaction message properties (RocketMQ MessageConst).
const (
	// PropertyTransactionCheckTimes counts the check-backs of a half.
	PropertyTransactionCheckTimes = "TRANSACTION_CHECK_TIMES"
	// PropertyCheckImmunityTime is a half's own transaction timeout in
	// seconds, overriding the broker's transactionTimeOut.
	PropertyCheckImmunityTime = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	// PropertyTransactionID is the transaction id a producer may set.
	PropertyTransactionID = "__transactionId__"
)

// EndTransactionRequestHeader is END_TRANSACTION's (37) header
// (EndTransactionRequestHeader). TranStateTableOffset is the half's queue
// offset in TopicTransHalf and CommitLogOffset its CommitLog offset, both
// from the half's send result; CommitOrRollback is one of the
// SysFlagTrans* values (0 means unknown: nothing happens). Topic is the
// half's real topic (RocketMQ 5 clients send it; the ACL checks PUB on
// it).
type EndTransactionRequestHeader struct {
	Topic                string `ext:"topic,omitempty"`
	ProducerGroup        string `ext:"producerGroup,required"`
	TranStateTableOffset int64  `ext:"tranStateTableOffset,required"`
	CommitLogOffset      int64  `ext:"commitLogOffset,required"`
	CommitOrRollback     int32  `ext:"commitOrRollback,required"`
	FromTransactionCheck bool   `ext:"fromTransactionCheck"`
	MsgID                string `ext:"msgId,required"`
	TransactionID        string `ext:"transactionId"`
	BrokerName           string `ext:"bname,omitempty"`
}

// CheckTransactionStateRequestHeader is CHECK_TRANSACTION_STATE's (39)
// header (CheckTransactionStateRequestHeader); the body is the half
// message in stored format with its real topic and queue.
type CheckTransactionStateRequestHeader struct {
	TranStateTableOffset int64  `ext:"tranStateTableOffset,required"`
	CommitLogOffset      int64  `ext:"commitLogOffset,required"`
	MsgID                string `ext:"msgId"`
	TransactionID        string `ext:"transactionId"`
	OffsetMsgID          string `ext:"offsetMsgId"`
}
