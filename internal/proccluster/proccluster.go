package proccluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/freeport"
)

// Launcher turns raftmq arguments ("broker", "-c", conf, ...) into a
// command. Binary runs an executable; tests can run their own test binary
// as raftmq instead.
type Launcher func(args []string) *exec.Cmd

// Binary is the Launcher running the executable at path.
func Binary(path string) Launcher {
	return func(args []string) *exec.Cmd { return exec.Command(path, args...) }
}

// State is what was done to a node's process last.
type State int

// Node states.
const (
	Down State = iota
	Running
	Paused
)

// Node is one process: the name server or a broker group member.
type Node struct {
	Index      int    // position in Cluster.Nodes; −1 for the name server
	ID         string // Raft id (dLegerSelfId), unique over the cluster; "namesrv"
	Group      int    // index of the member's broker group
	Host       string // address the process listens on
	ListenPort int    // remoting port; gossip +2, metrics +3
	RaftPort   int    // Raft port the member binds
	DataDir    string
	ConfPath   string
	LogPath    string

	mu    sync.Mutex
	cmd   *exec.Cmd     // guarded by mu; nil before the first start
	state State         // guarded by mu
	done  chan struct{} // guarded by mu; closed when cmd has been waited for
}

// Addr is the node's remoting address.
func (n *Node) Addr() string { return fmt.Sprintf("%s:%d", n.Host, n.ListenPort) }

// MetricsAddr is the node's monitoring HTTP address (listenPort+3).
func (n *Node) MetricsAddr() string { return fmt.Sprintf("%s:%d", n.Host, n.ListenPort+3) }

// State is the node's current state.
func (n *Node) State() State {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state
}

// PID is the running process's id, 0 when down.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.state == Down {
		return 0
	}
	return n.cmd.Process.Pid
}

// Exited reports whether the node's process was started here and has
// exited on its own (it was not killed or stopped by this package).
func (n *Node) Exited() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state == Down || n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// Tail returns the last lines of the node's log, for error messages.
func (n *Node) Tail(lines int) string {
	b, err := os.ReadFile(n.LogPath)
	if err != nil {
		return ""
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// Config shapes the cluster.
type Config struct {
	// Dir holds every conf file, data directory and process log.
	Dir string
	// Launch starts a raftmq process.
	Launch Launcher
	// ClusterName is brokerClusterName.
	ClusterName string
	// GroupName is the brokerName (and dLegerGroup) of group g.
	GroupName func(g int) string
	// Groups is the number of 3-node groups (0 means 1).
	Groups int
	// Queues is defaultTopicQueueNums (4 when 0).
	Queues int
	// SegmentBytes is mappedFileSizeCommitLog (16 MiB when 0).
	SegmentBytes int64
	// Metrics pins every process's metricsPort to listenPort+3, so it must
	// bind (a broker otherwise only warns when the derived port is taken;
	// the name server has no metrics without it).
	Metrics bool
	// NamesrvLogLevel is the name server's --log-level ("" keeps its
	// default).
	NamesrvLogLevel string
	// BrokerLogLevel is every broker's --log-level ("" is warn: what a
	// measurement wants, no more).
	BrokerLogLevel string
	// BrokerConf lists extra broker.conf lines (key=value) for every member.
	BrokerConf []string
	// Place, when set, fixes a node's Host, ListenPort and RaftPort (the
	// name server has Index −1); nil puts every process on 127.0.0.1 with
	// ports from freeport.
	Place func(n *Node) error
	// PeerAddr, when set, is the Raft address member from dials to reach
	// member to (a proxy in between); nil dials to's own Raft port.
	PeerAddr func(from, to *Node) string
	// Wrap, when set, rewrites a process's command line before it starts
	// (a network namespace, strace); the name server is passed as its
	// Node too.
	Wrap func(n *Node, argv []string) []string
	// Logger notes starts and kills; nil discards.
	Logger *zap.Logger
}

// Cluster is the name server and the members, none running until Start.
type Cluster struct {
	cfg   Config
	NS    *Node   // the name server
	Nodes []*Node // every member, group by group
}

// New places every process (host and ports). Nothing is written or runs
// until WriteConfs and Start.
func New(cfg Config) (*Cluster, error) {
	if cfg.Groups < 1 {
		cfg.Groups = 1
	}
	if cfg.Queues == 0 {
		cfg.Queues = 4
	}
	if cfg.SegmentBytes == 0 {
		cfg.SegmentBytes = 16 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Place == nil {
		cfg.Place = placeLoopback
	}
	c := &Cluster{cfg: cfg}
	c.NS = &Node{Index: -1, ID: "namesrv", Host: "127.0.0.1", DataDir: filepath.Join(cfg.Dir, "namesrv"),
		ConfPath: filepath.Join(cfg.Dir, "namesrv.conf"), LogPath: filepath.Join(cfg.Dir, "namesrv.log")}
	if err := cfg.Place(c.NS); err != nil {
		return nil, err
	}
	for i := range 3 * cfg.Groups {
		id := fmt.Sprintf("n%d", i)
		n := &Node{Index: i, ID: id, Group: i / 3, Host: "127.0.0.1", DataDir: filepath.Join(cfg.Dir, id),
			ConfPath: filepath.Join(cfg.Dir, id+".conf"), LogPath: filepath.Join(cfg.Dir, id+".log")}
		if err := cfg.Place(n); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c, nil
}

// placeLoopback gives n a slot of its own from freeport: listenPort in the
// middle (VIP −2, gossip +2, metrics +3) and Raft at +4. None of these is
// held while the process is down, and a killed node restarts on the same
// ports: the band below the ephemeral range keeps client connections off
// them meanwhile.
func placeLoopback(n *Node) error {
	base, err := freeport.Block(freeport.Slot)
	if err != nil {
		return err
	}
	n.Host, n.ListenPort, n.RaftPort = "127.0.0.1", base+freeport.Slot/2, base+freeport.Slot/2+4
	return nil
}

// GroupNodes lists group g's members.
func (c *Cluster) GroupNodes(g int) []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n.Group == g {
			out = append(out, n)
		}
	}
	return out
}

// NodeByAddr is the member with remoting address addr, or nil.
func (c *Cluster) NodeByAddr(addr string) *Node {
	for _, n := range c.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// WriteConfs writes namesrv.conf and one conf per member: SYNC_FLUSH,
// small segments, gossip on (members seed from the name server's gossip
// port, namesrv port+2), no preferred leader.
func (c *Cluster) WriteConfs() error {
	if err := os.MkdirAll(c.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("proccluster: %w", err)
	}
	ns := []string{
		"listenAddr=" + c.NS.Host,
		fmt.Sprintf("listenPort=%d", c.NS.ListenPort),
		"kvConfigPath=" + filepath.Join(c.NS.DataDir, "kvConfig.json"),
		"gossipEnable=true",
		"gossipBindAddr=" + c.NS.Host,
		fmt.Sprintf("gossipBindPort=%d", c.NS.ListenPort+2),
	}
	if c.cfg.Metrics {
		ns = append(ns, fmt.Sprintf("metricsPort=%d", c.NS.ListenPort+3), "metricsBindAddr="+c.NS.Host)
	}
	if err := writeConf(c.NS.ConfPath, ns); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		var peers []string
		for _, m := range c.GroupNodes(n.Group) {
			addr := fmt.Sprintf("%s:%d", m.Host, m.RaftPort)
			if m != n && c.cfg.PeerAddr != nil {
				addr = c.cfg.PeerAddr(n, m)
			}
			peers = append(peers, m.ID+"-"+addr)
		}
		group := c.cfg.GroupName(n.Group)
		conf := []string{
			"brokerClusterName=" + c.cfg.ClusterName,
			"brokerName=" + group,
			"namesrvAddr=" + c.NS.Addr(),
			"brokerIP1=" + n.Host,
			"listenAddr=" + n.Host,
			fmt.Sprintf("listenPort=%d", n.ListenPort),
			"vipChannelEnabled=false",
			"autoCreateTopicEnable=true",
			fmt.Sprintf("defaultTopicQueueNums=%d", c.cfg.Queues),
			"storePathRootDir=" + n.DataDir,
			"flushDiskType=SYNC_FLUSH",
			fmt.Sprintf("mappedFileSizeCommitLog=%d", c.cfg.SegmentBytes),
			"mappedFileSizeConsumeQueue=600000",
			"maxHashSlotNum=50000",
			"maxIndexNum=200000",
			"enableDLegerCommitLog=true",
			"dLegerGroup=" + group,
			"dLegerPeers=" + strings.Join(peers, ";"),
			"dLegerSelfId=" + n.ID,
			"gossipEnable=true",
			"gossipBindAddr=" + n.Host,
			fmt.Sprintf("gossipBindPort=%d", n.ListenPort+2),
			fmt.Sprintf("gossipSeeds=%s:%d", c.NS.Host, c.NS.ListenPort+2),
		}
		if c.cfg.Metrics {
			conf = append(conf, fmt.Sprintf("metricsPort=%d", n.ListenPort+3), "metricsBindAddr="+n.Host)
		}
		if err := writeConf(n.ConfPath, append(conf, c.cfg.BrokerConf...)); err != nil {
			return err
		}
	}
	return nil
}

func writeConf(path string, lines []string) error {
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("proccluster: write conf: %w", err)
	}
	return nil
}

// Start launches n from its conf file, output appended to its log file.
// A node already running (or paused) is left alone.
func (c *Cluster) Start(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state != Down {
		return nil
	}
	level := c.cfg.BrokerLogLevel
	if level == "" {
		level = "warn"
	}
	args := []string{"broker", "-c", n.ConfPath, "--log-level", level}
	if n == c.NS {
		args = []string{"namesrv", "-c", n.ConfPath}
		if c.cfg.NamesrvLogLevel != "" {
			args = append(args, "--log-level", c.cfg.NamesrvLogLevel)
		}
	}
	cmd := c.cfg.Launch(args)
	if c.cfg.Wrap != nil {
		argv := c.cfg.Wrap(n, cmd.Args)
		wrapped := exec.Command(argv[0], argv[1:]...)
		wrapped.Env = cmd.Env
		cmd = wrapped
	}
	f, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("proccluster: log file: %w", err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("proccluster: start %s: %w", n.ID, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(done)
	}()
	n.cmd, n.done, n.state = cmd, done, Running
	c.cfg.Logger.Info("process started", zap.String("node", n.ID), zap.Int("pid", cmd.Process.Pid))
	return nil
}

// ErrNotRunning is returned for a signal to a node that is down.
var ErrNotRunning = errors.New("proccluster: node is not running")

// Kill sends SIGKILL to n's process group (continuing nothing first: a
// stopped process dies of SIGKILL too) and returns the instant just before
// the signal, once the process is reaped.
func (c *Cluster) Kill(n *Node) (time.Time, error) {
	n.mu.Lock()
	if n.state == Down {
		n.mu.Unlock()
		return time.Time{}, fmt.Errorf("%w: %s", ErrNotRunning, n.ID)
	}
	pid, done := n.cmd.Process.Pid, n.done
	at := time.Now()
	err := syscall.Kill(-pid, syscall.SIGKILL)
	n.state = Down
	n.mu.Unlock()
	<-done
	c.cfg.Logger.Info("process killed", zap.String("node", n.ID), zap.Int("pid", pid))
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return at, fmt.Errorf("proccluster: kill %s (pid %d): %w", n.ID, pid, err)
	}
	return at, nil
}

// Stop ends n: SIGTERM (SIGCONT first if paused), then SIGKILL if it has
// not exited within grace.
func (c *Cluster) Stop(n *Node, grace time.Duration) {
	n.mu.Lock()
	if n.state == Down {
		n.mu.Unlock()
		return
	}
	pid, done, paused := n.cmd.Process.Pid, n.done, n.state == Paused
	n.state = Down
	n.mu.Unlock()
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	if paused {
		_ = syscall.Kill(-pid, syscall.SIGCONT)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-done
	}
}

// Pause sends SIGSTOP to a running n: its connections stay open, it
// answers nothing.
func (c *Cluster) Pause(n *Node) error { return c.signal(n, syscall.SIGSTOP, Running, Paused) }

// Resume sends SIGCONT to a paused n.
func (c *Cluster) Resume(n *Node) error { return c.signal(n, syscall.SIGCONT, Paused, Running) }

func (c *Cluster) signal(n *Node, sig syscall.Signal, from, to State) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state != from {
		return nil
	}
	if err := syscall.Kill(-n.cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("proccluster: signal %s: %w", n.ID, err)
	}
	n.state = to
	return nil
}

// StopAll stops the members (in parallel), then the name server, each
// with grace before SIGKILL.
func (c *Cluster) StopAll(grace time.Duration) {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Stop(n, grace)
		}()
	}
	wg.Wait()
	c.Stop(c.NS, grace)
}
