package broker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"
)

// nodeCloseTimeout bounds how long Close lets running requests answer
// before it closes their connections.
const nodeCloseTimeout = 10 * time.Second

// Node is one broker node: its Raft group member (Group) and the request
// processors in front of it (Controller). Start or Run it, then Close it:
// Close returns once every goroutine the node started has returned.
type Node struct {
	group *Group
	ctl   *Controller

	closeOnce sync.Once
	closeErr  error
	// handedOffTo is the Raft id that took over leadership when Close
	// handed it off ("" when it did not); read after Close (tests).
	handedOffTo string
}

// OpenNode is NewNode on the production parts (OpenDiskParts).
func OpenNode(cfg BrokerConfig, log *zap.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	parts, err := OpenDiskParts(cfg.GroupConfig, log)
	if err != nil {
		return nil, err
	}
	return NewNode(cfg, parts, log)
}

// NewNode starts the node's Raft member on parts (which it owns from here
// on, see Parts) and builds its controller. Clients are served from Start.
// An empty member without raftJoin first asks the group's members whether
// the group runs already, and joins it instead of bootstrapping if so
// (member_join.go). log may be nil.
func NewNode(cfg BrokerConfig, parts Parts, log *zap.Logger) (*Node, error) {
	if log == nil {
		log = zap.NewNop()
	}
	g, err := newGroup(cfg.GroupConfig, parts, cfg.RemotingAddr(), log, groupOptions{joinCheck: runningGroupCheck(cfg, parts.Transport, log)})
	if err != nil {
		return nil, err
	}
	c, err := New(cfg, g, log)
	if err != nil {
		return nil, errors.Join(err, g.Close())
	}
	return &Node{group: g, ctl: c}, nil
}

// Group returns the node's Raft member.
func (n *Node) Group() *Group { return n.group }

// Controller returns the node's request processors.
func (n *Node) Controller() *Controller { return n.ctl }

// Addr is the advertised remoting address.
func (n *Node) Addr() string { return n.ctl.Addr() }

// Start listens for clients and starts the background services.
func (n *Node) Start() error { return n.ctl.Start() }

// Run starts the node, serves until ctx is done and closes it.
func (n *Node) Run(ctx context.Context) error {
	if err := n.Start(); err != nil {
		_ = n.Close() // the servers are down already; Close stops the rest
		return err
	}
	<-ctx.Done()
	return n.Close()
}

// Close is a planned stop (SIGTERM): on the leader it first hands
// leadership to the most caught-up follower (handOffLeadership), then it
// stops the controller (running requests get nodeCloseTimeout to answer)
// and the Raft member. Idempotent.
func (n *Node) Close() error { return n.close(true) }

// close stops the node; handOff false stops a leader without a transfer,
// which the others see like a crash (tests).
func (n *Node) close(handOff bool) error {
	n.closeOnce.Do(func() {
		if handOff {
			n.handedOffTo = n.handOffLeadership()
		}
		ctx, cancel := context.WithTimeout(context.Background(), nodeCloseTimeout)
		defer cancel()
		n.closeErr = errors.Join(n.ctl.Shutdown(ctx), n.group.Close())
	})
	return n.closeErr
}

var errShutdownTransferTimeout = errors.New("leadership transfer did not finish within shutdownTransferTimeout")

// handOffPoll is how often handOffLeadership looks for the new leader and
// its route.
const handOffPoll = 5 * time.Millisecond

// handOffNoTarget is the wait before another hand-off attempt when no
// member could take leadership over.
const handOffNoTarget = 100 * time.Millisecond

// handOffLeadership runs before a leader stops: it transfers leadership to
// the most caught-up follower able to campaign (Group.TransferLeadership) and waits
// until another member leads and the name servers route it as brokerId 0.
// Producers then see the write gap of a transfer (the target campaigns at
// once, caught up) instead of the followers' heartbeat timeout plus an
// election, and their route moves before this node's port closes. Should
// leadership come back meanwhile (the new leader's preferredLeaderId check
// may move it back to this node), it is handed off again, and a failed
// transfer is retried. The whole hand-off is bounded by
// ShutdownTransferTimeout; past it the node stops anyway and the group
// elects as after a crash. It returns the new leader's Raft id, "" when there was none.
// Followers, single-member groups and ShutdownTransferTimeout 0 skip it.
func (n *Node) handOffLeadership() string {
	g := n.group
	budget := g.cfg.ShutdownTransferTimeout
	if budget <= 0 || g.raft.State() != raft.Leader || !hasOtherVoter(g) {
		return ""
	}
	log, self := g.log, g.SelfID()
	start := time.Now()
	deadline := start.Add(budget)
	t := time.NewTicker(handOffPoll)
	defer t.Stop()
	var to, addr string
	for time.Now().Before(deadline) {
		if g.raft.State() == raft.Leader {
			to, addr = "", ""
			// Coalesced consumer offsets are committed by the leader only;
			// a follower drops them. Commit them while this node leads.
			n.ctl.offsets.flush()
			if err := n.transferBy(deadline); err != nil {
				// A target that could not catch up within an election
				// timeout, or leadership lost meanwhile: look again, and
				// retry while the budget lasts.
				log.Info("shutdown: leadership transfer failed; retrying within shutdownTransferTimeout", zap.Error(err))
				wait := t.C
				if errors.Is(err, ErrNoTransferTarget) {
					// Answered at once, not after a transfer attempt:
					// the members it names need time to change.
					wait = time.After(handOffNoTarget)
				}
				<-wait
			}
			continue
		}
		if id := g.LeaderID(); id != "" && id != self {
			to = id
			if a := g.LeaderAddr(); a != "" && a != n.Addr() {
				addr = a
				// Gossip only: no name server to wait for.
				if len(n.ctl.cfg.NameServers()) == 0 || n.ctl.routedMaster(deadline) == addr {
					log.Info("shutdown: leadership handed off", zap.String("to", to), zap.String("toAddr", addr),
						zap.Duration("took", time.Since(start)))
					return to
				}
			}
		}
		<-t.C
	}
	log.Warn("shutdown: hand-off not complete within shutdownTransferTimeout; stopping anyway",
		zap.String("to", to), zap.String("toAddr", addr), zap.Duration("shutdownTransferTimeout", budget))
	if g.raft.State() == raft.Leader {
		return ""
	}
	return to
}

// transferBy runs one leadership transfer, giving up at deadline (Raft
// itself gives up after an election timeout; Group.Close ends a transfer
// still running then).
func (n *Node) transferBy(deadline time.Time) error {
	done := make(chan error, 1)
	go func() { done <- n.group.TransferLeadership("") }()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return errShutdownTransferTimeout
	}
}

// hasOtherVoter reports whether the group's configuration has a voter
// besides this member (someone to hand leadership to).
func hasOtherVoter(g *Group) bool {
	f := g.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != g.SelfID() {
			return true
		}
	}
	return false
}

// routedMaster is the address the first answering name server routes as
// this broker group's brokerId 0, "" when none answers. With no name
// server configured (gossip only) it returns "" too.
func (c *Controller) routedMaster(deadline time.Time) string { return c.peers.master(deadline) }
