package ha

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/raftmq/raftmq/internal/testutil"
)

// childEnv, when set, makes the test binary run one gossip node instead of
// the tests (gossip_main_test.go): a separate process, so that it can be
// frozen with SIGSTOP as an operator's pause or a long stall would freeze
// it. Its value is "name,port,seeds".
const childEnv = "RAFTMQ_HA_GOSSIP_CHILD"

// runGossipChild is the child process. It starts a broker node (term 1)
// on 127.0.0.1 that joins its seeds. The moment it refutes a claim about
// itself for the first time — a restarted node refutes its earlier
// process's record as it joins — it prints "stopped" and stops itself
// (SIGSTOP), from memberlist's log line, before its refutation can go
// out: memberlist queues the refutation just before that line, for a
// gossip round or probe that would have to fall in that instant, and the
// resync push/pull a refutation starts (resyncLoop) is woken only once
// the line is logged. Once resumed it prints "maybe-dead" whenever
// MaybeDeclaredDead fires. It closes the node when stdin ends.
func runGossipChild(spec string) int {
	parts := strings.SplitN(spec, ",", 3)
	if len(parts) != 3 {
		fmt.Fprintln(os.Stderr, "bad spec", spec)
		return 2
	}
	port, _ := strconv.Atoi(parts[1])
	cfg := DefaultGossipConfig()
	cfg.Name, cfg.BindAddr, cfg.BindPort, cfg.Seeds = parts[0], "127.0.0.1", port, parts[2]
	slowSync(&cfg)
	meta := brokerMeta("bk", "x", port)
	meta.Term = 1
	var g *Gossip
	var once sync.Once
	stop := func(e zapcore.Entry) error {
		if !strings.HasPrefix(e.Message, "Refuting") {
			return nil
		}
		once.Do(func() {
			// A refutation signals MaybeDeclaredDead too; only a signal
			// after the stop counts.
			select {
			case <-g.MaybeDeclaredDead():
			default:
			}
			fmt.Println("stopped")
			_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		})
		return nil
	}
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.DebugLevel)
	g, err := NewGossip(cfg, meta, zap.New(zapcore.RegisterHooks(core, stop)))
	if err == nil {
		err = g.Start(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	for {
		select {
		case <-eof:
			_ = g.Close()
			return 0
		case <-g.MaybeDeclaredDead():
			fmt.Println("maybe-dead")
		}
	}
}

// childNode is a gossip node in a child process (runGossipChild).
type childNode struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	port  int

	mu    sync.Mutex
	lines []string // what it printed, in order

	exited chan struct{} // closed once the process has exited
}

// kill kills the child and waits until it has exited.
func (c *childNode) kill() {
	_ = c.cmd.Process.Kill()
	<-c.exited
}

// startChild starts a child node named name on port that joins seeds,
// and waits until it has stopped itself.
func startChild(t *testing.T, name string, port int, seeds ...*testNode) *childNode {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, len(seeds))
	for i, s := range seeds {
		addrs[i] = s.addr()
	}
	c := &childNode{t: t, port: port}
	c.cmd = exec.Command(bin, "-test.run=^$")
	c.cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%s", childEnv, name, c.port, strings.Join(addrs, ",")))
	c.cmd.Stderr = os.Stderr
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.mu.Lock()
			c.lines = append(c.lines, sc.Text())
			c.mu.Unlock()
		}
	}()
	c.exited = make(chan struct{})
	go func() {
		<-read
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Signal(syscall.SIGCONT)
		_ = c.stdin.Close()
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			c.kill()
		}
	})
	c.waitLine(10*time.Second, "stopped", 1)
	return c
}

func (c *childNode) addr() string { return "127.0.0.1:" + strconv.Itoa(c.port) }

// count is how many times the child printed line.
func (c *childNode) count(line string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.lines {
		if l == line {
			n++
		}
	}
	return n
}

// waitLine waits until the child has printed line n times.
func (c *childNode) waitLine(timeout time.Duration, line string, n int) {
	c.t.Helper()
	testutil.WaitFor(c.t, timeout, fmt.Sprintf("the child printed %q %d times", line, n), func() bool {
		return c.count(line) >= n
	})
}

func (c *childNode) signal(sig syscall.Signal) {
	c.t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		c.t.Fatal(err)
	}
}

// TestGossipResumedNodeIsRoutedAgainAtOnce: a broker restarted and frozen
// (SIGSTOP) right after joining, then resumed once its peers hold it dead,
// must say at once that it may have been declared dead (MaybeDeclaredDead,
// so that it registers again), and its peers must hold it alive again.
//
// The restarted node refutes its earlier process's record as it joins (a
// higher incarnation); frozen before that reached its peers, they go on
// suspecting the earlier process's incarnation and declare it dead — a
// name server drops the broker from its routes. Resumed, the node ignores
// every claim about itself, all older than its own incarnation (memberlist
// drops those without refuting them), so it never refutes; its queued
// refutation soon makes the peers hold it alive, but nothing made it
// register again. The child stops itself at the moment it refutes
// (runGossipChild), which makes "frozen before the refutation reached
// anyone" all but certain; everyone's periodic push/pull is a minute
// apart, so it cannot be what repairs the view. memberlist queues the
// refutation a moment before the child can stop, though, and an ack to a
// peer's probe arriving just then carries it (a loaded machine widens
// that moment): the peers then hold the new process alive and declare
// it dead, which is not the case under test, so the test plays it again
// with another member.
func TestGossipResumedNodeIsRoutedAgainAtOnce(t *testing.T) {
	t.Parallel()
	const bound = 2 * time.Second
	ns := startNodeWith(t, "ns", 0, NodeMeta{Kind: KindNameServer, RemotingAddr: "127.0.0.1:9876"}, slowSync, nil)
	p := startNodeWith(t, "p", 0, brokerMeta("bk", "n0", 10911), slowSync, nil, ns)
	var (
		name    string
		x       *childNode
		stopped time.Time
		dead    Event
	)
	for attempt := 1; ; attempt++ {
		name = "x" + strconv.Itoa(attempt)
		old := startNodeWith(t, name, 0, brokerMeta("bk", "x", 10931), slowSync, nil, ns)
		waitAlive(t, []*testNode{ns, p, old}, "ns", "p", name)

		// x crashes and restarts on its address before ns and p notice.
		if err := old.g.Shutdown(); err != nil {
			t.Fatal(err)
		}
		stopped = time.Now()
		x = startChild(t, name, old.port, ns)
		testutil.WaitFor(t, 10*time.Second, "ns and p hold "+name+" dead", func() bool {
			mn, _ := ns.g.Member(name)
			mp, _ := p.g.Member(name)
			return mn.State == MemberDead && mp.State == MemberDead
		})
		dead, _ = ns.firstEventAfter(stopped, name, EventDead)
		if dead.Member.Meta.Term == 0 {
			break
		}
		if attempt == 3 {
			t.Fatalf("ns declared the new %s (term %d) dead, in each of 3 attempts; the test needs it to hold the old one", name, dead.Member.Meta.Term)
		}
		t.Logf("the refutation of %s's new process got out before it froze; again with another member", name)
		x.kill()
	}

	resumed := time.Now()
	x.signal(syscall.SIGCONT)
	var back Event
	testutil.WaitFor(t, 10*time.Second, "ns holds "+name+" alive again", func() bool {
		var ok bool
		back, ok = ns.firstEventAfter(dead.At, name, EventJoin)
		return ok
	})
	t.Logf("ns held x dead %v after the crash; x resumed %v later; ns held it alive again %v after SIGCONT",
		dead.At.Sub(stopped).Round(time.Millisecond), resumed.Sub(dead.At).Round(time.Millisecond),
		back.At.Sub(resumed).Round(time.Millisecond))
	if d := back.At.Sub(resumed); d > bound {
		t.Errorf("ns held the resumed x dead for %v; want it alive again within %v", d, bound)
	}
	x.waitLine(bound, "maybe-dead", 1)
	testutil.WaitFor(t, 5*time.Second, "p holds "+name+" alive again", func() bool {
		m, _ := p.g.Member(name)
		return m.State == MemberAlive
	})
}

// TestGossipStallSyncsAndSignals: a node whose clock jumps by more than a
// probe interval between two of its ticks — it stood still — syncs with
// its seed and signals MaybeDeclaredDead without having refuted anything;
// a jump shorter than a probe interval signals nothing.
func TestGossipStallSyncsAndSignals(t *testing.T) {
	t.Parallel()
	ns := startNode(t, "ns", 0, NodeMeta{Kind: KindNameServer, RemotingAddr: "127.0.0.1:9876"})
	cfg := testConfig("x", testutil.FreePort(t), ns)
	slowSync(&cfg)
	core, logs := observer.New(zap.DebugLevel)
	g, err := NewGossip(cfg, brokerMeta("bk", "x", 10931), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	var skew atomic.Int64 // added to x's clock
	g.now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	testutil.WaitFor(t, 5*time.Second, "ns holds x alive", func() bool {
		m, ok := ns.g.Member("x")
		return ok && m.State == MemberAlive
	})
	signalled := func() bool {
		select {
		case <-g.MaybeDeclaredDead():
			return true
		default:
			return false
		}
	}
	synced := func() int {
		n := 0
		for _, e := range logs.FilterMessage("gossip: synced with a seed").All() {
			if e.ContextMap()["addr"] == ns.addr() && e.ContextMap()["error"] == nil {
				n++
			}
		}
		return n
	}
	if signalled() || synced() != 0 {
		t.Fatal("x signalled or synced before any stall")
	}

	// Half a probe interval late: no probe of x can have failed. Five
	// ticks pass without a signal.
	skew.Add(int64(cfg.ProbeInterval / 2))
	select {
	case <-g.MaybeDeclaredDead():
		t.Fatal("x signalled after a stall shorter than a probe interval")
	case <-time.After(5 * cfg.ProbeInterval / 2):
	}

	skew.Add(int64(2 * time.Second))
	testutil.WaitFor(t, 2*time.Second, "x signals MaybeDeclaredDead after standing still", signalled)
	if synced() != 1 {
		t.Errorf("x synced with ns %d times after standing still; want once, before the signal", synced())
	}
	if logs.FilterMessage("gossip: this node stood still; syncing with its seeds and registering again").Len() != 1 {
		t.Error("the stall was not logged once")
	}
}

// TestResyncWhileMetaChanges: the resync loop reads this node's own
// address while role changes republish its meta (memberlist rewrites its
// local node then); under -race the two must not touch the same memory.
// Nothing orders the two here but memberlist's own locking.
func TestResyncWhileMetaChanges(t *testing.T) {
	a := startNode(t, "a", 0, brokerMeta("b1", "n0", 10911))
	b := startNode(t, "b", 0, brokerMeta("b1", "n1", 10921), a)
	waitAlive(t, []*testNode{a, b}, "a", "b")
	done := make(chan error, 1)
	go func() {
		meta := brokerMeta("b1", "n1", 10921)
		for i := range 10 {
			meta.Term = uint64(i + 1)
			if err := b.g.UpdateMeta(meta); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	signals := 0
	for updating := true; updating; {
		b.g.noteRefuted()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			updating = false
		case <-b.g.MaybeDeclaredDead():
			signals++
		}
	}
	if signals == 0 {
		t.Fatal("no MaybeDeclaredDead while refutations were queued")
	}
}
