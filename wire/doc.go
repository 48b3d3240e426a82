// Package wire is raftmq's vocabulary of RocketMQ wire types: every header,
// body and encoding that two sides of a connection share. The name server,
// the broker, the SDK (package client) and the admin CLI all declare their
// requests and answers with these types, so each format is written once.
//
// wire imports only package remoting (for the frame and its header
// mapping) and the standard library. It must never import a server package
// (broker, namesrv, ha, raftlog) nor anything heavy: the SDK depends on it,
// and every dependency here is shipped to every SDK user.
//
// Types here describe bytes on a connection, not bytes on disk. A server
// that persists one of them (the broker's Raft log and snapshots, the name
// server's KV file) keeps its own record type and converts, so a change to
// a wire struct never silently changes an on-disk format.
//
// # Files
//
//	doc.go                 this overview
//	route.go               topic routes: TopicRouteData, QueueData, BrokerData,
//	                       permission bits, MasterID; route encode/decode
//	cluster.go             ClusterInfo and TopicList; cluster encode/decode
//	fastjson.go            fastjson's legacy form (unquoted integer map keys)
//	                       and QuoteLegacyKeys, which both decoders use
//	topic.go               DataVersion, TopicConfig, TopicConfigSerializeWrapper;
//	                       TBW102, SCHEDULE_TOPIC_XXXX, %RETRY% and %DLQ% names,
//	                       SystemTopic (RocketMQ's TopicValidator.isSystemTopic)
//	subscription_group.go  SubscriptionGroupConfig, its defaults and the
//	                       all-groups answer (SubscriptionGroupWrapper)
//	register.go            REGISTER_BROKER body (plain JSON and the zlib
//	                       compact layout), BodyCRC32, ErrBadBody
//	namesrv_headers.go     request/response headers of the name server's codes
//	kv.go                  KVTable and the order-topic KV namespace
//	heartbeat.go           HEART_BEAT body, consumer enums (MessageModel,
//	                       ConsumeFromWhere, consume types), SubscriptionData,
//	                       consumer-list and connection-list answers, lock bodies,
//	                       CHECK_CLIENT_CONFIG body, expression types
//	queue.go               MessageQueue as JSON bodies carry it
//	queue_table.go         queue-keyed stats tables (TopicOffset, OffsetWrapper)
//	                       in fastjson's object-key form: write and read
//	headers_send.go        send request headers (long and a…n names, AppendExt),
//	                       send response header, the leader-address ext key
//	not_leader.go          the remark of a not-leader answer (raftmq) and its check
//	headers_pull.go        pull request/response headers and PullFlag bits
//	headers_offset.go      consumer-offset, queue-offset, search, consume-stats
//	                       and reset-offset headers
//	headers_client.go      consumer-group, unregister-client and send-back headers
//	headers_admin.go       create/delete topic, group, query/view message and
//	                       leadership-transfer headers
//	headers_catchup.go     CATCHUP_READ (raftmq): a catching-up member's reads
//	                       of its leader's retained log and queue units
//	raft_status.go         RAFT_STATUS and LEADERSHIP_TRANSFER answers (raftmq):
//	                       RaftStatus, CatchupStatus, PromotionStatus,
//	                       LeadershipTransferResult
//	admin_tools.go         what RocketMQ's tools send and read: broker stats,
//	                       consume stats lists, producer connections, consumer
//	                       running info, consume-queue units, group cloning;
//	                       QuoteObjectKeys for fastjson's object map keys
//	headers_reply.go       request-reply properties (CORRELATION_ID, REPLY_TO_CLIENT,
//	                       TTL, CLUSTER, MSG_TYPE), the reply topic name and
//	                       PUSH_REPLY_MESSAGE_TO_CLIENT's header
//	headers_txn.go         END_TRANSACTION and CHECK_TRANSACTION_STATE headers,
//	                       the transaction system topics and properties
//	message.go             the stored-message format: magic codes, sysflags,
//	                       layout offsets, the strict codec (AppendMessage,
//	                       DecodeMessage, CheckEntry), the entry CRC, properties
//	entry.go               DecodeEntry, the lenient reader a client uses
//	msgid.go               offset msgIds (OffsetMsgID, ParseMessageID)
//	batch.go               SEND_BATCH_MESSAGE body (EncodeBatch, DecodeBatch)
//	headers_acl.go         plain ACL administration headers (codes 50-53)
//	properties.go          message property names both sides read
//	message_errors.go      the codecs' errors and DecodeError
package wire
