package jepsen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

func init() {
	nemesisTable["replace-member"] = func() Nemesis { return &replaceMemberNemesis{} }
	nemesisTable["rebuild-member"] = func() Nemesis { return &rebuildMemberNemesis{} }
}

// Timeouts of replace-member. The learner's catch-up is a full replay of
// the leader's log (the broker keeps every retained entry), so it grows
// with the run; heal keeps waiting where the injection's wait gave up.
const (
	replaceCatchUpTimeout = 2 * time.Minute
	replaceHealTimeout    = 5 * time.Minute
	replaceCallTimeout    = 30 * time.Second
)

// replaceMemberNemesis rebuilds a follower from nothing, the operator's
// "wipe and re-add" procedure (docs/operations.md): removeMember it,
// SIGKILL it, delete everything in its data directory, start it again under
// the same id and Raft address with raftJoin=true, and addMember it (a
// learner, promoted to voter once caught up). Heal makes sure the group has
// three voters again (addMember once more, which waits for a learner that
// is still catching up). The quorum guard's refusal (a voter not
// answering) means "not now": nothing was done, and the schedule notes it
// as not injected.
//
// Netns mode only: in proxy mode each member dials its peers through
// per-pair proxy addresses, so the members' bootstrap configurations differ
// and the first configuration change would hand every member the leader's
// view (its own address among them a proxy's).
type replaceMemberNemesis struct {
	node int
}

func (*replaceMemberNemesis) Name() string { return "replace-member" }

func (r *replaceMemberNemesis) Inject(ctx context.Context, env *Env) (string, error) {
	c := env.Cluster
	if c.net == nil {
		return "", fmt.Errorf("%w: replace-member needs the netns mode (proxy mode gives members per-pair peer addresses)", ErrUnsupported)
	}
	i, err := pickRemovableFollower(ctx, env, "replace-member")
	if err != nil {
		return "", err
	}
	r.node = i
	return c.wipeAndReAdd(ctx, env.Group, i)
}

// pickRemovableFollower picks a random running voting follower of the
// env's group that the operator may take out to rebuild (wipe-and-re-add,
// or rebuild in place): with a member down, paused or still a learner from
// an earlier window, taking out another would leave one voter (the quorum
// guard refuses a removal; a wiped voter cannot vote until caught up), so
// that is ErrUnsupported.
func pickRemovableFollower(ctx context.Context, env *Env, nemesis string) (int, error) {
	c := env.Cluster
	l := c.LeaderOf(ctx, env.Group)
	if l < 0 {
		return -1, ErrNoLeader
	}
	st, err := c.RaftStatus(ctx, l)
	if err != nil {
		return -1, err
	}
	var followers []int
	for _, m := range st.Members {
		i := c.nodeIndex(m.ID)
		// A process that exited on its own (a refused start) still reads
		// as Running until the harness stops it.
		if i >= 0 && i != l && m.Suffrage == "Voter" && c.Nodes[i].State() == NodeRunning && !c.Nodes[i].Exited() {
			followers = append(followers, i)
		}
	}
	if len(followers) < len(env.members())-1 {
		return -1, fmt.Errorf("%w: %s: only %v are running voting followers", ErrUnsupported, nemesis, ids(c, followers))
	}
	return followers[env.Rand.Intn(len(followers))], nil
}

// wipeAndReAdd is the operator's wipe-and-re-add of node i of group g
// (docs/operations.md): removeMember, SIGKILL (a node already down is left
// so), delete its data directory, start it with raftJoin=true, addMember
// (a learner promoted once caught up). An error means nothing was done
// (the quorum guard refused the removal, or it failed); after the removal
// every problem is left to the caller's heal (replaceMemberNemesis.Heal)
// and noted in the returned detail.
func (c *Cluster) wipeAndReAdd(ctx context.Context, g, i int) (string, error) {
	n := c.Nodes[i]
	group := GroupNameOf(g)
	adm, err := client.NewAdmin(client.NameServers(c.NamesrvAddr()))
	if err != nil {
		return "", err
	}
	defer func() { _ = adm.Close(ctx) }()

	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, replaceCallTimeout)
	_, err = adm.RemoveRaftMember(cctx, group, n.ID, false)
	cancel()
	if err != nil {
		var be *client.BrokerError
		if errors.As(err, &be) && be.Code == remoting.ResponseInvalidParameter {
			// The quorum guard: retry another time, not a fault.
			return "", fmt.Errorf("%w: removeMember %s refused: %s", ErrUnsupported, n.ID, be.Remark)
		}
		// The answer may be lost although the removal committed: go on
		// only if the configuration no longer has the member.
		if in, cerr := c.inConfiguration(ctx, g, n.ID); cerr != nil || in {
			return "", fmt.Errorf("removeMember %s: %w", n.ID, err)
		}
	}
	removed := time.Since(start)
	var notes []string
	if err := c.KillNode(i); err != nil {
		notes = append(notes, "kill: "+err.Error())
	}
	if kept := c.keepQueuesOf(n); kept != "" {
		notes = append(notes, kept)
	}
	wiped, err := wipeDir(n.DataDir)
	if err != nil {
		notes = append(notes, "wipe: "+err.Error())
	}
	if err := ensureConfLine(n.ConfPath, "raftJoin=true"); err != nil {
		notes = append(notes, "conf: "+err.Error())
	}
	if err := c.StartNode(i); err != nil {
		notes = append(notes, "start: "+err.Error())
	}
	// From here on errors are the heal's business: the schedule calls Heal
	// only for an injection that returned no error.
	addStart := time.Now()
	cctx, cancel = context.WithTimeout(ctx, replaceCatchUpTimeout+replaceCallTimeout)
	ch, err := adm.AddRaftMember(cctx, group, n.ID, c.raftAddr(n), client.RaftMemberOptions{CatchUpTimeout: replaceCatchUpTimeout})
	cancel()
	added := fmt.Sprintf("re-added in %d ms", time.Since(addStart).Milliseconds())
	switch {
	case err != nil:
		added = "addMember failed (heal retries): " + err.Error()
	case ch != nil:
		added = fmt.Sprintf("re-added: learner promoted after %d ms catch-up (lag %d)", ch.CatchUpMillis, ch.Lag)
	}
	desc := fmt.Sprintf("%s (follower): removed in %d ms, SIGKILL, data directory wiped (%d MiB of files), restarted with raftJoin=true, %s",
		n.ID, removed.Milliseconds(), wiped>>20, added)
	if len(notes) > 0 {
		desc += "; " + strings.Join(notes, "; ")
	}
	return desc, nil
}

// Heal waits until the member is a voter of its group again, adding it
// again while it is not (a learner still catching up, or an add that
// failed).
func (r *replaceMemberNemesis) Heal(ctx context.Context, env *Env) error {
	c := env.Cluster
	n := c.Nodes[r.node]
	if err := c.StartNode(r.node); err != nil {
		return err
	}
	deadline := time.Now().Add(replaceHealTimeout)
	var last error
	for time.Now().Before(deadline) {
		if ok, err := c.isVoter(ctx, n.Group, n.ID); err == nil && ok {
			return nil
		} else if err != nil {
			last = err
		}
		adm, err := client.NewAdmin(client.NameServers(c.NamesrvAddr()))
		if err != nil {
			return err
		}
		wait := min(replaceCatchUpTimeout, time.Until(deadline))
		if wait < time.Second {
			break // 0 would ask for the broker's default wait
		}
		cctx, cancel := context.WithTimeout(ctx, wait+replaceCallTimeout)
		_, err = adm.AddRaftMember(cctx, GroupNameOf(n.Group), n.ID, c.raftAddr(n), client.RaftMemberOptions{CatchUpTimeout: wait})
		cancel()
		_ = adm.Close(ctx)
		if err == nil {
			continue // the next round confirms it
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("%s is not a voter of %s after %s: %v", n.ID, GroupNameOf(n.Group), replaceHealTimeout, last)
}

// nodeIndex is the index of the member with Raft id id, or -1.
func (c *Cluster) nodeIndex(id string) int {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n.Index
		}
	}
	return -1
}

// raftAddr is n's Raft address as its peers dial it (netns mode: no
// proxies in between).
func (c *Cluster) raftAddr(n *Node) string { return fmt.Sprintf("%s:%d", n.Host, n.RaftPort) }

// membership is group g's live configuration as its serving leader sees it.
func (c *Cluster) membership(ctx context.Context, g int) (map[string]string, error) {
	l := c.LeaderOf(ctx, g)
	if l < 0 {
		return nil, ErrNoLeader
	}
	st, err := c.RaftStatus(ctx, l)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range st.Members {
		out[m.ID] = m.Suffrage
	}
	return out, nil
}

func (c *Cluster) inConfiguration(ctx context.Context, g int, id string) (bool, error) {
	m, err := c.membership(ctx, g)
	_, in := m[id]
	return in, err
}

func (c *Cluster) isVoter(ctx context.Context, g int, id string) (bool, error) {
	m, err := c.membership(ctx, g)
	return m[id] == "Voter", err
}

// wipeDir deletes everything inside dir (not dir itself, which may be a
// tmpfs mount point) and returns how many bytes the files held.
func wipeDir(dir string) (int64, error) {
	var bytes int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				bytes += fi.Size()
			}
		}
		return nil
	})
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, e := range ents {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return bytes, errors.Join(errs...)
}

// ensureConfLine appends line to the conf file at path unless it has it.
func ensureConfLine(path, line string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == line {
			return nil
		}
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		line = "\n" + line
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Timeouts of rebuild-member.
const (
	// rebuildJoinTimeout bounds the wait for the restarted member's join
	// decision in its log: a start, the route lookup and the RAFT_STATUS
	// asks of its join check (at most 2 s).
	rebuildJoinTimeout = 30 * time.Second
	// rebuildHealTimeout bounds heal's wait for the member to catch up:
	// like replace-member's, a replay of the leader's retained log.
	rebuildHealTimeout = 5 * time.Minute
)

// joinedLine matches the warning an empty member logs when its join check
// found the group running (broker/member_join.go): it joins as with
// raftJoin=true instead of bootstrapping from dLegerPeers. The groups are
// the member that answered, its address, and what it answered: its log's
// end (asked over RAFT_STATUS) or its term (asked over Raft).
var joinedLine = regexp.MustCompile(`(\S+) at (\S+) (holds a Raft log up to index \d+ \(term \d+\)|is at Raft term \d+)[^;]*; not bootstrapping from dLegerPeers, joining as with raftJoin=true`)

// rebuildBootstrapped opens the part of a rebuild-member window's detail
// saying the member did not log its join: it bootstrapped a log of its own
// from dLegerPeers (or never got that far). The checker fails the run on it.
const rebuildBootstrapped = "BOOTSTRAPPED"

// rebuildMemberNemesis is the operator's rebuild in place (README
// "Rebuilding a member's data"): SIGKILL a voting follower, delete
// everything in its data directory and start it again under the same id
// from its conf, with no raftJoin line and no membership request: it is
// still a voter of the group's configuration, in half the injections
// right after a name server restart. The empty member must find the group
// running (its join check asks its peers over Raft and the members the
// name server routes) and wait for the leader rather than bootstrap; the injection
// waits for the line saying so in the member's log and marks the window
// rebuildBootstrapped without it. Heal waits until the member has caught
// up: it applies what the leader had committed when the wait began, no
// catch-up is pending (so it may stand for election again) and it is a
// voter.
//
// Netns mode only: in proxy mode the rejoined member takes the group's
// configuration from the leader's log or snapshot, where its own address
// is the leader's proxy to it, not the address its dLegerPeers gives it;
// its next restart then refuses to start (the live configuration has it
// elsewhere), and it would dial its peers through the leader's proxies.
type rebuildMemberNemesis struct {
	node int
	// caughtUp is heal's account of the catch-up, for the window's detail.
	caughtUp string
}

func (*rebuildMemberNemesis) Name() string { return "rebuild-member" }

func (r *rebuildMemberNemesis) Inject(ctx context.Context, env *Env) (string, error) {
	c := env.Cluster
	if c.net == nil {
		return "", fmt.Errorf("%w: rebuild-member needs the netns mode (the rejoined member takes the leader's view of the group, whose addresses for it are proxies in proxy mode)", ErrUnsupported)
	}
	i, err := pickRemovableFollower(ctx, env, "rebuild-member")
	if err != nil {
		return "", err
	}
	n := c.Nodes[i]
	// Half the rebuilds start the member right after a name server
	// restart, which routes nobody until the members register again: the
	// join check must then find the group over Raft.
	restartNS := env.Rand.Intn(2) == 0
	r.node, r.caughtUp = i, ""
	var logFrom int64
	if fi, err := os.Stat(n.LogPath); err == nil {
		logFrom = fi.Size()
	}
	// After the kill every problem goes into the detail: the schedule
	// heals only an injection that returned no error.
	var notes []string
	pid := n.PID()
	if err := c.KillNode(i); err != nil {
		notes = append(notes, "kill: "+err.Error())
	}
	if kept := c.keepQueuesOf(n); kept != "" {
		notes = append(notes, kept)
	}
	wiped, err := wipeDir(n.DataDir)
	if err != nil {
		notes = append(notes, "wipe: "+err.Error())
	}
	if err := removeConfKey(n.ConfPath, "raftJoin"); err != nil {
		notes = append(notes, "conf: "+err.Error())
	}
	how := "restarted from its conf without raftJoin"
	if restartNS {
		if err := c.restartNamesrv(); err != nil {
			notes = append(notes, "name server restart: "+err.Error())
		}
		how = "the name server restarted (it routes nobody yet), then the member restarted from its conf without raftJoin"
	}
	if err := c.StartNode(i); err != nil {
		notes = append(notes, "start: "+err.Error())
	}
	joined := awaitJoin(ctx, n.LogPath, logFrom, n.Exited, time.Now().Add(rebuildJoinTimeout))
	desc := fmt.Sprintf("%s (follower, pid %d): SIGKILL, data directory wiped (%d MiB of files), %s; %s",
		n.ID, pid, wiped>>20, how, joined)
	if len(notes) > 0 {
		desc += "; " + strings.Join(notes, "; ")
	}
	return desc, nil
}

// awaitJoin waits until the log at path (from byte from on) has the
// member's join line, the member exited, or deadline, and says what it
// saw; without the line the answer starts with rebuildBootstrapped.
func awaitJoin(ctx context.Context, path string, from int64, exited func() bool, deadline time.Time) string {
	start := time.Now()
	for {
		b, _ := os.ReadFile(path)
		if int64(len(b)) > from {
			if m := joinedLine.FindSubmatch(b[from:]); m != nil {
				return fmt.Sprintf("joined without bootstrapping after %d ms (%s at %s %s)",
					time.Since(start).Milliseconds(), m[1], m[2], m[3])
			}
		}
		if exited() {
			return fmt.Sprintf("%s? exited after %d ms without logging its join", rebuildBootstrapped, time.Since(start).Milliseconds())
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("%s: no join line in its log within %s", rebuildBootstrapped, time.Since(start).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return fmt.Sprintf("%s? %v before its join line", rebuildBootstrapped, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Heal restarts the member if it went down and waits until it has caught
// up: it answers, is a voter in the leader's configuration, has no
// catch-up pending and has applied the leader's commit index of the
// first round.
func (r *rebuildMemberNemesis) Heal(ctx context.Context, env *Env) error {
	c := env.Cluster
	n := c.Nodes[r.node]
	if err := c.StartNode(r.node); err != nil {
		return err
	}
	start := time.Now()
	deadline := start.Add(rebuildHealTimeout)
	var target uint64
	last := "no answer yet"
	for {
		if target == 0 {
			if l := c.LeaderOf(ctx, n.Group); l >= 0 {
				if st, err := c.RaftStatus(ctx, l); err == nil {
					target = st.CommitIndex
				}
			}
		}
		st, err := c.RaftStatus(ctx, r.node)
		switch {
		case err != nil:
			last = err.Error()
		case target == 0:
			last = "no serving leader"
		case st.Catchup != nil && st.Catchup.Pending:
			last = fmt.Sprintf("catch-up pending (phase %q, %d of %d bytes)", st.Catchup.Phase, st.Catchup.BytesDone, st.Catchup.BytesTotal)
		case st.AppliedIndex < target:
			last = fmt.Sprintf("applied %d of %d", st.AppliedIndex, target)
		default:
			voter, err := c.isVoter(ctx, n.Group, n.ID)
			if err == nil && voter {
				r.caughtUp = fmt.Sprintf("caught up %d ms into heal (applied %d ≥ leader's commit %d, last snapshot %d%s)",
					time.Since(start).Milliseconds(), st.AppliedIndex, target, st.LastSnapshotIndex, catchupNote(st.Catchup))
				return nil
			}
			last = fmt.Sprintf("caught up but not a voter (%v)", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s of %s has not caught up after %s: %s", n.ID, GroupNameOf(n.Group), rebuildHealTimeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// HealDetail is heal's account of the catch-up for the window's detail.
func (r *rebuildMemberNemesis) HealDetail() string { return r.caughtUp }

// catchupNote describes a finished full-data catch-up ("" when the member
// never needed one: the leader replayed its whole log).
func catchupNote(c *wire.CatchupStatus) string {
	if c == nil {
		return ""
	}
	s := fmt.Sprintf("; full-data catch-up took %d ms, %d MiB", c.TookMillis, c.BytesDone>>20)
	if c.LastError != "" {
		s += ", last error " + c.LastError
	}
	return s
}

// restartNamesrv kills the name server and starts it again: it comes
// back with no route until the brokers register again.
func (c *Cluster) restartNamesrv() error {
	ns := c.procs.NS
	if _, err := c.procs.Kill(ns); err != nil {
		return err
	}
	c.rc.CloseConn(ns.Addr())
	return c.procs.Start(ns)
}

// removeConfKey deletes every line setting key from the conf file at path
// (a raftJoin=true a replace-member window left).
func removeConfKey(path, key string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.SplitAfter(string(b), "\n")
	kept := lines[:0]
	for _, l := range lines {
		k, _, ok := strings.Cut(l, "=")
		if ok && strings.TrimSpace(k) == key {
			continue
		}
		kept = append(kept, l)
	}
	if len(kept) == len(lines) {
		return nil
	}
	return os.WriteFile(path, []byte(strings.Join(kept, "")), 0o644)
}
