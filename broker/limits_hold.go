package broker

import (
	"github.com/raftmq/raftmq/remoting"
)

// heldCount counts the pulls held by long polling, in total and per
// connection, against maxHeldPulls and maxHeldPullsPerConnection. Guarded
// by holdService.mu.
type heldCount struct {
	total  int
	byConn map[uint64]int
}

// admit counts one more pull of connection conn, or names the key that
// refuses it.
func (h *heldCount) admit(conn uint64, l LimitsConfig) string {
	switch {
	case h.total >= l.MaxHeldPulls:
		return "maxHeldPulls"
	case h.byConn[conn] >= l.MaxHeldPullsPerConnection:
		return "maxHeldPullsPerConnection"
	}
	if h.byConn == nil {
		h.byConn = map[uint64]int{}
	}
	h.total++
	h.byConn[conn]++
	return ""
}

// release uncounts one held pull of conn.
func (h *heldCount) release(conn uint64) {
	h.total--
	if n := h.byConn[conn] - 1; n > 0 {
		h.byConn[conn] = n
	} else {
		delete(h.byConn, conn)
	}
}

// heldPullRefusal answers a pull that found nothing and could not be held:
// SYSTEM_BUSY, after which the RocketMQ clients wait their exception
// delay before pulling again (an immediate PULL_NOT_FOUND would make them
// pull again at once, a busy loop).
func (c *Controller) heldPullRefusal(limit string) *remoting.RemotingCommand {
	l := c.live().LimitsConfig
	n := l.MaxHeldPulls
	if limit == "maxHeldPullsPerConnection" {
		n = l.MaxHeldPullsPerConnection
	}
	return c.refuse(limit, remoting.ResponseSystemBusy,
		"pull not held: broker %s already holds %d long-polling pulls (%s); pull again later", c.cfg.BrokerName, n, limit)
}
