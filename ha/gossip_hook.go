package ha

import "go.uber.org/zap"

// BrokerRemover is the part of a name server that gossip needs:
// *namesrv.NameServer satisfies it (RemoveBrokerByAddr drops the broker
// registered at a remoting address from the route tables at once).
type BrokerRemover interface {
	RemoveBrokerByAddr(cluster, addr string) bool
}

// RemoveGoneBrokers subscribes to g and, whenever a broker node is
// reported dead or gracefully gone, removes it from r's routes right away
// instead of waiting for the name server's 120 s heartbeat expiry. Clients
// then stop routing to it on their next route refresh; the group's new
// leader replaces brokerId 0 by registering. It returns the unsubscribe
// function.
//
// A removal is skipped if, by the time the event is delivered, the node is
// alive again (a quick restart or a refuted false positive): its fresh
// registration must not be undone by a stale event.
func RemoveGoneBrokers(g *Gossip, r BrokerRemover, log *zap.Logger) (unsubscribe func()) {
	if log == nil {
		log = zap.NewNop()
	}
	return g.Subscribe(func(ev Event) {
		if ev.Kind != EventDead && ev.Kind != EventLeave {
			return
		}
		meta := ev.Member.Meta
		if meta.Kind != KindBroker || meta.RemotingAddr == "" {
			return
		}
		if cur, ok := g.Member(ev.Member.Name); ok && cur.State == MemberAlive {
			return
		}
		removed := r.RemoveBrokerByAddr(meta.Cluster, meta.RemotingAddr)
		log.Info("gossip: broker gone, removed from routes",
			zap.String("event", ev.Kind.String()), zap.String("member", ev.Member.Name),
			zap.String("cluster", meta.Cluster), zap.String("brokerName", meta.BrokerName),
			zap.String("addr", meta.RemotingAddr), zap.Bool("wasRegistered", removed))
	})
}
