// Package ha holds raftmq's high-availability pieces: who leads a broker
// group, moving leadership, and noticing dead nodes fast.
//
// Roles: a Raft observer plus a periodic reconcile tracks leadership; a new
// leader runs a barrier (its FSM is current) and the broker's before-leader
// hook before it reports itself leader, so a node serves as brokerId 0 only
// with an up-to-date state. Leadership transfer moves leadership to a named
// or the most caught-up member; the preferred-leader loop moves it back to
// preferredLeaderId.
//
// Gossip: every broker node and name server joins one memberlist pool,
// publishes a small NodeMeta (kind, cluster, brokerName, Raft id, role,
// term, addresses) and hears when others join, change role, leave or die.
// A name server uses the dead/leave events to drop a broker from routes at
// once instead of after the 120 s heartbeat expiry (RemoveGoneBrokers); a
// broker registers again when MaybeDeclaredDead says its peers may have
// declared it dead (it refuted a claim, or stood still).
// Gossip accelerates failover; it never decides leadership.
//
// # Files
//
//   - roles.go: the role observer (barrier before serving, change
//     callbacks); transfer.go: leadership transfer and the preferred-leader
//     loop.
//   - gossip.go: Gossip (start, join, metadata updates, members, close
//     with leave, shutdown without), and the ask loop that syncs once with
//     a member newly held left.
//   - gossip_seeds.go: the rejoin loop, which keeps the seeds aware of the
//     node (one that never answered, or restarted since).
//   - gossip_stall.go: the resync loop: after a refutation, or a stall (a
//     pause, starvation) long enough to be declared dead, the node syncs with
//     its seeds and signals MaybeDeclaredDead, since it may never hear a
//     death claim it would refute.
//   - gossip_events.go: membership events, the member table and the one
//     delivery goroutine; reading memberlist's real leave/dead state.
//   - gossip_config.go: GossipConfig (gossip* keys), the sub-second
//     defaults and their false-positive trade-off.
//   - gossip_hook.go: RemoveGoneBrokers for name servers.
//   - gossip_log.go: memberlist's log lines as zap debug entries.
//   - gossip_key.go: gossipSecretKey → memberlist's keyring (encrypted,
//     authenticated gossip; a rotation list).
//   - meta.go: NodeMeta's versioned binary layout (≤ 512 bytes, append-only
//     code tables), strict decoding.
//   - errors.go: the package's sentinels.
//
// Locks: updateMu → mu in Gossip; nothing calls into memberlist while
// holding mu. memberlist calls the event delegate with its own lock held, so
// the callback only updates the table and queues the event.
package ha
