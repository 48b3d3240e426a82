package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/storage"
)

// Profile is a named run shape.
type Profile struct {
	Name     string
	Duration time.Duration // workload time under faults
	Nemeses  []string
	Quiet    time.Duration // between faults (±25 %)
	Hold     time.Duration // how long each fault lasts
	Workload WorkloadConfig
	// ElectionMillis is the brokers' Raft heartbeat/election timeout.
	ElectionMillis int
	// SegmentBytes is the CommitLog segment size (small: segments roll).
	SegmentBytes int64
	Queues       int
	// DrainTimeout bounds the wait, after healing, for every acknowledged
	// message to be consumed.
	DrainTimeout time.Duration
	// Groups is the number of 3-node broker groups (1 or 2).
	Groups int
	// TmpfsBytes sizes the tmpfs under node n0's data directory when the
	// profile has the disk-full nemesis and the suite runs as root.
	TmpfsBytes int64
	// AuditInterval is the period of the cross-replica ConsumeQueue audit
	// (audit.go); 0 runs none.
	AuditInterval time.Duration
}

// Profiles returns the built-in profiles: "short" (the go test profile,
// about 75 s of faults: kills, crash-unsynced, pauses and partitions),
// "full" (30 minutes, every nemesis but those OffByDefault, 400 sends/s)
// and "saturation" (full's faults under an unpaced closed loop,
// profile_saturation.go).
func Profiles() map[string]Profile {
	wl := WorkloadConfig{Producers: 4, WorkersPerProducer: 2, OpsPerSecond: 300, SendTimeout: 5 * time.Second, AttemptTimeout: time.Second, Consumers: 2,
		TimerOpsPerSecond: 10, TxnProducers: 1, OrderedKeys: 8, OrderedOpsPerSecond: 40, OffsetQueues: 4, RetryOpsPerSecond: 4}
	short := Profile{
		Name:     "short",
		Duration: 75 * time.Second,
		Nemeses: []string{"kill-leader", "kill-random", "pause-leader", "pause-random",
			"partition-leader", "partition-halves", "partition-bridge", "partition-oneway", "partition-ring", "crash-unsynced",
			"kill-namesrv", "slow-disk"},
		Quiet: 3 * time.Second, Hold: 4 * time.Second,
		Workload: wl, ElectionMillis: 300, SegmentBytes: 4 << 20, Queues: 8,
		DrainTimeout: 60 * time.Second,
		TmpfsBytes:   256 << 20,
		// A round is a few hundred small requests: cheap enough for CI.
		AuditInterval: 5 * time.Second,
	}
	full := short
	full.Name = "full"
	full.Duration = 30 * time.Minute
	full.Nemeses = DefaultNemeses()
	full.Quiet, full.Hold = 5*time.Second, 8*time.Second
	full.Workload.OpsPerSecond = 400
	full.DrainTimeout = 2 * time.Minute
	// 30 minutes at 400 sends/s is about 720k messages: CommitLog, Raft
	// log and indexes need far more than the short profile's 256 MiB.
	full.TmpfsBytes = 2 << 30
	return map[string]Profile{"short": short, "full": full, "saturation": saturation(full)}
}

// Options configure Run.
type Options struct {
	Profile Profile
	Seed    int64
	// Dir receives the cluster's data and logs and the report (under
	// report/).
	Dir string
	// Binary is a prebuilt raftmq; empty builds one into Dir.
	Binary string
	// CrashBinary is a prebuilt raftmq built with -tags crashfs, used
	// instead of Binary when the profile has crash-unsynced; empty builds
	// one into Dir.
	CrashBinary string
	Log         *zap.Logger
	// Netns asks for the network-namespace mode; when the host cannot do
	// it (NetnsSupport) the run falls back to the proxy mode and its
	// report says why.
	Netns bool
	// RequireNetns makes an unavailable netns mode an error instead of a
	// fallback to the proxy mode (the command sets it for the full and
	// saturation profiles: their partition-clients and net-loss-delay
	// nemeses need namespaces).
	RequireNetns bool
}

// Result is a finished run.
type Result struct {
	ReportDir string
	History   History
	Verdict   Verdict
	Table     string
}

// Run starts a cluster, runs the profile's workload under its nemeses,
// heals, drains, checks and writes the report. The error is non-nil when
// the run could not be carried out; an invalid history is reported by
// Result.Verdict.Valid (and the error wraps ErrInvalid).
func Run(ctx context.Context, o Options) (*Result, error) {
	log := o.Log
	if log == nil {
		log = zap.NewNop()
	}
	p := o.Profile
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	// With crash-unsynced every node runs the crashfs build, so every
	// kill of this run (kill-*, fsync-eio's heal too) loses unsynced
	// writes: the simplest way to have a crashfs node to kill at any time.
	crash := slices.Contains(p.Nemeses, "crash-unsynced")
	tags := BuildTags(p.Nemeses)
	bin := o.Binary
	if tags != "" {
		bin = o.CrashBinary
		if tags != "crashfs" {
			bin = "" // CrashBinary is the crashfs-only build
		}
	}
	if bin == "" {
		var err error
		if bin, err = BuildBinaryTags(ctx, o.Dir, tags); err != nil {
			return nil, err
		}
	}
	var nems []Nemesis
	for _, name := range p.Nemeses {
		n, err := NewNemesis(name)
		if err != nil {
			return nil, err
		}
		nems = append(nems, n)
	}
	ccfg := ClusterConfig{Dir: filepath.Join(o.Dir, "cluster"), Binary: bin, CrashFS: crash, SlowFS: strings.Contains(tags, "slowfs"), SegmentBytes: p.SegmentBytes,
		ElectionMillis: p.ElectionMillis, Queues: p.Queues, Groups: p.Groups, TmpfsNode: -1, KeepQueuesDir: filepath.Join(o.Dir, "report", "wiped")}
	var notes []string
	if n := diskPressureNote(o.Dir); n != "" {
		notes = append(notes, n)
	}
	if o.Netns {
		if err := NetnsSupport(); err != nil {
			if o.RequireNetns {
				return nil, fmt.Errorf("netns mode required but unavailable: %w", err)
			}
			log.Warn("netns mode requested but unavailable: falling back to the proxy mode", zap.Error(err))
			notes = append(notes, fmt.Sprintf("WARNING: netns mode requested but unavailable (%v): proxy mode ran; partition-clients and net-loss-delay cannot be injected", err))
		} else {
			ccfg.Netns = true
		}
	}
	for _, name := range p.Nemeses {
		if name != "disk-full" {
			continue
		}
		if os.Geteuid() == 0 && p.TmpfsBytes > 0 {
			ccfg.TmpfsNode, ccfg.TmpfsBytes = 0, p.TmpfsBytes
		} else {
			notes = append(notes, "disk-full needs root (tmpfs mount): skipped")
		}
	}
	c, err := NewCluster(ccfg, log.Named("cluster"))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	if crash {
		notes = append(notes, "every node runs the crashfs build (store data in process memory until synced): every kill loses unsynced writes")
	}
	rec := &recorder{h: History{Profile: p.Name, Seed: o.Seed, Mode: c.Mode(), Start: time.Now(), Notes: notes}}
	if c.TmpfsNode() >= 0 {
		rec.note("%s's data directory is a %d MiB tmpfs (disk-full nemesis; fsync is a no-op there)", c.Nodes[c.TmpfsNode()].ID, p.TmpfsBytes>>20)
	}

	monCtx, stopMon := context.WithCancel(ctx)
	var monWG sync.WaitGroup
	monWG.Add(1)
	go func() { defer monWG.Done(); monitor(monCtx, c, rec) }()
	defer func() { stopMon(); monWG.Wait() }()
	var aud *auditor
	if p.AuditInterval > 0 {
		aud = newClusterAuditor(c, rec, p.AuditInterval, p.Queues, filepath.Join(o.Dir, "report", "audit"))
		monWG.Add(1)
		go func() { defer monWG.Done(); aud.run(monCtx) }()
	}

	wl := newWorkload(p.Workload, p.Queues, c, rec, log.Named("client"))
	defer wl.close()
	if err := wl.startProducers(ctx); err != nil {
		return nil, err
	}
	if err := wl.startConsumers(ctx); err != nil {
		return nil, err
	}
	if err := wl.startTimers(ctx); err != nil {
		return nil, err
	}
	if err := wl.startChaos(ctx); err != nil {
		return nil, err
	}

	runCtx, stopRun := context.WithTimeout(ctx, p.Duration)
	env := &Env{Cluster: c, Rand: rand.New(rand.NewSource(o.Seed)), Dir: o.Dir}
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); wl.runProducers(runCtx) }()
	go func() { defer wg.Done(); wl.runChaos(runCtx) }()
	go func() { defer wg.Done(); wl.runTimers(runCtx) }()
	go func() { defer wg.Done(); Schedule{Nemeses: nems, Quiet: p.Quiet, Hold: p.Hold}.run(runCtx, env, rec) }()
	wg.Wait()
	stopRun()

	// Heal everything, then let the consumers catch up.
	c.HealAll()
	for _, n := range c.Nodes {
		_ = c.ResumeNode(n.Index)
		if err := c.StartNode(n.Index); err != nil {
			return nil, err
		}
	}
	healedAt := time.Now()
	if err := c.WaitLeader(ctx, 30*time.Second); err != nil {
		rec.note("after heal: %v", err)
	}
	drained := drain(ctx, rec, p.DrainTimeout)
	rec.note("drain after heal: %s (%.1f s after heal)", map[bool]string{true: "every acknowledged value consumed", false: "timed out"}[drained], time.Since(healedAt).Seconds())
	if len(rec.snapshot().TimerOps) > 0 {
		timersDrained := drainTimers(ctx, rec, p.DrainTimeout)
		rec.note("timer drain: %s", map[bool]string{true: "every acknowledged timer message delivered", false: "timed out"}[timersDrained])
	}
	if !wl.drainChaos(ctx, p.DrainTimeout) {
		rec.note("ordered/retry/DLQ drain: timed out")
	}
	wl.close()
	wl.cons, wl.prod = nil, nil
	if err := c.WaitCaughtUp(ctx, time.Minute); err != nil {
		rec.note("before final read: %v", err)
	}
	sampleDisks(c, rec)
	recordCatchups(ctx, c, rec)
	readErr := wl.finalRead(ctx, p.Queues)
	if err := wl.finalReadChaos(ctx); err != nil {
		rec.note("final read (ordered topic, DLQ, retry topics): %v", err)
	}
	if err := wl.finalReadTimers(ctx); err != nil {
		rec.note("final read (timer topic): %v", err)
	}
	if readErr != nil {
		rec.note("final read: %v", readErr)
	}
	stopMon()
	monWG.Wait()
	if aud != nil {
		rec.mu.Lock()
		rec.h.Audit = aud.history()
		rec.mu.Unlock()
	}

	h := rec.snapshot()
	v := CheckHistory(h, readErr == nil)
	res := &Result{ReportDir: filepath.Join(o.Dir, "report"), History: h, Verdict: v, Table: VerdictTable(h, v)}
	if err := WriteReport(res.ReportDir, h, v); err != nil {
		return res, err
	}
	if !v.Valid {
		return res, fmt.Errorf("%w: see %s", ErrInvalid, filepath.Join(res.ReportDir, "verdict.txt"))
	}
	return res, nil
}

// drain waits until every acknowledged value has been delivered, up to
// timeout.
func drain(ctx context.Context, rec *recorder, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		rec.mu.Lock()
		got := make(map[string]bool, len(rec.h.Deliveries))
		for _, d := range rec.h.Deliveries {
			got[d.Value] = true
		}
		missing := 0
		for _, o := range rec.h.Ops {
			if mustDeliver(o) && !got[o.Value] {
				missing++
			}
		}
		rec.mu.Unlock()
		if missing == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// monitor polls every running node's Raft status and records each change
// of (term, state, serving), the input of the one-leader-per-term check;
// every second it samples each node's data file system's use (DiskPeaks:
// near CleanForciblyRatio the brokers' retention removes queue heads,
// which the checker excuses only then).
func monitor(ctx context.Context, c *Cluster, rec *recorder) {
	type key struct {
		term    uint64
		state   string
		serving bool
	}
	last := map[int]key{}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for round := 0; ; round++ {
		if round%10 == 0 {
			sampleDisks(c, rec)
		}
		for i, n := range c.Nodes {
			if n.State() != NodeRunning {
				continue
			}
			sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			st, err := c.RaftStatus(sctx, i)
			cancel()
			if err != nil {
				if errors.Is(ctx.Err(), context.Canceled) {
					return
				}
				continue
			}
			k := key{st.Term, st.State, st.Serving}
			if last[i] != k {
				last[i] = k
				rec.leader(LeaderObs{AtMs: rec.since(time.Now()), Node: n.ID, Group: GroupNameOf(n.Group), Term: st.Term, State: st.State, Serving: st.Serving})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sampleDisks records each node's data file system's use as the brokers
// measure it (storage.FS.DiskUsage, df's Use%).
func sampleDisks(c *Cluster, rec *recorder) {
	for _, n := range c.Nodes {
		used, total, err := storage.OSFS().DiskUsage(n.DataDir)
		if err != nil || total == 0 {
			continue
		}
		rec.diskUse(n.ID, float64(used)*100/float64(total))
	}
}

// recordCatchups records the nodes whose full-data catch-up is pending
// (their queues start at their snapshot until it ends): the checker
// excuses their floors.
func recordCatchups(ctx context.Context, c *Cluster, rec *recorder) {
	var pending []string
	for i, n := range c.Nodes {
		if n.State() != NodeRunning {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := c.RaftStatus(sctx, i)
		cancel()
		if err == nil && st.Catchup != nil && st.Catchup.Pending {
			pending = append(pending, n.ID)
		}
	}
	rec.mu.Lock()
	rec.h.CatchupPending = append(rec.h.CatchupPending, pending...)
	rec.mu.Unlock()
	if len(pending) > 0 {
		rec.note("full-data catch-up still pending at the final read on %s", strings.Join(pending, ", "))
	}
}
