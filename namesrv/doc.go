// Package namesrv is raftmq's name server: RocketMQ's NamesrvController,
// RouteInfoManager, request processors and KVConfigManager, speaking the
// RocketMQ remoting protocol so unmodified RocketMQ clients and brokers can
// use it.
//
// The name server keeps routes in memory only (brokers re-register every
// 30 s) plus a small KV table persisted to one JSON file. Name servers never
// talk to each other; brokers register with all of them. The route,
// cluster, topic-config and header types it answers with live in package
// wire, shared with brokers and the SDK.
//
// # Files
//
//   - namesrv.go: NameServer (New, Start, Run, Shutdown, Close), processor wiring
//     (three pools: route lookups, the brokers' own requests, the rest),
//     the inactive-broker scan and the batch-unregistration goroutines,
//     RemoveBroker/RemoveBrokerByAddr for gossip, connection-close cleanup.
//   - config.go: Config (RocketMQ NamesrvConfig/NettyServerConfig keys,
//     logs), DefaultConfig, Validate (every bad setting).
//   - config_rocketmq.go: the RocketMQ 4.9 keys accepted without a field,
//     each with why it is ignored.
//   - routeinfo.go: the RouteInfoManager tables under one RWMutex:
//     registration, data-version checks, heartbeats, route pickup, cluster
//     info, topic lists; routeinfo_remove.go: unregistration, expiry scan,
//     write-permission wipe/add, topic deletion.
//   - kvconfig.go: KVConfigManager, RocketMQ's {"configTable":…} file
//     written atomically.
//   - register.go, route.go, kv.go, admin.go: processors (103/104/904/322;
//     105/106; 100/101/102/219; 205/327/206/224/304/311-313/216/217); config_runtime.go:
//     GET/UPDATE_NAMESRV_CONFIG (319/318) and the switches they change.
//   - gossip.go: optional gossip membership; a broker that gossip declares
//     dead leaves the routes at once.
//   - metrics.go: requests by code, brokers, topics, live gossip brokers.
//   - console.go: ConsoleConfig (consoleEnable, consoleAccessKey,
//     consoleSecretKey, consoleAllowedHosts) and HandleHTTP, by which the raftmq command mounts
//     package console on the monitoring port; secrets shown as ******.
//   - auth.go: AuthConfig (clusterAuth*): REGISTER_BROKER,
//     UNREGISTER_BROKER, BROKER_HEARTBEAT, QUERY_DATA_VERSION and the
//     route and config writes must be signed by the cluster account, or
//     are refused NO_PERMISSION.
//   - errors.go: the package's sentinels.
//
// Locks: RouteInfoManager.mu and KVConfigManager.mu never nest. Nothing
// closes a connection while holding RouteInfoManager.mu: the expiry scan
// returns expired connections and the caller closes them, because the
// close callback re-enters the tables.
package namesrv
