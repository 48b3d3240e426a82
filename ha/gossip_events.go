package ha

import (
	"reflect"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
	"go.uber.org/zap"
)

// EventKind is what happened to a member.
type EventKind int

const (
	// EventJoin: a node joined the pool, or came back after having left
	// or been declared dead (a restart, or a refuted false positive).
	EventJoin EventKind = iota + 1
	// EventUpdate: a live node changed its NodeMeta (role, term, ...).
	EventUpdate
	// EventLeave: a node left gracefully (Close); it announced it.
	EventLeave
	// EventDead: a node stopped answering probes and its suspicion timed
	// out; it crashed, hung, or is partitioned away.
	EventDead
)

// String names the kind for logs.
func (k EventKind) String() string {
	switch k {
	case EventJoin:
		return "join"
	case EventUpdate:
		return "update"
	case EventLeave:
		return "leave"
	case EventDead:
		return "dead"
	}
	return "unknown"
}

// MemberState is a member's state as this node knows it. memberlist's
// "suspect" state is not surfaced: a suspect member is still Alive here
// until its suspicion times out.
type MemberState int

const (
	// MemberAlive answers probes (or is suspected but not yet dead).
	MemberAlive MemberState = iota + 1
	// MemberLeft left gracefully.
	MemberLeft
	// MemberDead was declared dead by failure detection.
	MemberDead
)

// String names the state for logs.
func (s MemberState) String() string {
	switch s {
	case MemberAlive:
		return "alive"
	case MemberLeft:
		return "left"
	case MemberDead:
		return "dead"
	}
	return "unknown"
}

// Member is one node of the gossip pool as last reported by memberlist.
type Member struct {
	Name  string      // GossipConfig.Name of the node
	Addr  string      // gossip host:port
	Meta  NodeMeta    // zero value when the node's meta did not decode
	State MemberState // alive, left or dead
	Local bool        // this node itself
}

// Event is one membership change delivered to subscribers.
type Event struct {
	Kind   EventKind
	Member Member
	// At is when memberlist reported the change to this node, before any
	// queueing, so detection latency can be measured from it.
	At time.Time
}

// mlEvents adapts Gossip to memberlist.EventDelegate. memberlist calls it
// with its node lock held and never concurrently, so it only records the
// change in the member table and queues the event; subscribers run on the
// delivery goroutine and can never stall probing.
type mlEvents Gossip

func (e *mlEvents) NotifyJoin(n *memberlist.Node) {
	(*Gossip)(e).record(EventJoin, MemberAlive, n)
}

func (e *mlEvents) NotifyUpdate(n *memberlist.Node) {
	(*Gossip)(e).record(EventUpdate, MemberAlive, n)
}

func (e *mlEvents) NotifyLeave(n *memberlist.Node) {
	g := (*Gossip)(e)
	if g.leftGracefully(n) {
		g.record(EventLeave, MemberLeft, n)
		if n.Name != g.cfg.Name {
			g.askLeft(n)
		}
	} else {
		g.record(EventDead, MemberDead, n)
	}
	if n.Name != g.cfg.Name {
		// After record: a rejoin round that sees the new count sees the
		// member table with this member gone.
		g.losses.Add(1)
	}
}

// leftGracefully tells a graceful leave from a death. memberlist reports
// both through NotifyLeave and means to say which in Node.State, but in
// v0.7.0 that field is never set: its internal nodeState embeds Node and
// declares its own State field, which shadows Node.State, so the callback
// always sees StateAlive (hashicorp/memberlist#293, fix proposed in #321).
// The real state is in the nodeState that memberlist is holding locked
// while it calls us, so we read it from there by reflection; the layout is
// checked once (stateLayout) and, should a future memberlist change it, we
// fall back to Node.State — which is exactly what the upstream fix makes
// correct — and otherwise to "dead", the safe answer for a failure
// detector. Tests pin both outcomes.
func (g *Gossip) leftGracefully(n *memberlist.Node) bool {
	switch n.State {
	case memberlist.StateLeft:
		return true
	case memberlist.StateDead:
		return false
	}
	ml := g.ml.Load()
	if ml == nil || !stateLayout.ok {
		return false
	}
	// Safe without further locking: memberlist holds nodeLock for the whole
	// deadNode call that invoked NotifyLeave, on this goroutine.
	ns := reflect.ValueOf(ml).Elem().FieldByIndex(stateLayout.nodeMap).MapIndex(reflect.ValueOf(n.Name))
	if !ns.IsValid() || ns.IsNil() {
		return false
	}
	return memberlist.NodeStateType(ns.Elem().FieldByIndex(stateLayout.state).Int()) == memberlist.StateLeft
}

// stateLayout locates Memberlist.nodeMap (map[string]*nodeState) and
// nodeState.State, the unexported fields leftGracefully reads.
var stateLayout = func() (l struct {
	nodeMap, state []int
	ok             bool
}) {
	mt := reflect.TypeFor[memberlist.Memberlist]()
	f, ok := mt.FieldByName("nodeMap")
	if !ok || f.Type.Kind() != reflect.Map || f.Type.Key().Kind() != reflect.String ||
		f.Type.Elem().Kind() != reflect.Pointer || f.Type.Elem().Elem().Kind() != reflect.Struct {
		return l
	}
	// Only a State field declared on nodeState itself (depth 0) is the
	// real one; a promoted Node.State would be the shadowed, unset copy.
	sf, ok := f.Type.Elem().Elem().FieldByName("State")
	if !ok || len(sf.Index) != 1 || sf.Type != reflect.TypeFor[memberlist.NodeStateType]() {
		return l
	}
	l.nodeMap, l.state, l.ok = f.Index, sf.Index, true
	return l
}()

// record updates the member table and queues the event for subscribers.
func (g *Gossip) record(kind EventKind, state MemberState, n *memberlist.Node) {
	at := time.Now()
	meta, err := DecodeNodeMeta(n.Meta)
	m := Member{Name: n.Name, Addr: n.Address(), Meta: meta, State: state, Local: n.Name == g.cfg.Name}

	g.mu.Lock()
	g.members[n.Name] = m
	warn := false
	if err != nil {
		warn = !g.badMeta[n.Name]
		g.badMeta[n.Name] = true
	} else {
		delete(g.badMeta, n.Name)
	}
	if !m.Local && !g.closed {
		g.queue = append(g.queue, Event{Kind: kind, Member: m, At: at})
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
	g.mu.Unlock()

	if warn {
		// Once per member until its meta decodes again: a node on an
		// incompatible version would otherwise warn on every update.
		g.log.Warn("gossip member metadata does not decode; tracking it without meta",
			zap.String("member", n.Name), zap.String("addr", m.Addr), zap.Error(err))
	}
	if m.Local {
		return
	}
	lvl := g.log.Info
	if kind == EventUpdate {
		lvl = g.log.Debug
	}
	lvl("gossip member "+kind.String(),
		zap.String("member", n.Name), zap.String("addr", m.Addr),
		zap.String("kind", string(meta.Kind)), zap.String("brokerName", meta.BrokerName),
		zap.String("role", string(meta.Role)), zap.Uint64("term", meta.Term))
}

// Subscribe registers fn for every later membership change of other nodes
// (the local node's own changes are not reported). Calls happen one at a
// time, in the order memberlist reported the changes, on one goroutine
// owned by the Gossip; a slow fn delays later events but never gossip
// itself. Events still queued at Close are dropped; Close waits for a call
// in progress, so fn must not block indefinitely or call Close/Shutdown
// (UpdateMeta is fine: it fails with ErrClosed once closing). It returns a
// function that unsubscribes; an event already being delivered may still
// reach fn.
// To learn the members that joined before subscribing, call Members after
// Subscribe.
func (g *Gossip) Subscribe(fn func(Event)) (unsubscribe func()) {
	g.mu.Lock()
	g.nextSub++
	id := g.nextSub
	g.subs[id] = fn
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		delete(g.subs, id)
		g.mu.Unlock()
	}
}

// deliverLoop is the one goroutine that calls subscribers.
func (g *Gossip) deliverLoop() {
	defer g.wg.Done()
	for {
		select {
		case <-g.ctx.Done():
			return
		case <-g.wake:
		}
		for {
			ev, fns, ok := g.nextEvent()
			if !ok {
				break
			}
			for _, fn := range fns {
				fn(ev)
			}
			select {
			case <-g.ctx.Done():
				return
			default:
			}
		}
	}
}

// nextEvent pops the oldest queued event and snapshots the subscribers in
// subscription order.
func (g *Gossip) nextEvent() (Event, []func(Event), bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		return Event{}, nil, false
	}
	ev := g.queue[0]
	g.queue[0] = Event{}
	g.queue = g.queue[1:]
	if len(g.queue) == 0 {
		g.queue = nil // let the backing array go after a burst
	}
	ids := make([]uint64, 0, len(g.subs))
	for id := range g.subs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	fns := make([]func(Event), len(ids))
	for i, id := range ids {
		fns[i] = g.subs[id]
	}
	return ev, fns, true
}
