package devcluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/internal/freeport"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/wire"
)

// Options shape a cluster. The zero value of every field but Dir has a
// default suited to tests.
type Options struct {
	// Dir holds the name server's KV file and one data directory per
	// member (Dir/n0, Dir/n1, ...). Required.
	Dir string
	// ClusterName is every member's brokerClusterName (DefaultCluster).
	ClusterName string
	// Groups is the number of broker groups (1): broker-a, broker-b, ...
	Groups int
	// Members is the number of Raft members per group (3).
	Members int
	// NamesrvPort is the name server's port; 0 takes one from freeport.
	NamesrvPort int
	// NamesrvGossip turns on the name server's gossip pool (namesrv port
	// +2), so it hears of a dead member within a second; members join it
	// by default.
	NamesrvGossip bool
	// Ports gives member m of group g its remoting and Raft ports; nil
	// takes both from freeport.
	Ports func(g, m int) (listen, raft int)
	// VIPChannel keeps each member's VIP channel (listenPort−2) on, as a
	// real broker has it; tests leave it off.
	VIPChannel bool
	// SegmentBytes is mappedFileSizeCommitLog (16 MiB).
	SegmentBytes int
	// ConsumeQueueEntries is the entries per consume-queue file (20,000).
	ConsumeQueueEntries int
	// IndexSlots and IndexEntries size each index file (5,000 and 20,000).
	IndexSlots, IndexEntries int
	// Logger receives the name server's and every member's logs, named
	// "namesrv" and by Raft id; nil discards them.
	Logger *zap.Logger
	// Configure, when set, has the last word on each member's config
	// (before Derive): intervals, pool sizes, preferred leader.
	Configure func(g, m int, cfg *broker.BrokerConfig)
	// InMemory runs every member on in-memory parts (broker.NewInmemParts,
	// one InmemNetwork per cluster): no fsync and no Raft TCP, for tests
	// whose point is not durability. Remoting stays on TCP, so clients
	// connect as they would to disk members. Kill, Stop and Restart keep a
	// member's in-memory store, log, stable store and snapshots, as a
	// process restart keeps its files. The dLegerPeers addresses are only
	// names then (listen port+4 unless Ports says otherwise).
	InMemory bool
}

func (o *Options) fill() error {
	if o.Dir == "" {
		return errors.New("devcluster: Options.Dir is required")
	}
	if o.ClusterName == "" {
		o.ClusterName = "DefaultCluster"
	}
	o.Groups = max(o.Groups, 1)
	if o.Members < 1 {
		o.Members = 3
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = 16 << 20
	}
	if o.ConsumeQueueEntries == 0 {
		o.ConsumeQueueEntries = 20_000
	}
	if o.IndexSlots == 0 {
		o.IndexSlots = 5000
	}
	if o.IndexEntries == 0 {
		o.IndexEntries = 20_000
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return nil
}

// GroupName is the brokerName of group g: broker-a, broker-b, ...
func GroupName(g int) string { return fmt.Sprintf("broker-%c", 'a'+g) }

// Member is one Raft member of a group: its config and, while it runs,
// its broker node (Raft member and request processors). Kill, Stop and
// Restart change Group and Node; read them from the goroutine that calls
// those.
type Member struct {
	Config broker.BrokerConfig
	Group  *broker.Group // Node's Raft member; nil while down
	Node   *broker.Node  // nil while down
	log    *zap.Logger
	// parts are the member's in-memory parts once it first started
	// (Options.InMemory), kept for its restarts.
	parts *broker.Parts
	// raftCut keeps the member cut off its Raft network across restarts
	// (SetRaftPartitioned).
	raftCut bool
}

// ID is the member's Raft id (dLegerSelfId).
func (m *Member) ID() string { return m.Config.Raft.DLegerSelfID }

// Addr is the member's remoting address.
func (m *Member) Addr() string { return m.Config.RemotingAddr() }

// Running reports whether the member is up.
func (m *Member) Running() bool { return m.Node != nil }

// Cluster is a running name server and its broker groups.
type Cluster struct {
	opts    Options
	ns      *namesrv.NameServer
	members [][]*Member          // [group][member]
	net     *broker.InmemNetwork // Raft network of every group (Options.InMemory)
}

// Start starts the name server and every member, and returns without
// waiting for leaders (see WaitReady). On error nothing is left running.
func Start(opts Options) (c *Cluster, err error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	c = &Cluster{opts: opts}
	if opts.InMemory {
		c.net = broker.NewInmemNetwork()
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
			c = nil
		}
	}()
	if err := c.startNamesrv(); err != nil {
		return c, err
	}
	for g := range opts.Groups {
		cfgs, err := c.groupConfigs(g)
		if err != nil {
			return c, err
		}
		var ms []*Member
		for _, cfg := range cfgs {
			ms = append(ms, &Member{Config: cfg, log: opts.Logger.Named(cfg.Raft.DLegerSelfID)})
		}
		c.members = append(c.members, ms)
		for m := range ms {
			if err := c.Restart(g, m); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

func (c *Cluster) startNamesrv() error {
	cfg := namesrv.DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort = "127.0.0.1", c.opts.NamesrvPort
	if cfg.ListenPort == 0 {
		p, err := freeport.Port()
		if err != nil {
			return err
		}
		cfg.ListenPort = p
	}
	cfg.KVConfigPath = filepath.Join(c.opts.Dir, "namesrv", "kvConfig.json")
	cfg.GossipEnable = c.opts.NamesrvGossip
	ns, err := namesrv.New(cfg, c.opts.Logger.Named("namesrv"))
	if err != nil {
		return err
	}
	if err := ns.Start(); err != nil {
		return err
	}
	c.ns = ns
	return nil
}

// groupConfigs builds the member configs of group g.
func (c *Cluster) groupConfigs(g int) ([]broker.BrokerConfig, error) {
	o := &c.opts
	type ports struct{ listen, raft int }
	ps := make([]ports, o.Members)
	for m := range ps {
		if o.Ports != nil {
			ps[m].listen, ps[m].raft = o.Ports(g, m)
			continue
		}
		var err error
		if ps[m].listen, err = freeport.Port(); err != nil {
			return nil, err
		}
		if o.InMemory {
			// A name on the in-memory network, never bound: the port
			// a broker derives for Raft, inside the listen port's slot.
			ps[m].raft = ps[m].listen + 4
			continue
		}
		if ps[m].raft, err = freeport.Port(); err != nil {
			return nil, err
		}
	}
	id := func(m int) string { return fmt.Sprintf("n%d", g*o.Members+m) }
	var peers []string
	for m, p := range ps {
		peers = append(peers, fmt.Sprintf("%s-127.0.0.1:%d", id(m), p.raft))
	}
	var out []broker.BrokerConfig
	for m, p := range ps {
		cfg := broker.DefaultConfig()
		cfg.BrokerClusterName, cfg.BrokerName = o.ClusterName, GroupName(g)
		cfg.ListenAddr, cfg.BrokerIP1, cfg.ListenPort = "127.0.0.1", "127.0.0.1", p.listen
		cfg.VipChannelEnabled = o.VIPChannel
		cfg.NamesrvAddr = c.NamesrvAddr()
		cfg.Store.StorePathRootDir = filepath.Join(o.Dir, id(m))
		cfg.Store.MappedFileSizeCommitLog = o.SegmentBytes
		cfg.Store.MappedFileSizeConsumeQueue = o.ConsumeQueueEntries * store.CQUnitSize
		cfg.Store.MaxHashSlotNum, cfg.Store.MaxIndexNum = o.IndexSlots, o.IndexEntries
		cfg.Raft.DLegerPeers = strings.Join(peers, ";")
		cfg.Raft.DLegerSelfID = id(m)
		if o.Configure != nil {
			o.Configure(g, m, &cfg)
		}
		if err := cfg.Derive(); err != nil {
			return nil, err
		}
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		out = append(out, cfg)
	}
	return out, nil
}

// NamesrvAddr is the name server's address.
func (c *Cluster) NamesrvAddr() string { return c.ns.Addr().String() }

// Namesrv is the cluster's name server (to mount the web console on).
func (c *Cluster) Namesrv() *namesrv.NameServer { return c.ns }

// Groups is the number of broker groups.
func (c *Cluster) Groups() int { return len(c.members) }

// Members lists group g's members.
func (c *Cluster) Members(g int) []*Member { return c.members[g] }

// Member is member m of group g.
func (c *Cluster) Member(g, m int) *Member { return c.members[g][m] }

// Leader is the index of the running member of group g that leads now,
// or −1.
func (c *Cluster) Leader(g int) int {
	for i, m := range c.members[g] {
		if m.Group != nil && m.Group.IsLeader() {
			return i
		}
	}
	return -1
}

// Restart opens member m of group g on its files (on its in-memory parts
// with Options.InMemory) and starts its request processors. A running
// member is left alone.
func (c *Cluster) Restart(g, m int) error {
	mb := c.members[g][m]
	if mb.Node != nil {
		return nil
	}
	parts, err := c.openParts(mb)
	if err != nil {
		return err
	}
	node, err := broker.NewNode(mb.Config, parts, mb.log)
	if err != nil {
		return err
	}
	if err := node.Start(); err != nil {
		return errors.Join(err, node.Close())
	}
	mb.Group, mb.Node = node.Group(), node
	return nil
}

// openParts returns mb's parts: disk parts built from its config (files
// under its directory, TCP transport), or its in-memory parts, created at
// its first start and given a new transport at every restart.
func (c *Cluster) openParts(mb *Member) (broker.Parts, error) {
	cfg := mb.Config.GroupConfig
	if c.net == nil {
		return broker.OpenDiskParts(cfg, mb.log)
	}
	var parts broker.Parts
	if mb.parts == nil {
		var err error
		if parts, err = broker.NewInmemParts(cfg, c.net); err != nil {
			return broker.Parts{}, err
		}
	} else if mb.raftCut {
		parts = c.net.ReopenPartitioned(*mb.parts)
	} else {
		parts = c.net.Reopen(*mb.parts)
	}
	mb.parts = &parts
	return parts, nil
}

// SetRaftPartitioned cuts member m of group g off its group's Raft
// network (true) or joins it again (false); Options.InMemory only. The
// cut outlives Stop, Kill and Restart, as a partition outlives a process
// restart: a member restarted behind it receives nothing its peers send,
// from its first moment. Remoting is not cut: clients, the name server
// and the peers' remoting requests still reach it. A member that never
// started has no Raft network to cut: that is an error.
func (c *Cluster) SetRaftPartitioned(g, m int, cut bool) error {
	if c.net == nil {
		return errors.New("devcluster: SetRaftPartitioned needs Options.InMemory")
	}
	mb := c.members[g][m]
	if mb.parts == nil {
		return fmt.Errorf("devcluster: member %d of group %d has not started: it has no Raft network to cut", m, g)
	}
	mb.raftCut = cut
	c.net.SetPartitioned(mb.parts.Transport.LocalAddr(), cut)
	return nil
}

// Kill stops member m of group g the way a crash looks to its peers: Raft
// stops first (no leadership transfer; the followers notice the silence),
// then the remoting server closes its connections. Its files (or in-memory
// parts) are closed cleanly, so Restart finds them as a process restart
// would.
func (c *Cluster) Kill(g, m int) {
	mb := c.members[g][m]
	if mb.Node == nil {
		return
	}
	_ = mb.Group.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = mb.Node.Controller().Shutdown(ctx)
	cancel()
	mb.Group, mb.Node = nil, nil
}

// Stop shuts member m of group g down as SIGTERM does (Node.Close): a
// leader hands leadership off first, then the request processors stop
// (leaving the gossip pool, answering parked pulls), then Raft.
func (c *Cluster) Stop(g, m int) error {
	mb := c.members[g][m]
	if mb.Node == nil {
		return nil
	}
	err := mb.Node.Close()
	mb.Group, mb.Node = nil, nil
	return err
}

// notReady says what keeps the cluster from being ready ("" when the name
// server routes a master for every group and has every running member
// registered): the first group short of that, with its routed ids and
// what its members believe, so a start that times out names its cause.
func (c *Cluster) notReady() string {
	ci := c.ns.Routes().ClusterInfo()
	for g, ms := range c.members {
		bd, ok := ci.BrokerAddrTable[GroupName(g)]
		var routed map[int64]string
		if ok {
			routed = bd.BrokerAddrs
		}
		running := 0
		var seen []string
		for _, m := range ms {
			if !m.Running() {
				continue
			}
			running++
			seen = append(seen, fmt.Sprintf("%s@%s leader=%v raft=%s term=%d", m.ID(), m.Addr(), m.Group.IsLeader(), m.Group.Raft().State(), m.Group.Term()))
		}
		if routed[wire.MasterID] == "" || len(routed) < running {
			return fmt.Sprintf("%s routes %v for %d running members [%s]", GroupName(g), routed, running, strings.Join(seen, "; "))
		}
	}
	return ""
}

// RoutedLeader is the address the name server routes as group g's master
// ("" when none).
func (c *Cluster) RoutedLeader(g int) string {
	return c.ns.Routes().ClusterInfo().BrokerAddrTable[GroupName(g)].BrokerAddrs[wire.MasterID]
}

// WaitReady waits until the name server routes a master for every group
// and has every running member registered, or until ctx ends.
func (c *Cluster) WaitReady(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		why := c.notReady()
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devcluster: not ready (a master routed and every member registered per group): %s: %w", why, ctx.Err())
		case <-t.C:
		}
	}
}

// Close stops every member (request processors first, then Raft) and the
// name server. A member already killed is skipped.
func (c *Cluster) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	for _, ms := range c.members {
		for _, m := range ms {
			if m.Node != nil {
				errs = append(errs, m.Node.Controller().Shutdown(ctx))
			}
		}
	}
	for _, ms := range c.members {
		for _, m := range ms {
			if m.Group != nil {
				errs = append(errs, m.Group.Close())
			}
			m.Group, m.Node = nil, nil
		}
	}
	if c.ns != nil {
		errs = append(errs, c.ns.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// TB is the part of testing.TB that MustStart needs (this package does not
// import testing, so `raftmq dev` does not link it).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// MustStart starts a cluster for a test under t.TempDir (unless opts.Dir
// is set), closes it when the test ends, and waits up to 15 s until it is
// ready.
func MustStart(t TB, opts Options) *Cluster {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	c, err := Start(opts)
	if err != nil {
		t.Fatalf("devcluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("%v", err)
	}
	return c
}
