// Package console is raftmq's web console: a page and a JSON API served
// on a name server's monitoring HTTP port (/console/ and /api/), which
// RocketMQ leaves to a separate Java dashboard.
//
// The name server supplies what it knows in process (routes, cluster
// tables, its gossip pool); the rest comes from the brokers through the
// SDK's admin client: RAFT_STATUS (30001) from every registered member for
// the cluster map, GET_TOPIC_STATS_INFO (202) per topic and leader for
// queue offsets, GET_BROKER_CONSUME_STATS (317) per leader for every
// consumer group's lag, QUERY_MESSAGE and VIEW_MESSAGE_BY_ID for message
// lookups, LEADERSHIP_TRANSFER for the Raft actions. Each collection is
// cached for a second, so any number of polling browsers cost the brokers
// one request per collection; rates are offset differences between two
// collections.
//
// The console sits at layer 4: it imports namesrv and client, which are
// siblings at layer 3 and may not import each other. cmd/raftmq mounts
// it (namesrv and dev).
//
// Security: a request whose Host does not name the console is refused
// (DNS rebinding; host.go). The reads are as open as /metrics (which binds
// 127.0.0.1 by default). Actions and message bodies need the console's admin account
// (consoleAccessKey/consoleSecretKey) as HTTP basic auth, compared in
// constant time, with refused credentials limited per remote address
// (login.go); without an account configured every action is refused
// and the page says so. Actions take a JSON body and refuse a foreign
// Origin, so a cross-site form cannot post one. Broker requests are
// signed with the same account, so brokers with aclEnable check it too.
//
// # Files
//
//   - console.go: Options, Console (New, Handler, Mount, Close), the
//     admin client, the per-collection caches and rates.
//   - cluster.go: GET /api/cluster: groups, members, leader, term, lag
//     (client.Admin.RaftGroups), gossip state.
//   - topics.go: GET /api/topics: topics and per-queue offsets and rates.
//   - groups.go: GET /api/groups: consumer groups and lag per queue.
//   - message.go: GET /api/message: lookup by key, client msgId or offset
//     msgId.
//   - actions.go: the admin account check, POST /api/raft/transfer and
//     /api/raft/balance (client.Admin's TransferLeadership and
//     PlanLeaderBalance, as raftmq admin balanceLeaders).
//   - host.go: the Host check of every request (consoleAllowedHosts).
//   - login.go: the back-off of refused credentials per remote address.
//   - errors.go: the package's sentinels.
//   - static/: index.html, console.js, console.css, embedded with
//     go:embed (no build step, no external resources).
//
// The API is documented in docs/console.md.
package console
