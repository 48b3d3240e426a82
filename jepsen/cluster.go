package jepsen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker"
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
type NodeState int

// Node states.
const (
	NodeDown NodeState = iota
	NodeRunning
	NodePaused
)

// Node is one broker process of the group.
type Node struct {
	Index      int
	ID         string // Raft id (dLegerSelfId), unique over the cluster
	Group      int    // index of the node's broker group
	Host       string // address the node listens on (127.0.0.1 or its namespace's)
	ListenPort int    // remoting port; gossip uses +2
	RaftPort   int    // real Raft port the node binds
	DataDir    string
	ConfPath   string
	LogPath    string

	mu    sync.Mutex
	cmd   *exec.Cmd     // guarded by mu
	state NodeState     // guarded by mu
	done  chan struct{} // closed when cmd has been waited for; guarded by mu
}

// Addr is the node's remoting address.
func (n *Node) Addr() string { return fmt.Sprintf("%s:%d", n.Host, n.ListenPort) }

// State is the node's current state.
func (n *Node) State() NodeState {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state
}

// PID is the running process's id, 0 when down.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.state == NodeDown {
		return 0
	}
	return n.cmd.Process.Pid
}

// ClusterConfig shapes the cluster the suite starts.
type ClusterConfig struct {
	// Dir holds data, confs and process logs.
	Dir string
	// Binary is the raftmq executable (see BuildBinary).
	Binary string
	// CrashFS says Binary was built with the crashfs tag: a SIGKILL of a
	// node loses what its store had not synced (crash-unsynced needs it).
	CrashFS bool
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
}

// Cluster is a name server and one 3-node Raft group, each a separate OS
// process started by the suite, with Link proxies between the Raft peers
// (proxy mode) or each in its own network namespace (netns mode).
type Cluster struct {
	cfg    ClusterConfig
	log    *zap.Logger
	nsHost string
	nsPort int
	net    *netnsNet // nil in proxy mode
	tmpfs  string    // mounted tmpfs, "" when none
	nsCmd  *exec.Cmd
	nsDone chan struct{}
	Nodes  []*Node
	links  map[[2]int]*Link
	rc     *remoting.Client
}

// BuildBinary builds ./cmd/raftmq of the module containing the working
// directory into dir and returns the executable's path.
func BuildBinary(ctx context.Context, dir string) (string, error) {
	return BuildBinaryTags(ctx, dir, "")
}

// BuildBinaryTags is BuildBinary with build tags (e.g. "crashfs": the
// store keeps file data in process memory until it is synced, so SIGKILL
// loses unsynced writes; see broker/store/crashfs.go). The executable is
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

// Port band for proxy mode. A broker uses listenPort-2 (VIP channel),
// listenPort, +2 (gossip, TCP and UDP) and +3 (metrics); none of these is
// reserved while the process is down (a killed node restarts on the same
// ports). Inside the kernel's ephemeral range any outgoing connection or
// ":0" listener may take one meanwhile (seen: a restarted node's gossip
// port taken, "address already in use"), so the suite allocates below it.
const (
	portBandLow  = 20000
	portBandHigh = 32000
	portBlock    = 8 // VIP, listen, -, gossip, metrics, raft, spare
)

// portsFree reports whether every port in ports is free for TCP and UDP
// on 127.0.0.1 right now.
func portsFree(ports ...int) bool {
	for _, q := range ports {
		t, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", q))
		if err != nil {
			return false
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", q))
		_ = t.Close()
		if err != nil {
			return false
		}
		_ = u.Close()
	}
	return true
}

// portAllocator hands out port blocks from the band, starting at a
// random block so concurrent runs rarely probe the same ones.
type portAllocator struct{ next int }

func newPortAllocator() *portAllocator {
	blocks := (portBandHigh - portBandLow) / portBlock
	return &portAllocator{next: portBandLow + portBlock*int(time.Now().UnixNano()%int64(blocks))}
}

// block returns the listen port of a free block: listenPort-2 (VIP),
// listenPort, +2 (gossip), +3 (metrics) and +4 (Raft) were all free.
func (a *portAllocator) block() (int, error) {
	for tries := 0; tries < (portBandHigh-portBandLow)/portBlock; tries++ {
		base := a.next
		a.next += portBlock
		if a.next+portBlock > portBandHigh {
			a.next = portBandLow
		}
		listen := base + 2
		if portsFree(base, listen, listen+2, listen+3, listen+4) {
			return listen, nil
		}
	}
	return 0, errors.New("jepsen: no free port block in 20000-32000")
}

// NewCluster allocates ports, starts the Raft proxies and writes every
// conf file. Nothing runs until Start.
func NewCluster(cfg ClusterConfig, log *zap.Logger) (*Cluster, error) {
	if log == nil {
		log = zap.NewNop()
	}
	c := &Cluster{cfg: cfg, log: log, links: map[[2]int]*Link{}, nsHost: "127.0.0.1"}
	if cfg.Netns {
		return c.newNetnsCluster()
	}
	var err error
	ports := newPortAllocator()
	if c.nsPort, err = ports.block(); err != nil {
		return nil, err
	}
	for i := 0; i < 3*c.groups(); i++ {
		n := &Node{Index: i, ID: fmt.Sprintf("n%d", i), Group: i / 3, Host: "127.0.0.1"}
		if n.ListenPort, err = ports.block(); err != nil {
			return nil, err
		}
		n.RaftPort = n.ListenPort + 4
		c.addNode(n)
	}
	for i := range c.Nodes {
		for j := range c.Nodes {
			if i == j || c.Nodes[i].Group != c.Nodes[j].Group {
				continue
			}
			l, err := newLink(i, j, fmt.Sprintf("127.0.0.1:%d", c.Nodes[j].RaftPort), log.Named("proxy"))
			if err != nil {
				_ = c.closeLinks()
				return nil, err
			}
			c.links[[2]int{i, j}] = l
		}
	}
	return c.finishNew()
}

func (c *Cluster) groups() int {
	if c.cfg.Groups < 1 {
		return 1
	}
	return c.cfg.Groups
}

// Groups is the number of broker groups.
func (c *Cluster) Groups() int { return c.groups() }

// GroupNodes lists the indexes of group g's nodes.
func (c *Cluster) GroupNodes(g int) []int {
	var out []int
	for _, n := range c.Nodes {
		if n.Group == g {
			out = append(out, n.Index)
		}
	}
	return out
}

// addNode fills node n's paths and appends it.
func (c *Cluster) addNode(n *Node) {
	n.DataDir = filepath.Join(c.cfg.Dir, n.ID)
	n.ConfPath = filepath.Join(c.cfg.Dir, n.ID+".conf")
	n.LogPath = filepath.Join(c.cfg.Dir, n.ID+".log")
	c.Nodes = append(c.Nodes, n)
}

// newNetnsCluster builds the namespaces; every member gets fixed ports on
// its own address.
func (c *Cluster) newNetnsCluster() (*Cluster, error) {
	net, err := newNetns(3*c.groups(), c.log.Named("netns"))
	if err != nil {
		return nil, err
	}
	c.net = net
	c.nsHost, c.nsPort = net.NamesrvIP(), netnsNamesrvPort
	for i := 0; i < 3*c.groups(); i++ {
		c.addNode(&Node{Index: i, ID: fmt.Sprintf("n%d", i), Group: i / 3, Host: net.NodeIP(i), ListenPort: netnsBrokerPort, RaftPort: netnsRaftPort})
	}
	return c.finishNew()
}

// finishNew mounts the tmpfs, writes the confs and opens the status
// client; on error it undoes what NewCluster set up.
func (c *Cluster) finishNew() (*Cluster, error) {
	fail := func(err error) (*Cluster, error) {
		_ = c.closeLinks()
		c.unmountTmpfs()
		if c.net != nil {
			_ = c.net.Close()
		}
		return nil, err
	}
	if c.cfg.TmpfsNode >= 0 && c.cfg.TmpfsNode < len(c.Nodes) && c.cfg.TmpfsBytes > 0 {
		if err := c.mountTmpfs(c.Nodes[c.cfg.TmpfsNode].DataDir, c.cfg.TmpfsBytes); err != nil {
			return fail(err)
		}
	}
	if err := c.writeConfs(); err != nil {
		return fail(err)
	}
	rcfg := remoting.DefaultClientConfig()
	rcfg.ConnectTimeout, rcfg.DefaultTimeout = time.Second, 2*time.Second
	c.rc = remoting.NewClient(rcfg, c.log.Named("status"))
	return c, nil
}

// Mode names the network mode for the report.
func (c *Cluster) Mode() string {
	if c.net != nil {
		return fmt.Sprintf("%s (10.201.%d.0/24)", ModeNetns, c.net.subnet)
	}
	return ModeProxy
}

// NamesrvAddr is the name server's address.
func (c *Cluster) NamesrvAddr() string { return fmt.Sprintf("%s:%d", c.nsHost, c.nsPort) }

// Link is the proxy carrying the connections node from opens to node to.
func (c *Cluster) Link(from, to int) *Link { return c.links[[2]int{from, to}] }

func (c *Cluster) writeConfs() error {
	if err := os.MkdirAll(c.cfg.Dir, 0o755); err != nil {
		return err
	}
	ns := fmt.Sprintf("listenAddr=%s\nlistenPort=%d\nkvConfigPath=%s\ngossipEnable=true\ngossipBindAddr=%s\ngossipBindPort=%d\n",
		c.nsHost, c.nsPort, filepath.Join(c.cfg.Dir, "namesrv", "kv.json"), c.nsHost, c.nsPort+2)
	if err := os.WriteFile(filepath.Join(c.cfg.Dir, "namesrv.conf"), []byte(ns), 0o644); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		var peers []string
		for _, m := range c.Nodes {
			if m.Group != n.Group {
				continue
			}
			addr := fmt.Sprintf("%s:%d", m.Host, m.RaftPort)
			if m != n && c.net == nil {
				addr = c.Link(n.Index, m.Index).Addr()
			}
			peers = append(peers, m.ID+"-"+addr)
		}
		conf := strings.Join([]string{
			"brokerClusterName=" + ClusterName,
			"brokerName=" + GroupNameOf(n.Group),
			"namesrvAddr=" + c.NamesrvAddr(),
			"brokerIP1=" + n.Host,
			"listenAddr=" + n.Host,
			fmt.Sprintf("listenPort=%d", n.ListenPort),
			"vipChannelEnabled=false",
			"autoCreateTopicEnable=true",
			fmt.Sprintf("defaultTopicQueueNums=%d", c.cfg.Queues),
			"storePathRootDir=" + n.DataDir,
			"flushDiskType=SYNC_FLUSH",
			fmt.Sprintf("mappedFileSizeCommitLog=%d", c.cfg.SegmentBytes),
			"maxMessageSize=65536",
			"mappedFileSizeConsumeQueue=600000",
			"maxHashSlotNum=50000",
			"maxIndexNum=200000",
			"enableDLegerCommitLog=true",
			"dLegerGroup=" + GroupNameOf(n.Group),
			"dLegerPeers=" + strings.Join(peers, ";"),
			"dLegerSelfId=" + n.ID,
			fmt.Sprintf("raftHeartbeatTimeout=%d", c.cfg.ElectionMillis),
			fmt.Sprintf("raftElectionTimeout=%d", c.cfg.ElectionMillis),
			fmt.Sprintf("raftLeaderLeaseTimeout=%d", c.cfg.ElectionMillis*5/6),
			"raftTransportTimeout=2000",
			"raftSnapshotInterval=5000",
			"raftSnapshotThreshold=2048",
			"gossipEnable=true",
			"gossipBindAddr=" + n.Host,
			fmt.Sprintf("gossipBindPort=%d", n.ListenPort+2),
			fmt.Sprintf("gossipSeeds=%s:%d", c.nsHost, c.nsPort+2),
			"",
		}, "\n")
		if err := os.WriteFile(n.ConfPath, []byte(conf), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// start launches argv with output appended to logPath. The child gets
// SIGKILL if the suite's process dies, so no broker outlives a crashed run.
func (c *Cluster) start(argv []string, logPath string) (*exec.Cmd, chan struct{}, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(done)
	}()
	return cmd, done, nil
}

// Start launches the name server and the three nodes and waits until a
// leader serves writes.
func (c *Cluster) Start(ctx context.Context) error {
	argv := []string{c.cfg.Binary, "namesrv", "-c", filepath.Join(c.cfg.Dir, "namesrv.conf")}
	if c.net != nil {
		argv = c.net.Wrap("ns", argv)
	}
	cmd, done, err := c.start(argv, filepath.Join(c.cfg.Dir, "namesrv.log"))
	if err != nil {
		return err
	}
	c.nsCmd, c.nsDone = cmd, done
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
		n.mu.Lock()
		done := n.done
		n.mu.Unlock()
		select {
		case <-done:
			return fmt.Errorf("%w: %s exited at start (see %s)", ErrNotReady, n.ID, n.LogPath)
		default:
		}
	}
	return nil
}

// StartNode launches node i (again) from its conf file.
func (c *Cluster) StartNode(i int) error {
	n := c.Nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state != NodeDown {
		return nil
	}
	argv := []string{c.cfg.Binary, "broker", "-c", n.ConfPath, "--log-level", "warn"}
	if c.cfg.WrapCommand != nil {
		argv = c.cfg.WrapCommand(i, argv)
	}
	if c.net != nil {
		// Outermost, so a strace wrapper runs inside the namespace too.
		argv = c.net.Wrap(n.ID, argv)
	}
	cmd, done, err := c.start(argv, n.LogPath)
	if err != nil {
		return err
	}
	n.cmd, n.done, n.state = cmd, done, NodeRunning
	c.log.Info("node started", zap.String("node", n.ID), zap.Int("pid", cmd.Process.Pid))
	return nil
}

// KillNode sends SIGKILL to node i (continuing it first if paused, so the
// kill is not deferred) and waits for the process to be reaped.
func (c *Cluster) KillNode(i int) error {
	n := c.Nodes[i]
	n.mu.Lock()
	if n.state == NodeDown {
		n.mu.Unlock()
		return nil
	}
	pid, done := n.cmd.Process.Pid, n.done
	// The whole process group: a wrapper (strace) and the broker it traces.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	n.state = NodeDown
	n.mu.Unlock()
	<-done
	c.rc.CloseConn(n.Addr())
	c.log.Info("node killed", zap.String("node", n.ID), zap.Int("pid", pid))
	return nil
}

// PauseNode sends SIGSTOP to node i.
func (c *Cluster) PauseNode(i int) error {
	return c.signal(i, syscall.SIGSTOP, NodeRunning, NodePaused)
}

// ResumeNode sends SIGCONT to node i.
func (c *Cluster) ResumeNode(i int) error {
	return c.signal(i, syscall.SIGCONT, NodePaused, NodeRunning)
}

func (c *Cluster) signal(i int, sig syscall.Signal, from, to NodeState) error {
	n := c.Nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state != from {
		return nil
	}
	if err := syscall.Kill(-n.cmd.Process.Pid, sig); err != nil {
		return err
	}
	n.state = to
	return nil
}

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
	if c.nsCmd != nil {
		_ = syscall.Kill(-c.nsCmd.Process.Pid, syscall.SIGKILL)
		<-c.nsDone
	}
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

// WaitCaughtUp polls until every node runs, answers, and has applied what
// its group's leader had committed when the wait began.
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
