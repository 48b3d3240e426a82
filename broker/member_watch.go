package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// A member removed while it was down never received the configuration
// entry that removed it: it restarts believing it is a voter, and the
// group ignores it (the leader sends it nothing, voters reject its
// votes). The removal watch lets it find out: a member that has heard
// from no leader for a while asks the leader the name servers route
// (RAFT_STATUS); when that leader's configuration lacks this member, it
// stops its Raft member with ErrRemovedMember, stops registering, records
// the removal for its next start, and says so in its log and its
// raftStatus answer. A member that was running when it was removed goes
// the same way once the leader stops talking to it.

// removalCheckInterval is how often the watch looks, and how long a
// member must have heard from no leader before it asks.
const removalCheckInterval = time.Second

// removedState holds why a running member stopped as removed.
type removedState struct {
	err atomic.Pointer[error]
}

// Removed is the reason this member stopped as removed from its group
// (nil while it is a member).
func (g *Group) Removed() error {
	if p := g.removed.err.Load(); p != nil {
		return *p
	}
	return nil
}

// stopAsRemoved records err and shuts the Raft member down: it neither
// campaigns nor votes any more. The node keeps running (reads of what it
// holds, the monitor) until its operator stops it.
func (g *Group) stopAsRemoved(err error) {
	if !g.removed.err.CompareAndSwap(nil, &err) {
		return
	}
	g.log.Error("this member was removed from its raft group; raft stopped, it will not vote or register; "+
		"wipe its data and add it back with raftJoin=true and `raftmq admin addMember`, or retire it", zap.Error(err))
	g.stopRaft()
	// Its log still lists it as a voter: the marker makes the next start
	// refuse too.
	if werr := writeMarkerFile(g.diskFS, g.removedMarkerPath(), err.Error()); werr != nil {
		g.log.Warn("could not record the removal; the next start will find out again", zap.Error(werr))
	}
}

// stopRaft shuts down the Raft member of a node that keeps running
// (removed, damaged) and closes its transport: nobody reads it any more,
// so left open it would take its peers' RPCs and hold each for their whole
// I/O timeout (a leader's own shutdown waits on them); closed, they fail
// at once.
func (g *Group) stopRaft() {
	g.raftDownOnce.Do(func() {
		_ = g.raft.Shutdown().Error()
		if err := closeTransport(g.trans); err != nil {
			g.log.Warn("closing the stopped member's Raft transport", zap.Error(err))
		}
		close(g.raftDown)
	})
}

// raftStopped reports whether stopRaft has run.
func (g *Group) raftStopped() bool {
	select {
	case <-g.raftDown:
		return true
	default:
		return false
	}
}

// removedMarkerPath is the file that records a removal this member was
// told about (storePathRootDir/raft/REMOVED).
func (g *Group) removedMarkerPath() string {
	return filepath.Join(g.cfg.Store.StorePathRootDir, "raft", "REMOVED")
}

// writeMarkerFile records reason in a marker file (REMOVED, DAMAGED) under
// a temporary name renamed into place: a marker is either absent or holds
// its reason, never a name left empty by a failed write and a crash.
func writeMarkerFile(fsys storage.FS, path, reason string) error {
	return storage.WriteFileAtomic(fsys, path, []byte(reason+"\n"))
}

// removeMarkerTemps removes what a crash in the middle of a marker write
// left (writeMarkerFile's temporary files). It runs at start, before
// anything can write a marker.
func (g *Group) removeMarkerTemps() error {
	for _, p := range []string{g.removedMarkerPath(), g.damagedMarkerPath(), g.indexRebuildMarkerPath()} {
		if err := storage.RemoveTempFiles(g.diskFS, p); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
	}
	return nil
}

// maxMarkerRead bounds what readMarkerFile reads: a marker holds one
// error text.
const maxMarkerRead = 64 << 10

// readMarkerFile returns what a marker file (REMOVED, DAMAGED,
// INDEX_REBUILD) records, "" when there is none. A marker that is there
// but empty or unreadable still counts: its presence is the record. When
// its presence cannot be told (stat failing other than with "no such
// file") the error says so: each marker stops something unsafe, so the
// member must not start on a guess either way.
func readMarkerFile(fsys storage.FS, path string) (string, error) {
	fi, err := fsys.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("broker: cannot tell whether %s exists (%w): the member does not start until it can; "+
			"fix the disk or the directory's permissions and start it again", path, err)
	}
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return "recorded (marker unreadable: " + err.Error() + ")", nil
	}
	defer f.Close()
	b := make([]byte, min(fi.Size(), maxMarkerRead))
	n, err := f.ReadAt(b, 0)
	if why := strings.TrimSpace(string(b[:n])); why != "" {
		return why, nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return "recorded (marker unreadable: " + err.Error() + ")", nil
	}
	return "recorded (the marker file is empty)", nil
}

// watchRemoval is the Controller's removal watch (a tracked goroutine).
func (c *Controller) watchRemoval() {
	g, ok := c.rep.(*Group)
	if !ok || len(c.cfg.NameServers()) == 0 {
		return
	}
	t := time.NewTicker(removalCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
		}
		if err := c.checkRemoved(g); err != nil {
			g.stopAsRemoved(err)
			c.reg.trigger()
			return
		}
	}
}

// checkRemoved returns ErrRemovedMember when the routed leader's
// configuration lacks this member, which thinks it is a member and has
// heard from no leader for removalCheckInterval.
func (c *Controller) checkRemoved(g *Group) error {
	if g.raft.State() == raft.Leader || g.raftStopped() {
		return nil
	}
	if lc := g.raft.LastContact(); !lc.IsZero() && time.Since(lc) < removalCheckInterval {
		return nil
	}
	self := g.SelfID()
	conf, err := g.configuration()
	if err != nil {
		return nil
	}
	if len(conf.Servers) == 0 {
		return nil // joining (raftJoin) and not added yet
	}
	// A member that applied its own removal is quiet already; the leader's
	// word makes it stop for good (its own latest configuration may be
	// an entry that never commits).
	deadline := time.Now().Add(removalCheckInterval)
	addr := c.routedMaster(deadline)
	if addr == "" || addr == c.addr {
		return nil
	}
	ctx, cancel := context.WithDeadline(c.ctx, deadline)
	defer cancel()
	st, err := c.peers.status(ctx, addr)
	if err != nil || st.State != raft.Leader.String() || len(st.Members) == 0 {
		return nil
	}
	for _, m := range st.Members {
		if m.ID == self {
			return nil
		}
	}
	return fmt.Errorf("%w: %s's leader %s (term %d, at %s) has configuration %v without %s", ErrRemovedMember,
		c.cfg.BrokerName, st.SelfID, st.Term, addr, memberIDsOf(st.Members), self)
}

func memberIDsOf(ms []RaftMember) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// unregisterAll drops this node's registration under brokerId id from
// every name server (UNREGISTER_BROKER): a member that left the
// configuration must leave the route now, not when the name servers
// expire it.
func (r *registerService) unregisterAll(id int64) {
	for _, ns := range r.c.cfg.NameServers() {
		h := &wire.UnregisterBrokerRequestHeader{Cluster: r.c.cfg.BrokerClusterName, BrokerAddr: r.c.addr,
			BrokerName: r.c.cfg.BrokerName, BrokerID: id}
		ctx, cancel := context.WithTimeout(r.c.ctx, r.c.cfg.RegisterBrokerTimeoutMills)
		resp, err := r.c.regClient.InvokeSync(ctx, ns, remoting.NewRequest(remoting.RequestUnregisterBroker, h, nil))
		cancel()
		if err == nil && resp.Code != remoting.ResponseSuccess {
			err = remoting.ResponseError(ns, resp)
		}
		if err != nil {
			r.c.log.Warn("unregister from name server failed", zap.String("namesrv", ns), zap.Int64("brokerId", id), zap.Error(err))
			continue
		}
		r.c.log.Info("unregistered: no longer in the group's Raft configuration", zap.String("namesrv", ns), zap.Int64("brokerId", id))
	}
}
