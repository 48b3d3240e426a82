package broker

import (
	"context"
	"errors"
	"sync"
	"time"

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
// log may be nil.
func NewNode(cfg BrokerConfig, parts Parts, log *zap.Logger) (*Node, error) {
	g, err := NewGroup(cfg.GroupConfig, parts, cfg.RemotingAddr(), log)
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

// Close stops the controller (running requests get nodeCloseTimeout to
// answer) and then the Raft member. Idempotent.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), nodeCloseTimeout)
		defer cancel()
		n.closeErr = errors.Join(n.ctl.Shutdown(ctx), n.group.Close())
	})
	return n.closeErr
}
