package config

import "maps"

// WhyNettySockets is why RocketMQ's Netty socket and buffer keys are
// ignored by every raftmq server.
const WhyNettySockets = "Netty socket and buffer tuning: Go's net package owns the sockets"

// nettyServerThreadKeys and nettyServerSocketKeys are RocketMQ 4.9's
// NettyServerConfig fields, which broker.conf and namesrv.conf may both
// set; nettyClientThreadKeys and nettyClientSocketKeys are its
// NettyClientConfig fields (broker.conf only: the broker dials name
// servers and clients).
var (
	nettyServerThreadKeys = []string{"serverWorkerThreads", "serverCallbackExecutorThreads", "serverSelectorThreads",
		"serverOnewaySemaphoreValue", "serverAsyncSemaphoreValue"}
	nettyServerSocketKeys = []string{"serverSocketSndBufSize", "serverSocketRcvBufSize", "writeBufferHighWaterMark",
		"writeBufferLowWaterMark", "serverSocketBacklog", "serverPooledByteBufAllocatorEnable", "useEpollNativeSelector"}
	nettyClientThreadKeys = []string{"clientWorkerThreads", "clientCallbackExecutorThreads", "clientOnewaySemaphoreValue",
		"clientAsyncSemaphoreValue"}
	nettyClientSocketKeys = []string{"clientSocketSndBufSize", "clientSocketRcvBufSize", "clientPooledByteBufAllocatorEnable",
		"clientCloseSocketIfTimeout", "connectTimeoutMillis", "channelNotActiveInterval", "clientChannelMaxIdleTimeSeconds"}
)

// WithNettyKeys returns keys plus the Netty keys a server accepts and
// ignores: NettyServerConfig's, and NettyClientConfig's too when client
// is set. Thread-pool keys get threadsReason (each server says where its
// own pools are sized), socket keys WhyNettySockets. A key already in keys
// keeps its entry.
func WithNettyKeys(keys map[string]Ignored, threadsReason string, client bool) map[string]Ignored {
	out := map[string]Ignored{}
	add := func(names []string, reason string) {
		for _, k := range names {
			out[k] = Ignored{Reason: reason}
		}
	}
	add(nettyServerThreadKeys, threadsReason)
	add(nettyServerSocketKeys, WhyNettySockets)
	if client {
		add(nettyClientThreadKeys, threadsReason)
		add(nettyClientSocketKeys, WhyNettySockets)
	}
	maps.Copy(out, keys)
	return out
}
