package jepsen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
)

func init() {
	nemesisTable["replace-member"] = func() Nemesis { return &replaceMemberNemesis{} }
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
// env's group that the operator's wipe-and-re-add may remove: with a member
// down, paused or still a learner from an earlier window, removing another
// would leave one voter (the quorum guard refuses it), so that is
// ErrUnsupported.
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
		if i >= 0 && i != l && m.Suffrage == "Voter" && c.Nodes[i].State() == NodeRunning {
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
