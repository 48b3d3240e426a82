package ha

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
)

// Gossip is one node's membership in the gossip pool: a memberlist
// instance, the node's published NodeMeta, a table of the members it has
// heard of, and the goroutine that delivers membership events.
type Gossip struct {
	cfg GossipConfig
	log *zap.Logger
	// now is the clock resyncLoop measures stalls with (time.Now; tests
	// make it jump).
	now func() time.Time

	// self is this node's advertised address, read once right after
	// memberlist.Create: memberlist rewrites its local node's fields
	// (Addr, Port, Meta) whenever it republishes it, without a lock a
	// reader could take.
	self atomic.Pointer[net.TCPAddr]

	// ml is set once by Start; memberlist callbacks may run before Start
	// has stored it, hence the atomic.
	ml atomic.Pointer[memberlist.Memberlist]

	// updateMu serializes UpdateMeta calls so that the meta memberlist
	// reads back in UpdateNode is the one being published; stop takes it
	// so that memberlist is never asked to update after Shutdown. Lock
	// order: updateMu before mu. Nothing calls into memberlist with mu held
	// (memberlist calls us with its own lock held, and we take mu there).
	updateMu sync.Mutex

	mu        sync.Mutex
	metaBytes []byte            // encoded local NodeMeta, served to memberlist
	meta      NodeMeta          // local NodeMeta
	members   map[string]Member // every member ever reported, by name
	badMeta   map[string]bool   // members whose meta failed to decode (warned once)
	subs      map[uint64]func(Event)
	nextSub   uint64
	queue     []Event // events waiting for the delivery goroutine
	started   bool
	closed    bool

	wake      chan struct{} // capacity 1: the queue is non-empty
	asks      chan string   // gossip addresses of members just reported left, for askLoop
	refuted   chan struct{} // capacity 1: this node refuted a claim about itself, for resyncLoop
	maybeDead chan struct{} // capacity 1: peers may have declared this node dead (MaybeDeclaredDead)
	// losses counts the other members reported dead or left; rejoinLoop
	// checks its seeds again whenever it moves.
	losses atomic.Uint64
	// ctx is cancelled by stop: it ends every goroutine and any seed
	// lookup in flight.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewGossip checks cfg and meta and prepares a node; nothing is bound until
// Start. log may be nil (no logging).
func NewGossip(cfg GossipConfig, meta NodeMeta, log *zap.Logger) (*Gossip, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b, err := meta.Encode()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Gossip{
		cfg:       cfg,
		log:       log.With(zap.String("node", cfg.Name)),
		now:       time.Now,
		metaBytes: b,
		meta:      meta,
		members:   make(map[string]Member),
		badMeta:   make(map[string]bool),
		subs:      make(map[uint64]func(Event)),
		wake:      make(chan struct{}, 1),
		asks:      make(chan string, askBacklog),
		refuted:   make(chan struct{}, 1),
		maybeDead: make(chan struct{}, 1),
		ctx:       ctx,
		cancel:    cancel,
	}, nil
}

// Start binds the gossip port (UDP and TCP), starts the delivery goroutine
// and tries once to join each configured seed. A node that reaches none of
// them keeps running alone — it may be the first of its pool — and the
// rejoin loop keeps every seed aware of it from then on (rejoinLoop): a
// seed that did not answer, or that restarted since, is joined within
// JoinRetryInterval of answering. ctx is checked before binding; the join
// attempt is bounded by gossipTcpTimeoutMs (the seeds are tried at once).
// Errors wrap ErrBind, ErrAlreadyStarted or ErrClosed.
func (g *Gossip) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	switch {
	case g.closed:
		g.mu.Unlock()
		return ErrClosed
	case g.started:
		g.mu.Unlock()
		return ErrAlreadyStarted
	}
	g.started = true
	g.mu.Unlock()

	mlc := g.cfg.memberlistConfig()
	mlc.Delegate = (*mlDelegate)(g)
	mlc.Events = (*mlEvents)(g)
	mlc.Logger = newMemberlistLoggerRefute(g.log, g.noteRefuted)
	ml, err := memberlist.Create(mlc)
	if err != nil {
		return fmt.Errorf("%w %s:%d: %v", ErrBind, g.cfg.BindAddr, g.cfg.BindPort, err)
	}
	n := ml.LocalNode()
	g.self.Store(&net.TCPAddr{IP: slices.Clone(n.Addr), Port: int(n.Port)})
	g.ml.Store(ml)
	g.wg.Add(3)
	go g.deliverLoop()
	go g.askLoop()
	go g.resyncLoop()
	g.log.Info("gossip started", zap.String("addr", g.Addr()), zap.String("seeds", g.cfg.Seeds))

	seeds := g.peerSeeds()
	if len(seeds) == 0 {
		return nil
	}
	set := &seedSet{addrs: seeds, state: make([]seedState, len(seeds))}
	g.joinSeeds(set)
	g.wg.Add(1)
	go g.rejoinLoop(set)
	return nil
}

// Join contacts the given gossip addresses (host:port) and merges state
// with every one that answers. It returns how many answered; the error
// wraps ErrJoin when none did.
func (g *Gossip) Join(seeds []string) (int, error) {
	ml := g.ml.Load()
	if ml == nil {
		return 0, ErrNotStarted
	}
	if g.isClosed() {
		return 0, ErrClosed
	}
	n, err := ml.Join(seeds)
	if n == 0 {
		if err == nil {
			err = errors.New("no address given")
		}
		return 0, fmt.Errorf("%w via %s: %v", ErrJoin, strings.Join(seeds, ","), err)
	}
	return n, nil
}

// askBacklog bounds the members waiting to be asked (askLoop); more
// leaving at once are left to the periodic push/pull.
const askBacklog = 16

// askLeft queues a member this node just recorded as left for askLoop.
// memberlist calls it with its node lock held: it never blocks.
func (g *Gossip) askLeft(n *memberlist.Node) {
	select {
	case g.asks <- n.Address():
	default:
		g.log.Debug("gossip: too many members left at once; not asking this one", zap.String("member", n.Name))
	}
}

// askLoop syncs state (a push/pull, what Join does) with each member this
// node has just recorded as left, once. memberlist never contacts a member
// it holds left again: no gossip, probe or push/pull. A stale "left"
// record, from a member's earlier process, beats the new process's alive
// whenever its incarnation is not lower, and a new process starts from 1:
// a node that merges such a record from a peer (a name server restarted
// since, so it holds only the new process) takes a live member for gone,
// and the member hears of it only from its own next push/pull with a
// holder of the claim (PushPullInterval, a random partner) or by chance
// from a broadcast. Asked directly, a live member learns the claim at once
// and refutes it with a higher incarnation, which everyone accepts. A
// member that really left has closed its gossip port, or is about to, so
// asking it costs a refused connection. Dead members are not asked: they
// still receive gossip for GossipToTheDeadTime, a remote "dead" merged by
// push/pull only makes them suspect (probed, refuted at once), and a dead
// member that cannot answer would hold this loop for TCPTimeout.
func (g *Gossip) askLoop() {
	defer g.wg.Done()
	for {
		select {
		case <-g.ctx.Done():
			return
		case addr := <-g.asks:
			_, err := g.Join([]string{addr})
			g.log.Debug("gossip: asked a member reported left", zap.String("addr", addr),
				zap.Bool("answered", err == nil), zap.Error(err))
		}
	}
}

// UpdateMeta publishes a new NodeMeta (a role or term change) and waits up
// to UpdateTimeout for memberlist to broadcast it. Other nodes see an
// EventUpdate. Before Start it only replaces the meta Start will publish.
// An ErrBroadcastTimeout error means the change is applied locally and will
// still spread through push/pull sync.
func (g *Gossip) UpdateMeta(meta NodeMeta) error {
	b, err := meta.Encode()
	if err != nil {
		return err
	}
	g.updateMu.Lock()
	defer g.updateMu.Unlock()
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return ErrClosed
	}
	g.meta, g.metaBytes = meta, b
	g.mu.Unlock()
	ml := g.ml.Load()
	if ml == nil {
		return nil
	}
	if err := ml.UpdateNode(g.cfg.UpdateTimeout); err != nil {
		return fmt.Errorf("%w: meta update after %v: %v", ErrBroadcastTimeout, g.cfg.UpdateTimeout, err)
	}
	return nil
}

// Meta returns the NodeMeta this node currently publishes.
func (g *Gossip) Meta() NodeMeta {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.meta
}

// Name is this node's gossip name.
func (g *Gossip) Name() string { return g.cfg.Name }

// Addr is the gossip host:port peers use to reach this node (useful with
// BindPort 0); empty before Start.
func (g *Gossip) Addr() string {
	a := g.self.Load()
	if a == nil {
		return ""
	}
	return a.String()
}

// Members returns every node this one has heard of, itself included,
// sorted by name, with its last known state: alive, left or dead. Dead and
// left nodes stay listed (as memberlist forgets them after
// GossipToTheDeadTime without telling anyone) until they rejoin.
func (g *Gossip) Members() []Member {
	g.mu.Lock()
	out := make([]Member, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	g.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// LiveMembers is Members filtered to MemberAlive.
func (g *Gossip) LiveMembers() []Member {
	all := g.Members()
	out := all[:0]
	for _, m := range all {
		if m.State == MemberAlive {
			out = append(out, m)
		}
	}
	return out
}

// Member looks one node up by name.
func (g *Gossip) Member(name string) (Member, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.members[name]
	return m, ok
}

// BrokerMember looks up the broker node that publishes Raft id raftID in
// the group brokerName of cluster. A member restarted under another gossip
// name is listed twice until the old entry is forgotten; the live entry
// wins.
func (g *Gossip) BrokerMember(cluster, brokerName, raftID string) (Member, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var found Member
	ok := false
	for _, m := range g.members {
		md := m.Meta
		if md.Kind != KindBroker || md.Cluster != cluster || md.BrokerName != brokerName || md.RaftID != raftID {
			continue
		}
		if !ok || m.State == MemberAlive {
			found, ok = m, true
		}
	}
	return found, ok
}

func (g *Gossip) isClosed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Close leaves the pool gracefully — the others report EventLeave, not
// EventDead — waiting up to LeaveTimeout for the leave broadcast, then
// shuts memberlist down and stops the goroutines (a member being asked by
// askLoop, or a seed being joined, may hold it for up to TCPTimeout). Safe
// to call more than once and after Shutdown.
func (g *Gossip) Close() error { return g.stop(true) }

// Shutdown stops gossiping without announcing it, exactly as a crash looks
// to the other nodes: they report EventDead once failure detection fires.
// Tests use it to simulate a crash; a process may also use it when it
// wants its peers to fail over from it. Safe to call more than once.
func (g *Gossip) Shutdown() error { return g.stop(false) }

func (g *Gossip) stop(leave bool) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.queue = nil
	g.mu.Unlock()

	// Stop our goroutines first: the rejoin loop must not push this node's
	// state to a peer after it left or "crashed", and a subscriber that
	// calls UpdateMeta now gets ErrClosed instead of waiting on updateMu.
	g.cancel()
	g.wg.Wait()

	// Wait out an UpdateNode in flight; memberlist must not be updated
	// after Shutdown.
	g.updateMu.Lock()
	defer g.updateMu.Unlock()
	var errs []error
	if ml := g.ml.Load(); ml != nil {
		if leave {
			if err := ml.Leave(g.cfg.LeaveTimeout); err != nil {
				errs = append(errs, fmt.Errorf("%w: leave after %v: %v", ErrBroadcastTimeout, g.cfg.LeaveTimeout, err))
			}
		}
		if err := ml.Shutdown(); err != nil {
			errs = append(errs, fmt.Errorf("ha: memberlist shutdown: %w", err))
		}
	}
	g.log.Info("gossip stopped", zap.Bool("left", leave))
	return errors.Join(errs...)
}

// mlDelegate adapts Gossip to memberlist.Delegate; only NodeMeta is used.
// The user-message hooks are no-ops: raftmq does not gossip payloads.
type mlDelegate Gossip

func (d *mlDelegate) NodeMeta(limit int) []byte {
	g := (*Gossip)(d)
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.metaBytes) > limit {
		// Encode already enforces MetaMaxSize, the only limit memberlist
		// passes; never hand memberlist more (it panics).
		return nil
	}
	return g.metaBytes
}

func (d *mlDelegate) NotifyMsg([]byte)                {}
func (d *mlDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (d *mlDelegate) LocalState(bool) []byte          { return nil }
func (d *mlDelegate) MergeRemoteState([]byte, bool)   {}

// MaybeDeclaredDead receives a value when this node's peers may have
// declared it dead, so that a name server may have dropped it from its
// routes: it refuted a claim about itself, or it stood still long enough
// to be suspected (resyncLoop). A broker then registers again at once
// instead of at its next period. The value comes once the node has synced
// with its seeds, so that they hold it alive when it registers. Values
// coalesce: one may stand for several.
func (g *Gossip) MaybeDeclaredDead() <-chan struct{} { return g.maybeDead }

// noteMaybeDead signals MaybeDeclaredDead; it never blocks.
func (g *Gossip) noteMaybeDead(why string) {
	g.log.Debug("gossip: peers may have declared this node dead", zap.String("why", why))
	select {
	case g.maybeDead <- struct{}{}:
	default:
	}
}

// noteRefuted queues a resync for resyncLoop. memberlist calls it (through
// its log line) with its node lock held: it never blocks.
func (g *Gossip) noteRefuted() {
	select {
	case g.refuted <- struct{}{}:
	default:
	}
}
