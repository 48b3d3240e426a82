// Package client is raftmq's Go SDK: a RocketMQ-compatible producer, push
// and lite pull consumers, and an admin client, speaking RocketMQ's
// remoting protocol, so it works against raftmq and against ordinary
// RocketMQ 4.x brokers.
//
// The SDK imports only package wire (every header, body and codec both
// sides put on the wire), package remoting and small libraries: never a
// server package, Raft, memberlist, Prometheus or pprof, so a program using
// it carries none of them.
//
// Every blocking call takes a context; options are validated when a client
// is built; errors are sentinels and typed errors from errors.go, checked
// with errors.Is and errors.As. Nothing is global: each client owns its
// remoting client, its route cache and every goroutine it starts, and
// Close stops them all.
//
// # Lifecycle
//
// Producer, TransactionProducer, PushConsumer and LitePullConsumer are
// used alike: build with New*, configure (Subscribe, SubscribeSelector,
// Register*Listener, Assign) before Start(ctx), then Close(ctx). Start's ctx bounds only
// Start's own work (a consumer's route check, the brokers' check of SQL92
// subscriptions, first heartbeats and start offsets), not the
// client's life: each client has its own root context, cancelled by
// Close, from which every loop and in-flight SendAsync stops. Close(ctx)
// waits for every goroutine the client started, the listener calls in
// progress included; if ctx ends first it still commits what it can and
// closes the connections, and returns ctx's error. A push consumer's Close
// leaves the group's offsets at what its listener calls consumed: its
// offsets go only in its own commits (every PersistInterval, on hand-over
// and on Close), never with its pulls as the Java client's do, for a
// broker may run a pull sent earlier after a later commit and move the
// group's offset back. Start after Close
// returns ErrClosed; a second Close is a no-op. Admin runs no goroutines:
// NewAdmin returns it ready, and Close(ctx) closes its connections.
//
// # Leader elections
//
// Calls bound to a broker group's leader ride out a change of leader
// within their ctx (10 s when ctx has no deadline), as sends do: a
// not-leader answer naming the leader is followed at once; a member that
// names none or whose connection failed is avoided for a while and the
// group's next member asked, with a growing pause once all were tried
// (leader.go). A refusal by the leader itself (SERVICE_NOT_AVAILABLE
// without raftmq's not-leader remark: a full disk, a store closing) is no
// election and is not waited out: a send retries it RetryTimesWhenSendFailed
// times at once, as RocketMQ's clients do, then returns it as a
// *BrokerError with the broker's remark. SendOneway gets no answer and so
// cannot follow a leader change: until the route refresh, or another
// send's answer, names the new leader, its messages to a live deposed
// leader are dropped unseen (see SendOneway). This covers LitePullConsumer.Commit and Admin's CreateTopic,
// DeleteTopic, UpdateSubscriptionGroup, ResetOffsetByTime, TopicStatus,
// ConsumerProgress and message queries, each safe to repeat after a lost
// answer (a repeated ResetOffsetByTime rewinds consumers that moved on since
// the first once more). Commit and the cluster-wide CreateTopic, DeleteTopic
// and UpdateSubscriptionGroup ask all groups side by side under that one
// wait, so a group without a leader does not hold up the others. A Commit whose ctx ends
// before a leader takes its offsets returns an error, yet keeps them: the
// consumer sends them every PersistInterval until a leader does, and on
// Close (RocketMQ's lite pull consumer records a commit in memory and
// persists it on a timer). Every consumer's Close waits out an election
// for its offsets under the same bound; its error reports any it could not
// send. The queues a rebalance hands to other consumers have their offsets
// sent the same way, all groups side by side under one request timeout,
// and one no broker took is kept and sent every PersistInterval and on
// Close until one does, or until the queue's new owner has committed:
// brokers keep the last offset they are sent, so ours would then move the
// owner's back (consumer_offsets.go). A hand-over waits up to
// HandoverTimeout for the queue's listener calls in progress, and their
// results count: a concurrent call that returned in time has its
// send-backs awaited too (they share one request timeout), so the offset
// committed is past a message sent back and not past one whose
// send-back failed. A concurrent call that returns later has its result discarded
// (no offset, no send-back), as RocketMQ discards a dropped queue's: the
// next owner consumes its batch. An orderly queue keeps its broker lock
// until its listener call in progress has returned and a broker took its
// offset (that part for at most the 60 s a broker keeps a lock), so its
// next owner neither consumes beside the call nor starts at an older
// offset (consumer_rebalance.go). A queue that comes back while its
// offset is kept resumes there, unless the group's
// committed offset is past it; ConsumeFrom does not apply to it. A
// broadcasting consumer keeps the offset of a queue that left the route
// (in memory and its offsets file), and the queue resumes there when it
// comes back. A lite pull consumer without AutoCommit commits only
// through Commit and Close: an OFFSET_ILLEGAL answer moves only where it
// reads, as in RocketMQ's lite pull consumer. An OFFSET_ILLEGAL answer
// that moves a queue to or below a message the consumer already holds
// means the queue started over (a RocketMQ topic deleted and created
// again): every consumer kind drops what it holds of it and reads it
// afresh from there, as a broker's reset does. A kept
// offset undoes an admin's reset that moves the committed offset below
// it: the consumer cannot tell a reset from a new owner that is behind.
// Reset a group's offsets once its consumers have closed. A broker's
// reset, and the restart of a queue that started over, wait for the
// queue's listener calls no longer than HandoverTimeout too: past it the
// calls' results are discarded (a late commit would undo the new
// offset), and an orderly queue restarts only once its call returned. Calls
// given an address (BrokerRequest, BrokerConfig, CreateTopic and
// UpdateSubscriptionGroup with a broker address) ask that member; a
// request it refuses as its leader's (a not-leader answer) goes on to
// the group's leader under the same wait, while one any member answers
// is answered there.
//
// # Stuck listeners
//
// A listener call that does not return holds what it was given, but
// nothing more. A concurrent call past ConsumeTimeout (default 15 min,
// DefaultMQPushConsumer.consumeTimeout) has its messages sent back for
// redelivery through the retry topic, as RocketMQ's cleanExpiredMsg
// does, every ConsumeTimeout and lowest offsets first: each one sent
// back is let go, so the queue's committed offset moves past it, and the
// call's result, when it comes, is ignored for it; one whose send-back
// failed stays held, settled by its call if that returns first, else by
// a later round's send-back. Orderly calls are
// not timed out (their queue waits, as in RocketMQ). Hand-overs, resets
// and restarts wait for a call up to HandoverTimeout, so a stuck one
// holds up no rebalance; Close waits for it until its ctx ends.
//
// # Heartbeats
//
// A consumer heartbeats every member of its subscribed topics' broker
// groups at Start, every HeartbeatInterval and at once when a group's
// members change; a producer heartbeats, as its producer group, every
// ProducerHeartbeatInterval, the leader of each group of the topics whose
// routes it holds (those it sent to), and every member of the groups of
// the topics a requester or transaction producer tracks.
// A broker drops a client from its groups as soon as the client's
// connection to it closes, so, as RocketMQ's clients do on a channel
// becoming active (enableHeartbeatChannelEventListener), a client
// heartbeats a member again whenever it opens a new connection to it
// (its next call there redials), and a consumer the member took then
// rebalances at once: it is not left out of its group until the next
// interval, its queues taken by the others while it still consumes them.
//
// # Files
//
//   - options.go: the options every client takes and the producer's, and
//     innerProducer, which gives the producers a client runs for itself
//     (a push consumer's send-backs and dead letters, trace records) its
//     name servers, timeouts, credentials and TLS; consumer_options.go:
//     the consumers'; options_tls.go: WithTLS and WithTLSConfig.
//   - message.go, uniqkey.go, queue.go, sendresult.go, subscription.go: the
//     message model (deliver-at / deliver-after timers), the client-side unique id (UNIQ_KEY), message queues,
//     send results, subscriptions: tag expressions and MessageSelector
//     (Tags, SQL92).
//   - message_decode.go: MessageExt, read from pull bodies with
//     wire.DecodeEntry (bodies inflated, up to a bound: zlib, and the LZ4
//     and zstd frames RocketMQ 5 producers may send); headers.go: the send answer's
//     header read without reflection. Headers and bodies themselves are
//     package wire's.
//   - route.go, publishinfo.go: name-server lookups, the per-topic route
//     cache with its refresh, the learned leader of each group; leader.go:
//     what a failed call teaches about a group's leader, and onLeader, the
//     retry loop of calls bound to it.
//   - fault.go: latency fault tolerance (RocketMQ's sendLatencyFaultEnable).
//   - producer.go, producer_send.go: the Producer; the attempt loop with
//     retries, leader following (a not-leader answer's hint, distrusted for
//     a moment when it names a member that just failed) and the wait for an
//     election when there is nowhere else to go. producer_async.go:
//     SendAsync's callback path (the first request's answer handled where
//     it is read; the attempt loop on a goroutine only when the first
//     answer is not a success) and callbackQueue, which runs every
//     SendAsync's callback, from either path, in order, on a few
//     goroutines at once only when one blocks.
//   - idempotent.go: producer id and per-queue sequences for the broker's
//     dedup.
//   - producer_txn.go: TransactionProducer (half message, local transaction,
//     END_TRANSACTION following the leader; CHECK_TRANSACTION_STATE served
//     on the connection it came on).
//   - producer_heartbeat.go: the producer's heartbeats (one client id, to
//     the leader of each group of its cached routes, and every member of
//     the groups of the topics a requester or transaction producer tracks)
//     and the client id every client builds.
//   - conn_heartbeat.go: the heartbeat a consumer or producer sends a
//     member on a new connection to it.
//   - autobatch.go: the AutoBatch option, which lets concurrent sends of a
//     topic share SEND_BATCH_MESSAGE requests while each caller keeps its
//     own result and retries.
//   - selector.go: queue selectors for ordered sends.
//   - rebalance*.go: the six RocketMQ queue-allocation strategies.
//   - consumer_core.go, consumer_rebalance.go, consumer_pull.go,
//     processqueue.go, pull.go: what both consumers share (heartbeats,
//     rebalancing with hand-over, long-polling pull loops, flow control,
//     queue locks); consumer_offsets.go: offset commits riding out
//     elections, kept until a broker confirms them (Commit's, hand-overs',
//     Close's); consumer_api.go: the consumers' other broker requests
//     (heartbeat, group membership, queue locks, send-back, offset lookups).
//   - consumer_push.go, consumer_orderly.go: PushConsumer with concurrent
//     and orderly listeners, send-back; consumer_orderly_dlq.go: orderly
//     batches that exhausted MaxReconsumeTimes go to %DLQ%group through
//     the retry topic (a failed send is retried after the queue's pause,
//     and warned of at most once a minute per queue, with the number of
//     failed attempts since the last warning); consumer_timeout.go:
//     ConsumeTimeout's rounds; consumer_lite.go: LitePullConsumer;
//     consumer_undecodable.go: a message the SDK cannot decode goes to
//     %DLQ%group as stored (send-back at delay level -1) and its queue on,
//     not before a broker took it.
//   - request_reply.go: request-reply: Producer.Request (correlation id,
//     heartbeats tracking the request and reply topics' groups, the
//     PUSH_REPLY_MESSAGE_TO_CLIENT handler), NewReplyMessage and
//     Producer.Reply (SEND_REPLY_MESSAGE_V2 through the request's group).
//   - trace.go: the WithTrace option: Pub, SubBefore and SubAfter records
//     in RocketMQ's trace format, buffered and sent in the background to
//     RMQ_SYS_TRACE_TOPIC.
//   - offsetstore.go: remote (clustering) and local (broadcasting) offset
//     stores.
//   - admin.go, admin_json.go, admin_tools.go: the Admin client behind
//     `raftmq admin` (admin_tools.go: raw requests for mqadmin's remaining
//     commands, to an address or to a group's leader, unique-key lookup,
//     one-off pulls); admin_member.go:
//     AddRaftMember, RemoveRaftMember, ReplaceRaftMember; admin_raft.go:
//     RaftStatus, RaftGroups (every member's RAFT_STATUS merged per group),
//     TransferLeadership, PlanLeaderBalance and BalanceLeaders, which the
//     CLI's raft commands and the web console share.
//   - consumer_running_info.go, consumer_direct.go: the consumer's answers
//     to GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309),
//     which brokers relay from tools.
//   - credentials.go: WithCredentials, WithSecurityToken: every request
//     signed as RocketMQ's ACL clients sign them.
//   - errors.go: sentinels and typed errors.
//   - lifecycle.go: the bounded wait Close uses.
//
// Locks are taken in this order, any skipped: consumerCore.rebalanceMu,
// LitePullConsumer.mu, LitePullConsumer.consumedMu, a broker group's
// token in consumerCore.sending (a one-slot semaphore),
// consumerCore.releaseMu, consumerCore.mu, consumerCore.pendingMu, the
// offset store's locks. processQueue.mu is a leaf;
// processQueue.consumeMu is never taken while holding consumerCore.mu.
// The producer's locks (route manager, latency fault, sequencer,
// AutoBatch accumulator) never nest.
package client
