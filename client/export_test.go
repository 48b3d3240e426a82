package client

import (
	"time"

	"github.com/raftmq/raftmq/remoting"
)

// AdminRemoting is a's remoting client, so that the package's external
// tests can watch its calls with a remoting.RPCHook.
func AdminRemoting(a *Admin) *remoting.Client { return a.rc }

// LiteRemoting is the remoting client of l, started (see AdminRemoting).
func LiteRemoting(l *LitePullConsumer) *remoting.Client { return l.core.rc }

// PushRemoting returns the remoting clients of p, started: the consumer's
// own and that of the producer it sends failed messages back with.
func PushRemoting(p *PushConsumer) (consumer, sendBack *remoting.Client) {
	return p.core.rc, p.retry.rc
}

// SetSendBackRetry sets how long p waits before consuming again a message
// no broker took back (RocketMQ's fixed 5 s); call it before Start.
func SetSendBackRetry(p *PushConsumer, d time.Duration) { p.core.cfg.sendBackRetry = d }

// LeaderFollowWait sets how long a call without a context deadline waits
// for a group's new leader (default 10 s), so that a test proving the
// bound holds need not wait out the default.
func LeaderFollowWait(d time.Duration) Opt {
	return commonOpt(func(c *commonConfig) { c.leaderFollowWait = d })
}

// ProducerRemoting is the remoting client of p, started (see AdminRemoting).
func ProducerRemoting(p *Producer) *remoting.Client { return p.rc }

// len counts the batches queued for the consume pool.
func (q *workQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}
