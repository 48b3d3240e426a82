package wire

// Message property names (RocketMQ MessageConst) that brokers and clients
// both read or write. PropertyKeys, PropertyTags, PropertyUniqKey and
// PropertyCRC32 are with the stored-message format.
const (
	PropertyWaitStoreMsgOK    = "WAIT"
	PropertyDelayTimeLevel    = "DELAY"
	PropertyRetryTopic        = "RETRY_TOPIC"
	PropertyRealTopic         = "REAL_TOPIC"
	PropertyRealQueueID       = "REAL_QID"
	PropertyTransactionPrep   = "TRAN_MSG"
	PropertyProducerGroup     = "PGROUP"
	PropertyMinOffset         = "MIN_OFFSET"
	PropertyMaxOffset         = "MAX_OFFSET"
	PropertyMaxReconsumeTimes = "MAX_RECONSUME_TIMES"
	PropertyConsumeStartTime  = "CONSUME_START_TIME"
	PropertyMsgRegion         = "MSG_REGION"
	PropertyTraceSwitch       = "TRACE_ON"
	PropertyShardingKey       = "__SHARDINGKEY"
	PropertyReconsumeTime     = "RECONSUME_TIME"
	PropertyOriginMessageID   = "ORIGIN_MESSAGE_ID"
	// PropertyInnerMultiDispatch lists the light message queues (LMQ) a
	// message is dispatched to besides its topic, under RocketMQ's
	// enableMultiDispatch; raftmq has no LMQ and refuses it.
	PropertyInnerMultiDispatch = "INNER_MULTI_DISPATCH"

	// Timer messages (RocketMQ 5): deliver at an absolute time in ms
	// (TIMER_DELIVER_MS, or __STARTDELIVERTIME as older clients and
	// Aliyun's SDKs set it) or after a delay (TIMER_DELAY_SEC,
	// TIMER_DELAY_MS). The broker keeps the due time in TIMER_OUT_MS.
	PropertyTimerDeliverMs   = "TIMER_DELIVER_MS"
	PropertyTimerDelaySec    = "TIMER_DELAY_SEC"
	PropertyTimerDelayMs     = "TIMER_DELAY_MS"
	PropertyStartDeliverTime = "__STARTDELIVERTIME"
	PropertyTimerOutMs       = "TIMER_OUT_MS"
	PropertyTimerDelUniqKey  = "TIMER_DEL_UNIQKEY"

	// PropertyProducerID and PropertySequence are raftmq's idempotent
	// producer: the producer's id and the message's sequence number in its
	// stream to one queue, by which the broker drops resent duplicates.
	PropertyProducerID = "__RAFTMQ_PID"
	PropertySequence   = "__RAFTMQ_SEQ"
)
