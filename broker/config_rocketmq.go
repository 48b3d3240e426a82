package broker

import "github.com/raftmq/raftmq/internal/config"

// Reasons RocketMQ 4.9 broker keys are accepted but ignored (the "why" of
// the one warning a stock file gets). Each reason says what raftmq does
// instead, so an operator knows where the setting went.
const (
	whyRaft = "replication is Raft: members and quorum come from dLegerPeers, " +
		"a write is acknowledged once a majority has it"
	whyRaftFlush = "the Raft log is the CommitLog: it is written by one Raft leader and fsynced per append " +
		"under SYNC_FLUSH (raftAcksBeforeFsync for ASYNC_FLUSH), with no separate flush or commit service"
	whyThreads = "Java thread-pool sizing: the Go runtime schedules request goroutines; " +
		"send/pull pools and queue capacities are sendMessageThreadPoolNums, pullMessageThreadPoolNums, " +
		"sendThreadPoolQueueCapacity and pullThreadPoolQueueCapacity"
	whyFastFail  = "a full send or pull queue answers SYSTEM_BUSY at once; there is no queue-wait timeout"
	whyRetention = "retention deletes whole segments every cleanResourceInterval (fileReservedTime, deleteWhen, diskMaxUsedSpaceRatio)"
	whyPull      = "a pull returns at most maxPullBatch messages, read through the page cache"
	whyStats     = "statistics are Prometheus series on metricsPort (see docs/metrics.md)"
	whyFilterExt = "the ConsumeQueue bloom-filter extension: SQL92 and tag filters are evaluated at pull time"
	whyOffsets   = "consumer and schedule offsets are replicated through Raft (consumerOffsetCommitInterval)"
	whyRegister  = "every registration sends the whole topic table, every registerNameServerPeriod"
	whyCloud     = "Alibaba Cloud accounting and tracing of the commercial service"
	whyHome      = "raftmq has no ROCKETMQ_HOME: files live under storePathRootDir"
	whyAutoTopic = "raftmq creates no per-cluster or per-broker topics; routes come from the name servers' cluster table"
	whyRuntime   = "UPDATE_BROKER_CONFIG accepts only raftmq's runtime keys (RuntimeConfigKeys)"
)

// rocketmqBrokerKeys classifies every key of RocketMQ 4.9's BrokerConfig,
// MessageStoreConfig, NettyServerConfig and NettyClientConfig that raftmq
// has no field for (the ones it has are used; docs/config.md lists both).
// Keys whose non-default value asks for a feature raftmq lacks carry Only:
// that value loads, any other is refused naming the key.
var rocketmqBrokerKeys = config.WithNettyKeys(map[string]config.Ignored{
	// Master/slave replication (MessageStoreConfig, BrokerConfig).
	"brokerId": {Reason: "roles come from Raft: the leader registers as brokerId 0, " +
		"a follower as its position in the live Raft configuration + 1 (dLegerPeers order at bootstrap)"},
	// RocketMQ's slaves answer PULL_RETRY_IMMEDIATELY when it is false;
	// after a failover clients keep pulling from the old leader's address
	// until their next route refresh, so followers must serve.
	"slaveReadEnable":           {Reason: "followers always serve pulls of committed messages"},
	"brokerRole":                {Reason: whyRaft},
	"brokerIP2":                 {Reason: whyRaft},
	"haListenPort":              {Reason: whyRaft},
	"haSendHeartbeatInterval":   {Reason: whyRaft},
	"haHousekeepingInterval":    {Reason: whyRaft},
	"haTransferBatchSize":       {Reason: whyRaft},
	"haMasterAddress":           {Reason: whyRaft},
	"haSlaveFallbehindMax":      {Reason: whyRaft},
	"slaveTimeout":              {Reason: whyRaft},
	"offsetCheckInSlave":        {Reason: whyRaft},
	"syncFlushTimeout":          {Reason: whyRaft + "; a write waits at most applyTimeout"},
	"storePathDLedgerCommitLog": {Reason: "the Raft log is the CommitLog, under storePathCommitLog"},
	"isEnableBatchPush":         {Reason: "Raft replicates batched entries (raftBatchMaxBytes, raftMaxAppendEntries)"},

	// CommitLog flush and commit services.
	"flushIntervalCommitLog":            {Reason: whyRaftFlush},
	"commitIntervalCommitLog":           {Reason: whyRaftFlush},
	"flushCommitLogTimed":               {Reason: whyRaftFlush},
	"flushCommitLogLeastPages":          {Reason: whyRaftFlush},
	"commitCommitLogLeastPages":         {Reason: whyRaftFlush},
	"flushCommitLogThoroughInterval":    {Reason: whyRaftFlush},
	"commitCommitLogThoroughInterval":   {Reason: whyRaftFlush},
	"flushConsumeQueueLeastPages":       {Reason: whyRaftFlush},
	"flushConsumeQueueThoroughInterval": {Reason: whyRaftFlush},
	"useReentrantLockWhenPutMessage":    {Reason: whyRaftFlush},
	"flushLeastPagesWhenWarmMapedFile":  {Reason: "segments are pre-zeroed ahead of the writer (raftWarmAheadBytes)"},
	"warmMapedFileEnable":               {Reason: "segments are pre-zeroed ahead of the writer (raftWarmAheadBytes)"},
	"transientStorePoolEnable":          {Reason: "writes go straight to the mmap'd CommitLog; there is no off-heap transient pool"},
	"transientStorePoolSize":            {Reason: "writes go straight to the mmap'd CommitLog; there is no off-heap transient pool"},
	"fastFailIfNoBufferInStorePool":     {Reason: "writes go straight to the mmap'd CommitLog; there is no off-heap transient pool"},
	"checkCRCOnRecover":                 {Reason: "recovery always checks the Raft log's checksums"},
	"readOnlyCommitLogStorePaths":       {Reason: "the CommitLog has one directory (storePathCommitLog)", OnlyEmpty: true},
	"duplicationEnable":                 {Reason: "a restored store is never re-dispatched from offset 0", Only: "false"},

	// Retention and file deletion.
	"deleteCommitLogFilesInterval":     {Reason: whyRetention},
	"deleteConsumeQueueFilesInterval":  {Reason: whyRetention},
	"destroyMapedFileIntervalForcibly": {Reason: whyRetention},
	"redeleteHangedFileInterval":       {Reason: whyRetention},
	"cleanFileForciblyEnable":          {Reason: whyRetention},
	"diskFallRecorded":                 {Reason: whyStats},

	// Reads.
	"maxTransferBytesOnMessageInMemory":  {Reason: whyPull},
	"maxTransferCountOnMessageInMemory":  {Reason: whyPull},
	"maxTransferBytesOnMessageInDisk":    {Reason: whyPull},
	"maxTransferCountOnMessageInDisk":    {Reason: whyPull},
	"transferMsgByHeap":                  {Reason: whyPull},
	"osPageCacheBusyTimeOutMills":        {Reason: "no page-cache-busy fast failure: a write waits for Raft, bounded by applyTimeout"},
	"disableConsumeIfConsumerReadSlowly": {Reason: "consumers far behind read from disk; none is cut off", Only: "false"},
	"consumerFallbehindThreshold":        {Reason: "consumers far behind read from disk; none is cut off"},
	"defaultQueryMaxNum":                 {Reason: "QUERY_MESSAGE returns at most the request's maxNum, capped at 64"},
	"maxMsgsNumBatch":                    {Reason: "QUERY_MESSAGE returns at most the request's maxNum, capped at 64"},
	"putMsgIndexHightWater":              {Reason: "the index is written for every message (messageIndexEnable)"},
	"messageIndexSafe":                   {Reason: "the index is rebuilt from the Raft log on recovery"},

	// Thread pools (Netty's keys: config.WithNettyKeys).
	"putMessageFutureThreadPoolNums":         {Reason: whyThreads},
	"processReplyMessageThreadPoolNums":      {Reason: whyThreads},
	"queryMessageThreadPoolNums":             {Reason: whyThreads},
	"heartbeatThreadPoolNums":                {Reason: whyThreads},
	"endTransactionThreadPoolNums":           {Reason: whyThreads},
	"putThreadPoolQueueCapacity":             {Reason: whyThreads},
	"replyThreadPoolQueueCapacity":           {Reason: whyThreads},
	"queryThreadPoolQueueCapacity":           {Reason: whyThreads},
	"clientManagerThreadPoolQueueCapacity":   {Reason: whyThreads},
	"consumerManagerThreadPoolQueueCapacity": {Reason: whyThreads},
	"heartbeatThreadPoolQueueCapacity":       {Reason: whyThreads},
	"endTransactionPoolQueueCapacity":        {Reason: whyThreads},
	"brokerFastFailureEnable":                {Reason: whyFastFail},
	"waitTimeMillsInSendQueue":               {Reason: whyFastFail},
	"waitTimeMillsInPullQueue":               {Reason: whyFastFail},
	"waitTimeMillsInHeartbeatQueue":          {Reason: whyFastFail},
	"waitTimeMillsInTransactionQueue":        {Reason: whyFastFail},
	"startAcceptSendRequestTimeStamp":        {Reason: "a node serves sends as soon as it leads past its Raft barrier"},

	// Offsets, registration, statistics.
	"flushConsumerOffsetInterval":        {Reason: whyOffsets},
	"flushConsumerOffsetHistoryInterval": {Reason: whyOffsets},
	"flushDelayOffsetInterval":           {Reason: whyOffsets},
	"forceRegister":                      {Reason: whyRegister},
	"enableDetailStat":                   {Reason: whyStats},
	"autoDeleteUnusedStats":              {Reason: whyStats},
	"enableScheduleMessageStats":         {Reason: whyStats},
	"debugLockEnable":                    {Reason: whyStats},
	"isolateLogEnable":                   {Reason: "logs go to one place (logFile, or stderr)"},
	"configBlackList":                    {Reason: whyRuntime},

	// Names, homes and topics.
	"rocketmqHome":                   {Reason: whyHome},
	"clusterTopicEnable":             {Reason: whyAutoTopic},
	"brokerTopicEnable":              {Reason: whyAutoTopic},
	"regionId":                       {Reason: whyCloud},
	"traceOn":                        {Reason: whyCloud},
	"commercialEnable":               {Reason: whyCloud},
	"commercialTimerCount":           {Reason: whyCloud},
	"commercialTransCount":           {Reason: whyCloud},
	"commercialBigCount":             {Reason: whyCloud},
	"commercialBaseCount":            {Reason: whyCloud},
	"highSpeedMode":                  {Reason: whyCloud},
	"maxDelayTime":                   {Reason: "delays are bounded by messageDelayLevel's last level"},
	"notifyConsumerIdsChangedEnable": {Reason: "consumers are told when their group changes unless that group turns it off (updateSubGroup -a false)"},

	// Filters.
	"enableConsumeQueueExt":         {Reason: whyFilterExt},
	"mappedFileSizeConsumeQueueExt": {Reason: whyFilterExt},
	"bitMapLengthConsumeQueueExt":   {Reason: whyFilterExt},
	"enableCalcFilterBitMap":        {Reason: whyFilterExt},
	"expectConsumerNumUseFilter":    {Reason: whyFilterExt},
	"maxErrorRateOfBloomFilter":     {Reason: whyFilterExt},
	"filterDataCleanTimeSpan":       {Reason: whyFilterExt},
	"filterSupportRetry":            {Reason: "retry topics are never filtered (a redelivered message matched once)", Only: "false"},

	// Features raftmq lacks: only the value that asks for nothing loads.
	"messageStorePlugIn":              {Reason: "raftmq has no store plug-ins", OnlyEmpty: true},
	"fetchNamesrvAddrByAddressServer": {Reason: "there is no address server: give namesrvAddr", Only: "false"},
	"filterServerNums":                {Reason: "class filter servers are not supported (SQL92 and tags are)", Only: "0"},
	"enableLmq":                       {Reason: "light message queues (LMQ) are not supported", Only: "false"},
	"enableMultiDispatch": {Reason: "multi-dispatch (LMQ) is not supported; a message carrying INNER_MULTI_DISPATCH is refused with MESSAGE_ILLEGAL (13) naming the property " +
		"(RocketMQ with the key off stores it on its topic only)", Only: "false"},
	"maxLmqConsumeQueueNum":                    {Reason: "light message queues (LMQ) are not supported"},
	"enableScheduleAsyncDeliver":               {Reason: "delayed messages are delivered by the leader's schedule service through Raft"},
	"scheduleAsyncDeliverMaxPendingLimit":      {Reason: "delayed messages are delivered by the leader's schedule service through Raft"},
	"scheduleAsyncDeliverMaxResendNum2Blocked": {Reason: "delayed messages are delivered by the leader's schedule service through Raft"},
	"brokerPermission":                         {Reason: "a broker is always readable and writable; stop writes to a broker group with wipeWritePerm, to one topic with updateTopicPerm", Only: "6"},
}, whyThreads, true)

// IgnoredKeys implements config.Ignorer: the RocketMQ keys a broker.conf may
// set that raftmq accepts without a field (one warning at start lists them).
func (c *BrokerConfig) IgnoredKeys() map[string]config.Ignored { return rocketmqBrokerKeys }
