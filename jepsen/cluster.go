package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/internal/proccluster"
	"github.com/raftmq/raftmq/remoting"
)

// ClusterName and GroupName are the names the suite's brokers register;
// with two groups the second is GroupName + "2" (see GroupNameOf).
const (
	ClusterName = "JepsenCluster"
	GroupName   = "broker-j"
)

// GroupNameOf is the brokerName (and dLegerGroup) of group g.
func GroupNameOf(g int) string {
	if g == 0 {
		return GroupName
	}
	return fmt.Sprintf("%s%d", GroupName, g+1)
}

// NodeState is what the suite did to a node process last.
type NodeState = proccluster.State

// Node states.
const (
	NodeDown    = proccluster.Down
	NodeRunning = proccluster.Running
	NodePaused  = proccluster.Paused
)

// Node is one broker process of the cluster.
type Node = proccluster.Node

// ClusterConfig shapes the cluster the suite starts.
type ClusterConfig struct {
	// Dir holds data, confs and process logs.
	Dir string
	// Binary is the raftmq executable (see BuildBinary).
	Binary string
	// CrashFS says Binary was built with the crashfs tag: a SIGKILL of a
	// node loses what its store had not synced (crash-unsynced needs it).
	CrashFS bool
	// SlowFS says Binary was built with the slowfs tag: each node gets a
	// flush-delay control file (slow-disk needs it; nemesis_chaos.go).
	SlowFS bool
	// SegmentBytes is mappedFileSizeCommitLog (small, so segments roll).
	SegmentBytes int64
	// ElectionMillis is raftHeartbeatTimeout = raftElectionTimeout (LAN).
	ElectionMillis int
	// Queues is defaultTopicQueueNums.
	Queues int
	// Groups is the number of 3-node broker groups (1 or 2; 0 means 1).
	Groups int
	// WrapCommand, when set, wraps a node's command line (e.g. strace for
	// fsync fault injection); nil for the plain binary.
	WrapCommand func(node int, argv []string) []string
	// Netns puts every process in its own network namespace (see
	// netnsNet); partitions become iptables DROP rules. Needs root, ip and
	// iptables (NetnsSupport).
	Netns bool
	// TmpfsNode, when ≥ 0, mounts a tmpfs of TmpfsBytes on that node's
	// data directory (root only) for the disk-full nemesis.
	TmpfsNode  int
	TmpfsBytes int64
	// KeepQueuesDir, when set, receives a copy of a member's ConsumeQueues
	// of the suite's topics each time a nemesis is about to wipe its data
	// (keepQueuesOf); "" keeps none.
	KeepQueuesDir string
}

// Cluster is a name server and one or two 3-node Raft groups, each a
// separate OS process started by the suite (package proccluster), with
// Link proxies between the Raft peers (proxy mode) or each in its own
// network namespace (netns mode).
type Cluster struct {
	cfg   ClusterConfig
	log   *zap.Logger
	procs *proccluster.Cluster
	net   *netnsNet // nil in proxy mode
	tmpfs string    // mounted tmpfs, "" when none
	Nodes []*Node
	links map[[2]int]*Link
	rc    *remoting.Client
	wipes atomic.Int32 // wipes whose ConsumeQueues were kept, numbering their copies
}

// BuildBinary builds ./cmd/raftmq of the module containing the working
// directory into dir and returns the executable's path.
func BuildBinary(ctx context.Context, dir string) (string, error) {
	return BuildBinaryTags(ctx, dir, "")
}

// BuildBinaryTags is BuildBinary with build tags (e.g. "crashfs": the
// store keeps file data in process memory until it is synced, so SIGKILL
// loses unsynced writes; see storage/crashfs.go). The executable is
// named raftmq, or raftmq-<tags> with tags.
func BuildBinaryTags(ctx context.Context, dir, tags string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("%w: go env GOMOD: %v", ErrBuild, err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("%w: not inside the raftmq module", ErrBuild)
	}
	bin := filepath.Join(dir, "raftmq")
	args := []string{"build", "-o", bin}
	if tags != "" {
		bin += "-" + strings.ReplaceAll(tags, ",", "-")
		args = []string{"build", "-tags", tags, "-o", bin}
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/raftmq")...)
	cmd.Dir = filepath.Dir(gomod)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: %v: %s", ErrBuild, err, b)
	}
	return bin, nil
}

// NewCluster places the processes (proxy mode: loopback ports from
// package freeport; netns mode: one namespace per process), starts the
// Raft proxies and writes every conf file. Nothing runs until Start.
func NewCluster(cfg ClusterConfig, log *zap.Logger) (*Cluster, error) {
	if log == nil {
		log = zap.NewNop()
	}
	c := &Cluster{cfg: cfg, log: log, links: map[[2]int]*Link{}}
	pcfg := proccluster.Config{
		Dir: cfg.Dir, Launch: proccluster.Binary(cfg.Binary), ClusterName: ClusterName, GroupName: GroupNameOf,
		Groups: cfg.Groups, Queues: cfg.Queues, SegmentBytes: cfg.SegmentBytes, Logger: log,
		// Info: what a member did at a start after a crash (CommitLog
		// recovery, queues truncated, snapshot restored) is the evidence
		// an anomaly's diagnosis needs.
		BrokerLogLevel: "info",
		BrokerConf: []string{
			"maxMessageSize=65536",
			fmt.Sprintf("raftHeartbeatTimeout=%d", cfg.ElectionMillis),
			fmt.Sprintf("raftElectionTimeout=%d", cfg.ElectionMillis),
			fmt.Sprintf("raftLeaderLeaseTimeout=%d", cfg.ElectionMillis*5/6),
			"raftTransportTimeout=2000",
			"raftSnapshotInterval=5000",
			"raftSnapshotThreshold=2048",
			// Check-backs within a fault's hold time, so transactions whose
			// END_TRANSACTION a fault lost are decided before the drain ends.
			// A half is discarded after transactionCheckMax unanswered
			// checks (RocketMQ's rule: 15, a quarter hour at its 60 s
			// interval); at 1 s that budget must outlast the longest time a
			// fault keeps the producer from answering (a hold and the
			// reconnect after it), or a committed transaction is discarded.
			"transactionTimeOut=1000",
			"transactionCheckInterval=1000",
			"transactionCheckMax=60",
			// A restarted member's scrub reads its closed segments within
			// seconds (bitflip-segment waits for it).
			"raftScrubBytesPerSecond=67108864",
		},
		Wrap: c.wrap,
	}
	if cfg.Netns {
		net, err := newNetns(3*max(cfg.Groups, 1), log.Named("netns"))
		if err != nil {
			return nil, err
		}
		c.net = net
		pcfg.Place = func(n *Node) error {
			if n.Index < 0 {
				n.Host, n.ListenPort = net.NamesrvIP(), netnsNamesrvPort
				return nil
			}
			n.Host, n.ListenPort, n.RaftPort = net.NodeIP(n.Index), netnsBrokerPort, netnsRaftPort
			return nil
		}
	} else {
		pcfg.PeerAddr = func(from, to *Node) string { return c.Link(from.Index, to.Index).Addr() }
	}
	procs, err := proccluster.New(pcfg)
	if err != nil {
		return c.failNew(err)
	}
	c.procs, c.Nodes = procs, procs.Nodes
	if c.net == nil {
		for _, from := range c.Nodes {
			for _, to := range procs.GroupNodes(from.Group) {
				if from == to {
					continue
				}
				l, err := newLink(from.Index, to.Index, fmt.Sprintf("127.0.0.1:%d", to.RaftPort), log.Named("proxy"))
				if err != nil {
					return c.failNew(err)
				}
				c.links[[2]int{from.Index, to.Index}] = l
			}
		}
	}
	if cfg.TmpfsNode >= 0 && cfg.TmpfsNode < len(c.Nodes) && cfg.TmpfsBytes > 0 {
		if err := c.mountTmpfs(c.Nodes[cfg.TmpfsNode].DataDir, cfg.TmpfsBytes); err != nil {
			return c.failNew(err)
		}
	}
	if err := procs.WriteConfs(); err != nil {
		return c.failNew(err)
	}
	rcfg := remoting.DefaultClientConfig()
	rcfg.ConnectTimeout, rcfg.DefaultTimeout = time.Second, 2*time.Second
	c.rc = remoting.NewClient(rcfg, log.Named("status"))
	return c, nil
}

// failNew undoes what NewCluster set up.
func (c *Cluster) failNew(err error) (*Cluster, error) {
	_ = c.closeLinks()
	c.unmountTmpfs()
	if c.net != nil {
		_ = c.net.Close()
	}
	return nil, err
}

// wrap puts a process's command line under the fault wrapper a nemesis
// set (members only), then into the process's namespace (outermost, so a
// strace wrapper runs inside the namespace too).
func (c *Cluster) wrap(n *Node, argv []string) []string {
	if n.Index >= 0 && c.cfg.WrapCommand != nil {
		argv = c.cfg.WrapCommand(n.Index, argv)
	}
	argv = c.slowFSEnv(n, argv)
	if c.net != nil {
		id := n.ID
		if n.Index < 0 {
			id = "ns"
		}
		argv = c.net.Wrap(id, argv)
	}
	return argv
}

func (c *Cluster) groups() int { return max(c.cfg.Groups, 1) }

// Groups is the number of broker groups.
func (c *Cluster) Groups() int { return c.groups() }

// GroupNodes lists the indexes of group g's nodes.
func (c *Cluster) GroupNodes(g int) []int {
	var out []int
	for _, n := range c.procs.GroupNodes(g) {
		out = append(out, n.Index)
	}
	return out
}

// Mode names the network mode for the report.
func (c *Cluster) Mode() string {
	if c.net != nil {
		return fmt.Sprintf("%s (10.201.%d.0/24)", ModeNetns, c.net.subnet)
	}
	return ModeProxy
}

// NamesrvAddr is the name server's address.
func (c *Cluster) NamesrvAddr() string { return c.procs.NS.Addr() }

// Link is the proxy carrying the connections node from opens to node to.
func (c *Cluster) Link(from, to int) *Link { return c.links[[2]int{from, to}] }

// Start launches the name server and every node and waits until each
// group has a leader serving writes.
func (c *Cluster) Start(ctx context.Context) error {
	if err := c.procs.Start(c.procs.NS); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if err := c.StartNode(n.Index); err != nil {
			return err
		}
	}
	if err := c.WaitLeader(ctx, 30*time.Second); err != nil {
		return err
	}
	// A leader needs only two nodes: make sure none died at start (a
	// port taken, a bad conf), or the run would silently lack a replica.
	for _, n := range c.Nodes {
		if n.Exited() {
			return fmt.Errorf("%w: %s exited at start (see %s)", ErrNotReady, n.ID, n.LogPath)
		}
	}
	return nil
}

// StartNode launches node i (again) from its conf file.
func (c *Cluster) StartNode(i int) error { return c.procs.Start(c.Nodes[i]) }

// KillNode sends SIGKILL to node i (its process group: a wrapper such as
// strace and the broker it traces) and waits for the process to be
// reaped. A node already down is left alone.
func (c *Cluster) KillNode(i int) error {
	n := c.Nodes[i]
	if n.State() == NodeDown {
		return nil
	}
	if _, err := c.procs.Kill(n); err != nil && !errors.Is(err, proccluster.ErrNotRunning) {
		return err
	}
	c.rc.CloseConn(n.Addr())
	return nil
}

// PauseNode sends SIGSTOP to node i.
func (c *Cluster) PauseNode(i int) error { return c.procs.Pause(c.Nodes[i]) }

// ResumeNode sends SIGCONT to node i.
func (c *Cluster) ResumeNode(i int) error { return c.procs.Resume(c.Nodes[i]) }

// Isolate blocks both directions between every node in a and every
// node in b. In proxy mode only Raft traffic is cut; in netns mode every
// packet between the nodes (Raft, gossip) is dropped, while clients and
// the name server still reach all of them.
func (c *Cluster) Isolate(a, b []int) error {
	var errs []error
	for _, i := range a {
		for _, j := range b {
			if i == j {
				continue
			}
			errs = append(errs, c.BlockOneWay(i, j), c.BlockOneWay(j, i))
		}
	}
	return errors.Join(errs...)
}

// BlockOneWay stops everything node from sends to node to, leaving
// to → from traffic flowing. Proxy mode: from's requests on links it
// dials and its answers on links to dials. Netns mode: to drops every
// packet from from (so from's TCP segments, including its ACKs, vanish).
func (c *Cluster) BlockOneWay(from, to int) error {
	if c.net != nil {
		return c.net.Drop(to, from)
	}
	fwd, back := c.Link(from, to).Blocked()
	c.Link(from, to).SetBlocked(true, back)
	fwd, back = c.Link(to, from).Blocked()
	c.Link(to, from).SetBlocked(fwd, true)
	return nil
}

// HealAll lifts every block on every link (every DROP rule in netns
// mode).
func (c *Cluster) HealAll() {
	if c.net != nil {
		if err := c.net.Flush(len(c.Nodes)); err != nil {
			c.log.Warn("heal: flushing iptables", zap.Error(err))
		}
		return
	}
	for _, l := range c.links {
		l.SetBlocked(false, false)
	}
}

// RaftStatus asks node i for its RAFT_STATUS.
func (c *Cluster) RaftStatus(ctx context.Context, i int) (*broker.RaftStatus, error) {
	resp, err := c.rc.InvokeSync(ctx, c.Nodes[i].Addr(), remoting.NewRequest(remoting.RequestRaftStatus, nil, nil))
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.ResponseSuccess {
		return nil, fmt.Errorf("jepsen: raft status of %s: code %d %s", c.Nodes[i].ID, resp.Code, resp.Remark)
	}
	var st broker.RaftStatus
	if err := json.Unmarshal(resp.Body, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Leader returns the index of group 0's serving leader, or -1.
func (c *Cluster) Leader(ctx context.Context) int { return c.LeaderOf(ctx, 0) }

// LeaderOf returns the index of the node of group g that reports itself
// serving as leader with the highest term, or -1.
func (c *Cluster) LeaderOf(ctx context.Context, g int) int {
	best, term := -1, uint64(0)
	for i, n := range c.Nodes {
		if n.State() != NodeRunning || n.Group != g {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		st, err := c.RaftStatus(sctx, i)
		cancel()
		if err == nil && st.State == "Leader" && st.Serving && st.Term >= term {
			best, term = i, st.Term
		}
	}
	return best
}

// WaitLeader polls until every group has a node serving as leader.
func (c *Cluster) WaitLeader(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		all := true
		for g := 0; g < c.groups() && all; g++ {
			all = c.LeaderOf(ctx, g) >= 0
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: no serving leader within %v (logs in %s)", ErrNotReady, timeout, c.cfg.Dir)
		case <-t.C:
		}
	}
}

// Close kills every process the suite started (by PID), closes the
// proxies and the status client.
func (c *Cluster) Close() error {
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, c.KillNode(n.Index))
	}
	_, _ = c.procs.Kill(c.procs.NS)
	errs = append(errs, c.closeLinks())
	if c.rc != nil {
		errs = append(errs, c.rc.Close())
	}
	c.unmountTmpfs()
	if c.net != nil {
		errs = append(errs, c.net.Close())
		c.net = nil
	}
	return errors.Join(errs...)
}

func (c *Cluster) closeLinks() error {
	var errs []error
	for _, l := range c.links {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// WaitCaughtUp polls until every node runs, answers, has applied what its
// group's leader had committed when the wait began, and has no full-data
// catch-up pending.
func (c *Cluster) WaitCaughtUp(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	target := make([]uint64, c.groups())
	var last []string // lagging nodes of the last complete round, for the error
	for {
		ok := true
		var behind []string
		for g := range target {
			if target[g] == 0 {
				if l := c.LeaderOf(ctx, g); l >= 0 {
					if st, err := c.RaftStatus(ctx, l); err == nil {
						target[g] = st.CommitIndex
					}
				}
			}
			if target[g] == 0 {
				ok = false
				continue
			}
			for _, i := range c.GroupNodes(g) {
				st, err := c.RaftStatus(ctx, i)
				switch {
				case err != nil:
					ok = false
					behind = append(behind, fmt.Sprintf("%s (%v)", c.Nodes[i].ID, err))
				case st.AppliedIndex < target[g]:
					ok = false
					behind = append(behind, fmt.Sprintf("%s at %d", c.Nodes[i].ID, st.AppliedIndex))
				case st.Catchup != nil && st.Catchup.Pending:
					// Its queues start at its snapshot until the older
					// entries are fetched: the final read would miss them.
					ok = false
					behind = append(behind, fmt.Sprintf("%s catching up (phase %q)", c.Nodes[i].ID, st.Catchup.Phase))
				}
			}
		}
		if ok {
			return nil
		}
		if ctx.Err() == nil {
			last = behind
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: nodes not caught up to commit indexes %v within %v: %s", ErrNotReady, target, timeout, strings.Join(last, ", "))
		case <-t.C:
		}
	}
}
