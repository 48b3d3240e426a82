package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/raftmq/raftmq/storage"
)

// Nemeses of the issue-14 chaos suite: name-server kill, client↔broker
// partitions, packet loss and delay, slow disk and a flipped bit in a
// closed CommitLog segment. They register themselves in nemesisTable.
func init() {
	nemesisTable["kill-namesrv"] = func() Nemesis { return &namesrvKillNemesis{} }
	nemesisTable["partition-clients"] = func() Nemesis { return healAll{&clientPartitionNemesis{}} }
	nemesisTable["net-loss-delay"] = func() Nemesis { return &netLossNemesis{} }
	nemesisTable["slow-disk"] = func() Nemesis { return &slowDiskNemesis{} }
	nemesisTable["bitflip-segment"] = func() Nemesis { return &bitFlipNemesis{} }
}

// OffByDefault lists nemeses that exist but are not in the full profile's
// default set (none now; name one with -nemeses to run it anyway).
var OffByDefault = map[string]bool{}

// DefaultNemeses is every nemesis but those OffByDefault.
func DefaultNemeses() []string {
	var out []string
	for _, n := range NemesisNames() {
		if !OffByDefault[n] {
			out = append(out, n)
		}
	}
	return out
}

// BuildTags is the build tags a run with these nemeses needs: crashfs for
// crash-unsynced, slowfs for slow-disk (comma-separated, "" for none).
func BuildTags(nemeses []string) string {
	var tags []string
	for _, n := range nemeses {
		switch n {
		case "crash-unsynced":
			tags = append(tags, "crashfs")
		case "slow-disk":
			tags = append(tags, "slowfs")
		}
	}
	sort.Strings(tags)
	return strings.Join(tags, ",")
}

// namesrvKillNemesis is SIGKILL of the name server, restarted on heal: it
// forgets every route until the brokers register again, while clients work
// from the routes they cached.
type namesrvKillNemesis struct{}

func (namesrvKillNemesis) Name() string { return "kill-namesrv" }

func (namesrvKillNemesis) Inject(_ context.Context, env *Env) (string, error) {
	ns := env.Cluster.procs.NS
	pid := ns.PID()
	if _, err := env.Cluster.procs.Kill(ns); err != nil {
		return "", err
	}
	env.Cluster.rc.CloseConn(ns.Addr())
	return fmt.Sprintf("SIGKILL name server (pid %d)", pid), nil
}

func (namesrvKillNemesis) Heal(_ context.Context, env *Env) error {
	return env.Cluster.procs.Start(env.Cluster.procs.NS)
}

// clientPartitionNemesis cuts the suite's clients (SDK producers and
// consumers, which run in the root namespace) off one node, leader or random
// (netns mode only): the node still talks Raft to its peers, so a leader
// stays leader while no client reaches it.
type clientPartitionNemesis struct{}

func (clientPartitionNemesis) Name() string { return "partition-clients" }

func (clientPartitionNemesis) Inject(ctx context.Context, env *Env) (string, error) {
	c := env.Cluster
	if c.net == nil {
		return "", fmt.Errorf("%w: partition-clients needs the netns mode", ErrUnsupported)
	}
	i, role, err := env.coinTarget(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("clients (%s) cut off %s (%s)", c.net.HostIP(), c.Nodes[i].ID, role), c.net.DropClients(i)
}

func (clientPartitionNemesis) Heal(context.Context, *Env) error { return nil }

// Packet loss and delay of the netns nemesis: netem on the node's eth0
// when the kernel has sch_netem, else loss alone through an iptables
// statistic rule (the window's detail says which).
const (
	netLossPercent = 10
	netDelayMs     = 40
	netJitterMs    = 20
)

// netLossNemesis makes every node of the group lose netLossPercent of its
// outgoing packets and delay the rest by netDelayMs ± netJitterMs (netns
// mode only).
type netLossNemesis struct{ nodes []int }

func (*netLossNemesis) Name() string { return "net-loss-delay" }

func (n *netLossNemesis) Inject(_ context.Context, env *Env) (string, error) {
	c := env.Cluster
	if c.net == nil {
		return "", fmt.Errorf("%w: net-loss-delay needs the netns mode", ErrUnsupported)
	}
	n.nodes = env.members()
	var errs []error
	how := ""
	for _, i := range n.nodes {
		h, err := c.net.LossDelay(i, netLossPercent, netDelayMs, netJitterMs)
		errs = append(errs, err)
		how = h
	}
	return fmt.Sprintf("%s on %v", how, ids(c, n.nodes)), errors.Join(errs...)
}

func (n *netLossNemesis) Heal(_ context.Context, env *Env) error {
	c := env.Cluster
	if c.net == nil {
		return nil
	}
	var errs []error
	for _, i := range n.nodes {
		errs = append(errs, c.net.ClearQdisc(i))
	}
	c.HealAll() // the iptables fallback's rules
	return errors.Join(errs...)
}

// slowDiskDelay is what slow-disk adds to every flush of the node.
const slowDiskDelay = "100ms"

// slowDiskNemesis makes one node's flushes (fdatasync, msync, directory
// fsync) slow by writing its SlowFS control file (the slowfs build,
// storage/slowfs.go); heal clears it. The process keeps running: a leader
// with a slow disk stays leader and every acknowledgement waits for it.
type slowDiskNemesis struct{ node int }

func (*slowDiskNemesis) Name() string { return "slow-disk" }

func (s *slowDiskNemesis) Inject(ctx context.Context, env *Env) (string, error) {
	c := env.Cluster
	if !c.cfg.SlowFS {
		return "", fmt.Errorf("%w: slow-disk needs the slowfs build (the run builds it when the profile has this nemesis)", ErrUnsupported)
	}
	i, role, err := env.coinTarget(ctx)
	if err != nil {
		return "", err
	}
	s.node = i
	return fmt.Sprintf("%s (%s): every flush delayed %s", c.Nodes[i].ID, role, slowDiskDelay),
		os.WriteFile(c.slowFSControl(c.Nodes[i]), []byte(slowDiskDelay), 0o644)
}

func (s *slowDiskNemesis) Heal(_ context.Context, env *Env) error {
	return os.WriteFile(env.Cluster.slowFSControl(env.Cluster.Nodes[s.node]), []byte("0"), 0o644)
}

// slowFSControl is node n's SlowFS control file (outside its data
// directory, which may be a tmpfs).
func (c *Cluster) slowFSControl(n *Node) string {
	return filepath.Join(c.cfg.Dir, n.ID+".flush-delay")
}

// slowFSEnv prefixes argv with the slowfs build's control variable for
// node n (env execs in place, so the PID stays the broker's).
func (c *Cluster) slowFSEnv(n *Node, argv []string) []string {
	if !c.cfg.SlowFS || n.Index < 0 {
		return argv
	}
	return append([]string{"env", storage.SlowFSControlEnv + "=" + c.slowFSControl(n)}, argv...)
}

// bitFlipNemesis kills a voting follower, flips one bit in one of its
// closed CommitLog segments (not the newest, which is still being written)
// and restarts it. Acknowledged messages in that segment still have intact
// copies on the other two members; the damaged member must say where it is
// damaged and stop: refuse to start (raftlog's CorruptionError past the
// recovery anchor, or DamageError when Raft's start reads the entry) or be
// stopped by its scrub (below the anchor), its log naming the segment file
// and the offset. The nemesis waits for that line (bitflipDetectTimeout),
// then performs the operator's repair, the wipe-and-re-add of
// replace-member (Cluster.wipeAndReAdd), and heals like replace-member:
// until the member is a voter again. Netns mode only, like replace-member.
type bitFlipNemesis struct {
	replaceMemberNemesis
	// repaired is false while the wipe-and-re-add still has to run (the
	// quorum guard refused it at injection).
	repaired bool
}

// bitflipDetectTimeout bounds the wait for the damaged member to report:
// a start refusal is immediate; the scrub starts 5 s after the start and
// reads raftScrubBytesPerSecond (the suite's brokers: 64 MiB/s).
const bitflipDetectTimeout = 90 * time.Second

// damageLine matches the log text naming the damage: raftlog's
// CorruptionError ("corrupt frame in FILE at offset N") and DamageError
// ("damaged log in FILE at offset N").
var damageLine = regexp.MustCompile(`(corrupt frame|damaged log) in (\S+) at offset (\d+)`)

func (*bitFlipNemesis) Name() string { return "bitflip-segment" }

func (b *bitFlipNemesis) Inject(ctx context.Context, env *Env) (string, error) {
	c := env.Cluster
	if c.net == nil {
		return "", fmt.Errorf("%w: bitflip-segment repairs with replace-member's wipe-and-re-add, which needs the netns mode", ErrUnsupported)
	}
	i, err := pickRemovableFollower(ctx, env, "bitflip-segment")
	if err != nil {
		return "", err
	}
	n := c.Nodes[i]
	dir := filepath.Join(n.DataDir, "commitlog")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	var segs []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			segs = append(segs, e.Name())
		}
	}
	sort.Strings(segs)
	if len(segs) < 2 {
		return "", fmt.Errorf("%w: %s has no closed CommitLog segment yet", ErrUnsupported, n.ID)
	}
	b.node, b.repaired = i, false
	var logFrom int64
	if fi, err := os.Stat(n.LogPath); err == nil {
		logFrom = fi.Size()
	}
	if err := c.KillNode(i); err != nil {
		return "", err
	}
	seg := filepath.Join(dir, segs[env.Rand.Intn(len(segs)-1)])
	off, bit, err := flipBit(seg, env.Rand.Int63(), env.Rand.Intn(8))
	if err != nil {
		return "", errors.Join(err, c.StartNode(i))
	}
	desc := fmt.Sprintf("%s (follower): flipped bit %d of byte %d of closed segment %s", n.ID, bit, off, filepath.Base(seg))
	if err := c.StartNode(i); err != nil {
		desc += "; restart: " + err.Error()
	}
	start := time.Now()
	desc += "; " + awaitDamage(ctx, n, filepath.Base(seg), logFrom, start.Add(bitflipDetectTimeout))
	repair, err := c.wipeAndReAdd(ctx, env.Group, i)
	if err != nil {
		return desc + "; repair deferred to heal: " + err.Error(), nil
	}
	b.repaired = true
	return desc + "; repair: " + repair, nil
}

// damageUndetected opens a bitflip window's detail when the damaged member
// never said where it is damaged; the checker fails the run on it.
const damageUndetected = "NOT DETECTED"

// awaitDamage waits until n's log (from byte from on) names the damage in
// segment seg, or deadline, and says what it saw.
func awaitDamage(ctx context.Context, n *Node, seg string, from int64, deadline time.Time) string {
	start := time.Now()
	for {
		b, _ := os.ReadFile(n.LogPath)
		if int64(len(b)) > from {
			for _, m := range damageLine.FindAllStringSubmatch(string(b[from:]), -1) {
				if filepath.Base(m[2]) != seg {
					continue
				}
				// A start refusal is logged just before the process exits.
				for t := 0; t < 12 && !n.Exited(); t++ {
					time.Sleep(250 * time.Millisecond)
				}
				how := "stopped while running (its scrub or a read found it)"
				switch {
				case n.Exited() && m[1] == "corrupt frame":
					how = "refused to start (mid-log corruption past the anchor)"
				case n.Exited():
					how = "refused to start (Raft's start read the damaged entry)"
				}
				return fmt.Sprintf("detected after %d ms: %s, log names %s offset %s", time.Since(start).Milliseconds(), how, seg, m[3])
			}
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("%s within %s (exited %v)", damageUndetected, time.Since(start).Round(time.Second), n.Exited())
		}
		select {
		case <-ctx.Done():
			return "not detected: " + ctx.Err().Error()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Heal finishes a repair the injection could not start, then waits like
// replace-member until the member is a voter again.
func (b *bitFlipNemesis) Heal(ctx context.Context, env *Env) error {
	if !b.repaired {
		var last error
		for try := 0; try < 10 && !b.repaired; try++ {
			if _, err := env.Cluster.wipeAndReAdd(ctx, env.Group, b.node); err != nil {
				last = err
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(2 * time.Second):
				}
				continue
			}
			b.repaired = true
		}
		if !b.repaired {
			return fmt.Errorf("bitflip-segment: the wipe-and-re-add of %s never ran: %w", env.Cluster.Nodes[b.node].ID, last)
		}
	}
	return b.replaceMemberNemesis.Heal(ctx, env)
}

// inZeroRun reports whether off lies in or at the edge of a zero run: the
// w bytes before it or the w bytes from it on are all zero.
func inZeroRun(b []byte, off int64, w int64) bool {
	allZero := func(p []byte) bool {
		for _, c := range p {
			if c != 0 {
				return false
			}
		}
		return true
	}
	return allZero(b[max(off-w, 0):off]) || allZero(b[off:min(off+w, int64(len(b)))])
}

// flipBit inverts one bit of the file at a position derived from r (within
// its non-zero prefix, so the flip lands in data rather than in a
// preallocated tail, and outside zero runs) and returns the byte offset
// and bit.
func flipBit(path string, r int64, bit int) (int64, int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	if end == 0 {
		return 0, 0, fmt.Errorf("%w: %s holds no data", ErrUnsupported, path)
	}
	// Skip zero runs: a member rebuilt by catch-up keeps a zero head before
	// its first entry in its oldest segment, space no entry uses, which is
	// never read or served and so is nothing to detect.
	rng := rand.New(rand.NewSource(r))
	off := rng.Int63n(int64(end))
	for try := 0; try < 1000 && inZeroRun(b, off, 32); try++ {
		off = rng.Int63n(int64(end))
	}
	if inZeroRun(b, off, 32) {
		return 0, 0, fmt.Errorf("%w: %s holds only zero runs", ErrUnsupported, path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return 0, 0, err
	}
	if _, err := f.WriteAt([]byte{b[off] ^ 1<<bit}, off); err != nil {
		_ = f.Close()
		return 0, 0, err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return 0, 0, err
	}
	return off, bit, f.Close()
}
