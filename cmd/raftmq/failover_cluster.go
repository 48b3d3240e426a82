package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The failover report's cluster: a name server and a 3-node group, each a
// separate OS process running this binary from a conf file the report
// wrote. Only processes started here are ever signalled, by their PID.

const (
	failoverCluster = "FailoverCluster"
	failoverGroup   = "broker-f"
	failoverNodes   = 3
	// Per process the ports are listenPort L, VIP L−2, gossip L+2,
	// metrics L+3 and Raft L+5; processes sit 10 apart from the base.
	failoverPortSpan = 10 * (failoverNodes + 1)
)

// launcher turns raftmq arguments into a command. The report runs
// os.Executable with the arguments; tests run the test binary with the
// arguments in an environment variable (see admin_main_test.go).
type launcher func(args []string) *exec.Cmd

// binaryLauncher runs bin with args.
func binaryLauncher(bin string) launcher {
	return func(args []string) *exec.Cmd { return exec.Command(bin, args...) }
}

// procNode is one process of the cluster.
type procNode struct {
	id         string // n0..n2, or "namesrv"
	confPath   string
	logPath    string
	listenPort int
	raftPort   int

	mu   sync.Mutex
	cmd  *exec.Cmd     // guarded by mu; nil when not running
	done chan struct{} // guarded by mu; closed when cmd exited
}

// addr is the remoting address.
func (n *procNode) addr() string { return fmt.Sprintf("127.0.0.1:%d", n.listenPort) }

// metricsAddr is the monitoring HTTP address (listenPort+3).
func (n *procNode) metricsAddr() string { return fmt.Sprintf("127.0.0.1:%d", n.listenPort+3) }

// pid is the running process's id, 0 when not running.
func (n *procNode) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// procCluster is the name server plus the group's nodes.
type procCluster struct {
	dir    string
	launch launcher
	ns     *procNode
	nodes  []*procNode
	http   *http.Client
}

// newProcCluster picks a free port block and writes every conf file.
// Nothing runs until start.
func newProcCluster(dir string, basePort int, launch launcher) (*procCluster, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("failover: data directory: %w", err)
	}
	if basePort == 0 {
		var err error
		if basePort, err = freePortBlock(failoverPortSpan); err != nil {
			return nil, err
		}
	}
	c := &procCluster{dir: dir, launch: launch, http: &http.Client{Timeout: time.Second, Transport: &http.Transport{}}}
	c.ns = &procNode{id: "namesrv", listenPort: basePort, confPath: filepath.Join(dir, "namesrv.conf"), logPath: filepath.Join(dir, "namesrv.log")}
	for i := 0; i < failoverNodes; i++ {
		l := basePort + 10*(i+1)
		id := fmt.Sprintf("n%d", i)
		c.nodes = append(c.nodes, &procNode{id: id, listenPort: l, raftPort: l + 5,
			confPath: filepath.Join(dir, id+".conf"), logPath: filepath.Join(dir, id+".log")})
	}
	return c, c.writeConfs()
}

// freePortBlock finds base such that every TCP and UDP port in
// [base−2, base+span) is free on 127.0.0.1 right now. Another process can
// still take one before the cluster binds it; the report then fails to
// start and says which process did not come up.
func freePortBlock(span int) (int, error) {
	for try := 0; try < 50; try++ {
		base := 20000 + 10*rand.IntN(3000)
		if portsFree(base-2, base+span) {
			return base, nil
		}
	}
	return 0, errors.New("failover: no free block of ports on 127.0.0.1 (tried 50); pass --base-port")
}

func portsFree(from, to int) bool {
	for p := from; p < to; p++ {
		a := fmt.Sprintf("127.0.0.1:%d", p)
		l, err := net.Listen("tcp", a)
		if err != nil {
			return false
		}
		_ = l.Close()
		u, err := net.ListenPacket("udp", a)
		if err != nil {
			return false
		}
		_ = u.Close()
	}
	return true
}

// writeConfs writes namesrv.conf and n0..n2.conf: loopback ports, small
// segments, SYNC_FLUSH, gossip on, no preferred leader (so leadership
// stays where the election put it between kills).
func (c *procCluster) writeConfs() error {
	ns := strings.Join([]string{
		"listenAddr=127.0.0.1",
		fmt.Sprintf("listenPort=%d", c.ns.listenPort),
		"kvConfigPath=" + filepath.Join(c.dir, "namesrv", "kvConfig.json"),
		"gossipEnable=true",
		"gossipBindAddr=127.0.0.1",
		fmt.Sprintf("gossipBindPort=%d", c.ns.listenPort+2),
		fmt.Sprintf("metricsPort=%d", c.ns.listenPort+3),
		"",
	}, "\n")
	if err := os.WriteFile(c.ns.confPath, []byte(ns), 0o644); err != nil {
		return fmt.Errorf("failover: write conf: %w", err)
	}
	var peers []string
	for _, n := range c.nodes {
		peers = append(peers, fmt.Sprintf("%s-127.0.0.1:%d", n.id, n.raftPort))
	}
	for _, n := range c.nodes {
		conf := strings.Join([]string{
			"brokerClusterName=" + failoverCluster,
			"brokerName=" + failoverGroup,
			"namesrvAddr=" + c.ns.addr(),
			"brokerIP1=127.0.0.1",
			"listenAddr=127.0.0.1",
			fmt.Sprintf("listenPort=%d", n.listenPort),
			"vipChannelEnabled=false",
			"autoCreateTopicEnable=true",
			"defaultTopicQueueNums=4",
			"storePathRootDir=" + filepath.Join(c.dir, n.id),
			"flushDiskType=SYNC_FLUSH",
			"mappedFileSizeCommitLog=16777216",
			"mappedFileSizeConsumeQueue=600000",
			"maxHashSlotNum=50000",
			"maxIndexNum=200000",
			"enableDLegerCommitLog=true",
			"dLegerGroup=" + failoverGroup,
			"dLegerPeers=" + strings.Join(peers, ";"),
			"dLegerSelfId=" + n.id,
			"gossipEnable=true",
			"gossipBindAddr=127.0.0.1",
			fmt.Sprintf("gossipBindPort=%d", n.listenPort+2),
			fmt.Sprintf("gossipSeeds=127.0.0.1:%d", c.ns.listenPort+2),
			fmt.Sprintf("metricsPort=%d", n.listenPort+3),
			"",
		}, "\n")
		if err := os.WriteFile(n.confPath, []byte(conf), 0o644); err != nil {
			return fmt.Errorf("failover: write conf: %w", err)
		}
	}
	return nil
}

// start launches n from its conf, output appended to its log file. The
// child gets SIGKILL if this process dies (Pdeathsig), so a crashed report
// leaves no broker behind.
func (c *procCluster) start(n *procNode) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("failover: %s is already running (pid %d)", n.id, n.cmd.Process.Pid)
	}
	kind := "broker"
	if n == c.ns {
		kind = "namesrv"
	}
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("failover: log file: %w", err)
	}
	cmd := c.launch([]string{kind, "-c", n.confPath, "--log-level", "warn"})
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("failover: start %s: %w", n.id, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(done)
	}()
	n.cmd, n.done = cmd, done
	return nil
}

// kill sends SIGKILL to n's process (the PID this cluster started) and
// returns the instant just before the signal, once the process is reaped.
func (c *procCluster) kill(n *procNode) (time.Time, error) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd, n.done = nil, nil
	n.mu.Unlock()
	if cmd == nil {
		return time.Time{}, fmt.Errorf("failover: %s is not running", n.id)
	}
	at := time.Now()
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return at, fmt.Errorf("failover: kill %s (pid %d): %w", n.id, cmd.Process.Pid, err)
	}
	<-done
	return at, nil
}

// stop ends n: SIGTERM, then SIGKILL if it has not exited within grace.
func (c *procCluster) stop(n *procNode, grace time.Duration) {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd, n.done = nil, nil
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// stopAll ends the brokers, then the name server.
func (c *procCluster) stopAll() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.stop(n, 10*time.Second)
		}()
	}
	wg.Wait()
	c.stop(c.ns, 5*time.Second)
	c.http.CloseIdleConnections()
}

// signal sends sig to n's running process (SIGSTOP/SIGCONT in tests).
func (c *procCluster) signal(n *procNode, sig syscall.Signal) error {
	pid := n.pid()
	if pid == 0 {
		return fmt.Errorf("failover: %s is not running", n.id)
	}
	return syscall.Kill(pid, sig)
}

// exited reports whether n was started and has exited on its own.
func (n *procNode) exited() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// nodeByAddr finds the node with remoting address addr.
func (c *procCluster) nodeByAddr(addr string) *procNode {
	for _, n := range c.nodes {
		if n.addr() == addr {
			return n
		}
	}
	return nil
}

// httpStatus GETs path on addr and returns the status code (0 on error).
func (c *procCluster) httpStatus(ctx context.Context, addr, path string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// tail returns the last lines of n's log, for errors.
func (n *procNode) tail(lines int) string {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return ""
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
