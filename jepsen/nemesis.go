package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Nemesis injects one kind of fault and heals it.
type Nemesis interface {
	// Name is the nemesis's name in profiles and reports.
	Name() string
	// Inject starts the fault and describes what it did.
	Inject(ctx context.Context, env *Env) (string, error)
	// Heal ends the fault.
	Heal(ctx context.Context, env *Env) error
}

// Env is what a nemesis acts on.
type Env struct {
	Cluster *Cluster
	Rand    *rand.Rand
	// Dir is the run directory (for helper files).
	Dir string
	// Group is the broker group the current fault hits (the schedule
	// draws it before each injection when there are two).
	Group int
}

// members is the current group's node indexes.
func (e *Env) members() []int { return e.Cluster.GroupNodes(e.Group) }

// target picks the current group's leader (leader=true) or a random
// running node of it.
func (e *Env) target(ctx context.Context, leader bool) (int, error) {
	if leader {
		if l := e.Cluster.LeaderOf(ctx, e.Group); l >= 0 {
			return l, nil
		}
		return -1, ErrNoLeader
	}
	var up []int
	for _, i := range e.members() {
		if e.Cluster.Nodes[i].State() == NodeRunning {
			up = append(up, i)
		}
	}
	if len(up) == 0 {
		return -1, ErrNoLeader
	}
	return up[e.Rand.Intn(len(up))], nil
}

// coinTarget tosses a coin between the leader and a random running node
// (for nemeses without -leader/-random variants) and names the choice.
func (e *Env) coinTarget(ctx context.Context) (node int, role string, err error) {
	leader := e.Rand.Intn(2) == 0
	role = "random node"
	if leader {
		role = "leader"
	}
	node, err = e.target(ctx, leader)
	return node, role, err
}

// killNemesis is kill -9 of one node, restarted on heal.
type killNemesis struct {
	leader bool
	node   int
}

func (k *killNemesis) Name() string {
	if k.leader {
		return "kill-leader"
	}
	return "kill-random"
}

func (k *killNemesis) Inject(ctx context.Context, env *Env) (string, error) {
	i, err := env.target(ctx, k.leader)
	if err != nil {
		return "", err
	}
	k.node = i
	pid := env.Cluster.Nodes[i].PID()
	return fmt.Sprintf("SIGKILL %s (pid %d)", env.Cluster.Nodes[i].ID, pid), env.Cluster.KillNode(i)
}

func (k *killNemesis) Heal(_ context.Context, env *Env) error { return env.Cluster.StartNode(k.node) }

// pauseNemesis is SIGSTOP of one node, SIGCONT on heal.
type pauseNemesis struct {
	leader bool
	node   int
}

func (p *pauseNemesis) Name() string {
	if p.leader {
		return "pause-leader"
	}
	return "pause-random"
}

func (p *pauseNemesis) Inject(ctx context.Context, env *Env) (string, error) {
	i, err := env.target(ctx, p.leader)
	if err != nil {
		return "", err
	}
	p.node = i
	return "SIGSTOP " + env.Cluster.Nodes[i].ID, env.Cluster.PauseNode(i)
}

func (p *pauseNemesis) Heal(_ context.Context, env *Env) error { return env.Cluster.ResumeNode(p.node) }

// partitionNemesis cuts Raft traffic through the link proxies.
type partitionNemesis struct{ kind string }

func (p *partitionNemesis) Name() string { return "partition-" + p.kind }

func (p *partitionNemesis) Inject(ctx context.Context, env *Env) (string, error) {
	c := env.Cluster
	all := env.members()
	others := func(x int) []int {
		var o []int
		for _, i := range all {
			if i != x {
				o = append(o, i)
			}
		}
		return o
	}
	switch p.kind {
	case "leader":
		l, err := env.target(ctx, true)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("isolate leader %s from %v", c.Nodes[l].ID, ids(c, others(l))), c.Isolate([]int{l}, others(l))
	case "halves":
		// With three nodes a random split is one node against two.
		x := all[env.Rand.Intn(len(all))]
		return fmt.Sprintf("halves %v | %v", ids(c, []int{x}), ids(c, others(x))), c.Isolate([]int{x}, others(x))
	case "bridge":
		// The middle node sees both sides; the sides do not see each other.
		m := all[env.Rand.Intn(len(all))]
		o := others(m)
		return fmt.Sprintf("bridge via %s: %s x %s", c.Nodes[m].ID, c.Nodes[o[0]].ID, c.Nodes[o[1]].ID), c.Isolate([]int{o[0]}, []int{o[1]})
	case "ring":
		// Every node hears a majority, no two the same one (Jepsen's
		// majorities-ring); a random ring order picks the orientation.
		order := make([]int, len(all))
		for k, j := range env.Rand.Perm(len(all)) {
			order[k] = all[j]
		}
		var errs []error
		var desc []string
		for _, b := range RingBlocks(order) {
			errs = append(errs, c.BlockOneWay(b[0], b[1]))
			desc = append(desc, c.Nodes[b[0]].ID+"->"+c.Nodes[b[1]].ID)
		}
		return fmt.Sprintf("ring %v: blocked %s", ids(c, order), strings.Join(desc, ", ")), errors.Join(errs...)
	case "oneway":
		// The leader's outbound traffic is dropped: it still hears the
		// others (their votes and answers never get back to it).
		l, err := env.target(ctx, true)
		if err != nil {
			return "", err
		}
		var errs []error
		for _, j := range others(l) {
			errs = append(errs, c.BlockOneWay(l, j))
		}
		return fmt.Sprintf("one-way: %s cannot send to %v", c.Nodes[l].ID, ids(c, others(l))), errors.Join(errs...)
	}
	return "", fmt.Errorf("%w: partition-%s", ErrUnknownNemesis, p.kind)
}

func (p *partitionNemesis) Heal(context.Context, *Env) error { return nil }

// RingBlocks computes the majorities-ring partition of nodes in ring
// order: the node at position i hears a window of m = n/2+1 consecutive
// positions (itself included) centred on it as far as m allows, so every
// node sees a bare majority and no two see the same one. It returns the
// blocked directions as {from, to} pairs: to no longer hears from. With
// five nodes the windows are i-1..i+1 and every cut is two-way; with
// three (window i..i+1) it can only be one-way: a hears b (not c), b
// hears c (not a), c hears a (not b), so c→a, a→b and b→c are blocked.
func RingBlocks(order []int) [][2]int {
	n := len(order)
	m := n/2 + 1
	lo := (m - 1) / 2 // window positions i-lo .. i-lo+m-1
	var blocks [][2]int
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if (j-i+lo+n)%n >= m {
				blocks = append(blocks, [2]int{order[j], order[i]})
			}
		}
	}
	return blocks
}

func ids(c *Cluster, idx []int) []string {
	var s []string
	for _, i := range idx {
		s = append(s, c.Nodes[i].ID)
	}
	return s
}

// healPartition wraps partition heal so HealAll runs once per window.
type healAll struct{ Nemesis }

func (h healAll) Heal(ctx context.Context, env *Env) error {
	env.Cluster.HealAll()
	return h.Nemesis.Heal(ctx, env)
}

// fsyncEIONemesis makes fsync, fdatasync and msync fail with EIO on one
// node, through strace's fault injection. A random node is restarted under
// strace and fails from its 40th call on: a store that starts, then loses
// its disk. The leader is traced where it runs and fails from its next
// call on, so its own log sync, which runs beside replication (ADR 0025),
// fails while it leads. Heal kills the node and restarts it plainly. The
// store must refuse or crash, never acknowledge what it could not make
// durable.
type fsyncEIONemesis struct {
	node int
	// tracer is the strace attached to a running leader (nil otherwise);
	// it ends with its tracee.
	tracer *exec.Cmd
}

// fsyncEIOTrace is strace's filter and fault for fsyncEIONemesis; when is
// the first failing call ("" for the next one).
func fsyncEIOTrace(when string) []string {
	inject := "inject=fsync,fdatasync,msync:error=EIO"
	if when != "" {
		inject += ":when=" + when
	}
	return []string{"-f", "-qq", "-o", os.DevNull, "-e", "trace=fsync,fdatasync,msync", "-e", inject}
}

func (f *fsyncEIONemesis) Name() string { return "fsync-eio" }

func (f *fsyncEIONemesis) Inject(ctx context.Context, env *Env) (string, error) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		return "", fmt.Errorf("%w: strace not installed", ErrUnsupported)
	}
	c := env.Cluster
	i, role, err := env.coinTarget(ctx)
	if err != nil {
		return "", err
	}
	f.node = i
	if role == "leader" {
		pid := c.Nodes[i].PID()
		cmd := exec.Command(strace, append(fsyncEIOTrace(""), "-p", strconv.Itoa(pid))...)
		if err := cmd.Start(); err != nil {
			return "", fmt.Errorf("attach strace to %s (pid %d): %w", c.Nodes[i].ID, pid, err)
		}
		if err := awaitTraced(ctx, pid, 5*time.Second); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return "", fmt.Errorf("attach strace to %s (pid %d): %w", c.Nodes[i].ID, pid, err)
		}
		f.tracer = cmd
		return fmt.Sprintf("attach strace to leader %s (pid %d): fsync/fdatasync/msync EIO from its next call", c.Nodes[i].ID, pid), nil
	}
	if err := c.KillNode(i); err != nil {
		return "", err
	}
	c.cfg.WrapCommand = func(node int, argv []string) []string {
		if node != i {
			return argv
		}
		return append(append([]string{strace}, fsyncEIOTrace("40+")...), argv...)
	}
	err = c.StartNode(i)
	c.cfg.WrapCommand = nil
	return fmt.Sprintf("restart %s (%s) under strace: fsync/fdatasync/msync EIO from the 40th call", c.Nodes[i].ID, role), err
}

func (f *fsyncEIONemesis) Heal(_ context.Context, env *Env) error {
	err := env.Cluster.KillNode(f.node)
	if t := f.tracer; t != nil {
		f.tracer = nil
		if err != nil {
			_ = t.Process.Kill() // detaches; the node keeps running, to be killed again
		}
		waitOrKill(t, 10*time.Second)
	}
	if err != nil {
		return err
	}
	return env.Cluster.StartNode(f.node)
}

// awaitTraced waits until process pid has a tracer (TracerPid in its
// /proc status), so a fault window is recorded only once strace holds it.
func awaitTraced(ctx context.Context, pid int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "TracerPid:"); ok && strings.TrimSpace(v) != "0" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not traced after %v: %w", timeout, ctx.Err())
		case <-t.C:
		}
	}
}

// waitOrKill reaps cmd, a process this suite started, killing it if it has
// not ended within d.
func waitOrKill(cmd *exec.Cmd, d time.Duration) {
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
	}
}

// crashNemesis is SIGKILL of a node (leader or random) running the
// crashfs build: its store keeps file data in process memory until
// synced, so the kill loses every unsynced write, like a power cut of
// that node. Heal restarts it (on the same crashfs binary).
type crashNemesis struct{ node int }

func (k *crashNemesis) Name() string { return "crash-unsynced" }

func (k *crashNemesis) Inject(ctx context.Context, env *Env) (string, error) {
	c := env.Cluster
	if !c.cfg.CrashFS {
		return "", fmt.Errorf("%w: crash-unsynced needs the crashfs build (the run builds it when the profile has this nemesis)", ErrUnsupported)
	}
	i, role, err := env.coinTarget(ctx)
	if err != nil {
		return "", err
	}
	k.node = i
	pid := c.Nodes[i].PID()
	return fmt.Sprintf("SIGKILL %s (%s, pid %d, crashfs: unsynced writes lost)", c.Nodes[i].ID, role, pid), c.KillNode(i)
}

func (k *crashNemesis) Heal(_ context.Context, env *Env) error { return env.Cluster.StartNode(k.node) }

// healDetailer is a nemesis whose heal has something to add to the
// window's detail (what it waited for, and how long).
type healDetailer interface{ HealDetail() string }

// NemesisNames lists every nemesis NewNemesis knows.
func NemesisNames() []string {
	names := make([]string, 0, len(nemesisTable))
	for n := range nemesisTable {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var nemesisTable = map[string]func() Nemesis{
	"kill-leader":      func() Nemesis { return &killNemesis{leader: true} },
	"kill-random":      func() Nemesis { return &killNemesis{} },
	"pause-leader":     func() Nemesis { return &pauseNemesis{leader: true} },
	"pause-random":     func() Nemesis { return &pauseNemesis{} },
	"partition-leader": func() Nemesis { return healAll{&partitionNemesis{kind: "leader"}} },
	"partition-halves": func() Nemesis { return healAll{&partitionNemesis{kind: "halves"}} },
	"partition-bridge": func() Nemesis { return healAll{&partitionNemesis{kind: "bridge"}} },
	"partition-oneway": func() Nemesis { return healAll{&partitionNemesis{kind: "oneway"}} },
	"partition-ring":   func() Nemesis { return healAll{&partitionNemesis{kind: "ring"}} },
	"crash-unsynced":   func() Nemesis { return &crashNemesis{} },
	"fsync-eio":        func() Nemesis { return &fsyncEIONemesis{} },
	"disk-full":        func() Nemesis { return &diskFullNemesis{} },
}

// NewNemesis builds the named nemesis.
func NewNemesis(name string) (Nemesis, error) {
	f, ok := nemesisTable[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q (known: %s)", ErrUnknownNemesis, name, strings.Join(NemesisNames(), ", "))
	}
	return f(), nil
}

// Schedule runs nemeses one at a time: a quiet period, a random nemesis
// held for Hold, its heal, and so on until ctx ends (the last fault is
// healed before it returns).
type Schedule struct {
	Nemeses []Nemesis
	Quiet   time.Duration
	Hold    time.Duration
}

func (s Schedule) run(ctx context.Context, env *Env, rec *recorder) {
	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	for {
		// Jitter ±25 % so faults do not lock step with client timers.
		if !sleep(s.Quiet*3/4 + time.Duration(env.Rand.Int63n(int64(s.Quiet/2)+1))) {
			return
		}
		n := s.Nemeses[env.Rand.Intn(len(s.Nemeses))]
		if g := env.Cluster.Groups(); g > 1 {
			env.Group = env.Rand.Intn(g)
		}
		start := time.Now()
		detail, err := n.Inject(context.Background(), env)
		if err != nil {
			rec.note("%s not injected at %.0f ms: %v", n.Name(), rec.since(start), err)
			// Nothing was injected, except perhaps a partial partition.
			env.Cluster.HealAll()
			continue
		}
		held := sleep(s.Hold)
		healStart := time.Now()
		herr := n.Heal(context.Background(), env)
		w := FaultWindow{Nemesis: n.Name(), Detail: detail, StartMs: rec.since(start), EndMs: rec.since(healStart)}
		if env.Cluster.Groups() > 1 {
			w.Group = GroupNameOf(env.Group)
		}
		if herr != nil {
			w.HealNote = herr.Error()
		}
		if hd, ok := n.(healDetailer); ok && hd.HealDetail() != "" {
			w.Detail += "; heal: " + hd.HealDetail()
		}
		rec.fault(w)
		if !held {
			return
		}
	}
}
