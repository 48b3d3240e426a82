// Package client is raftmq's Go SDK: a RocketMQ-compatible producer, push
// and lite pull consumers, and an admin client, speaking RocketMQ's
// remoting protocol, so it works against raftmq and against ordinary
// RocketMQ 4.x brokers.
//
// The pieces, each in its own file:
//
//   - message.go, message_decode.go, batch.go, uniqkey.go: the message model,
//     the stored-message decoder for pull bodies, the batch body encoder and
//     the client-side unique id (UNIQ_KEY).
//   - rebalance*.go: the six RocketMQ queue-allocation strategies.
//   - route.go, publishinfo.go: name-server lookups and the per-topic route
//     cache with its periodic refresh.
//   - fault.go: latency fault tolerance (RocketMQ's sendLatencyFaultEnable).
//   - producer*.go: the Producer with its functional options, retries and
//     leader following; autobatch.go: the AutoBatch option, which lets
//     concurrent sends of a topic share SEND_BATCH_MESSAGE requests while
//     each caller keeps its own result and retries.
//   - consumer_*.go, processqueue.go, pull.go, offsetstore.go,
//     subscription.go: PushConsumer (concurrent and orderly listeners),
//     LitePullConsumer, and the machinery they share (rebalancing,
//     heartbeats, long polling, flow control, offset commits, queue locks).
//   - admin.go: the Admin client behind `raftmq admin`.
//
// Every blocking call takes a context; options are validated when a client
// is built; errors are sentinels and typed errors from errors.go, checked
// with errors.Is and errors.As. Nothing is global: each client owns its
// remoting client, its route cache and every goroutine it starts, and
// Close stops them all.
package client
