package broker

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/storage"
)

// UPDATE_BROKER_CONFIG for a whole Raft group. The broker config is not
// replicated state (each member has its own broker.conf), so the member
// that gets the request forwards it to the others, marked so they do not
// forward again, and each saves the change in runtimeConfigFile under its
// store directory, which New applies over broker.conf at every start. A
// member that is down when the change is made misses it: the answer then
// names it, and the command must be repeated once it is back. A down
// member is no longer registered with the name servers, so the members
// to reach are the group's Raft configuration, not the route: each
// forwarded answer names the member that applied it.

// runtimeConfigFile holds the runtime config changes, relative to
// storePathRootDir.
const runtimeConfigFile = "config/runtimeConfig.properties"

// extMemberOnly marks a forwarded UPDATE_BROKER_CONFIG: apply, do not
// forward. extMemberID, in the answer to one, is the Raft id of the
// member that applied it.
const (
	extMemberOnly = "raftmqMemberOnly"
	extMemberID   = "raftmqMemberId"
)

// forwardConfigTimeout bounds the forwarding to each member.
const forwardConfigTimeout = 5 * time.Second

// runtimeConfigPath is under the directory the store was opened in (the
// config's storePathRootDir for a node; a test's own directory for parts
// built by hand); "" for a controller without a store (unit tests),
// which then keeps changes in memory only.
func (c *Controller) runtimeConfigPath() string {
	if c.storeDir() == "" {
		return ""
	}
	return filepath.Join(c.storeDir(), runtimeConfigFile)
}

// storeDir is the store's root directory, "" without a store.
func (c *Controller) storeDir() string {
	if c.st == nil {
		return ""
	}
	return c.st.RootDir()
}

// loadRuntimeConfig applies the saved runtime changes at start; a bad
// file is logged and ignored (broker.conf alone then holds).
func (c *Controller) loadRuntimeConfig() {
	if c.runtimeConfigPath() == "" {
		return
	}
	// A crash in the middle of saveRuntimeConfig leaves its temporary file;
	// nothing saves before the Controller starts serving.
	if err := storage.RemoveTempFiles(storage.OSFS(), c.runtimeConfigPath()); err != nil {
		c.log.Warn("runtime config: leftover temporary files not removed", zap.Error(err))
	}
	b, err := os.ReadFile(c.runtimeConfigPath())
	if err != nil {
		if !os.IsNotExist(err) {
			c.log.Warn("runtime config changes not loaded", zap.String("file", c.runtimeConfigPath()), zap.Error(err))
		}
		return
	}
	saved, err := config.ParseProperties(b)
	if err != nil {
		c.log.Warn("runtime config changes not loaded", zap.String("file", c.runtimeConfigPath()), zap.Error(err))
		return
	}
	kv := map[string]string{}
	for k, v := range saved {
		if isRuntimeKey(k) {
			kv[k] = v
		}
	}
	if len(kv) == 0 {
		return
	}
	if r := c.applyRuntimeConfig(kv, false); r != nil {
		c.log.Warn("runtime config changes not applied", zap.String("file", c.runtimeConfigPath()), zap.String("why", r.Remark))
		return
	}
	c.log.Info("runtime config changes applied over broker.conf", zap.String("file", c.runtimeConfigPath()), zap.Any("changes", kv))
}

// saveRuntimeConfig merges kv into the runtime config file (write, sync,
// rename).
func (c *Controller) saveRuntimeConfig(kv map[string]string) error {
	path := c.runtimeConfigPath()
	if path == "" {
		return nil
	}
	all := map[string]string{}
	if b, err := os.ReadFile(path); err == nil {
		if saved, err := config.ParseProperties(b); err == nil {
			all = saved
		}
	}
	maps.Copy(all, kv)
	var buf bytes.Buffer
	buf.WriteString("# Changes made by UPDATE_BROKER_CONFIG (mqadmin updateBrokerConfig); applied over broker.conf at start.\n")
	if err := config.WriteProperties(&buf, all); err != nil {
		return err
	}
	return storage.WriteFileAtomic(storage.OSFS(), path, buf.Bytes())
}

// forwardBrokerConfig sends an applied change to the group's other
// registered members unless req is itself a forwarded one, and fails
// naming every member of the Raft configuration that did not apply it.
func (c *Controller) forwardBrokerConfig(req *remoting.RemotingCommand) *remoting.RemotingCommand {
	ra, _ := c.rep.(RaftAdmin)
	if req.ExtFields[extMemberOnly] == "true" {
		r := success()
		if ra != nil {
			r.ExtFields = map[string]string{extMemberID: ra.SelfID()}
		}
		return r
	}
	var failed []string
	applied := map[string]bool{}
	anonymous := 0
	for _, addr := range c.groupMemberAddrs() {
		if addr == c.addr {
			continue
		}
		fwd := remoting.NewRequest(remoting.RequestUpdateBrokerConfig, nil, req.Body)
		fwd.ExtFields = map[string]string{extMemberOnly: "true"}
		ctx, cancel := context.WithTimeout(c.ctx, forwardConfigTimeout)
		resp, err := c.nsClient.InvokeSync(ctx, addr, fwd)
		cancel()
		if err == nil {
			err = remoting.ResponseError(addr, resp)
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", addr, err))
			continue
		}
		if id := resp.ExtFields[extMemberID]; id != "" {
			applied[id] = true
		} else {
			anonymous++
		}
	}
	self := ""
	if ra != nil {
		self = ra.SelfID()
	}
	for _, id := range unapplied(c.raftMemberIDs(ra), self, applied, anonymous) {
		failed = append(failed, fmt.Sprintf("%s (no answer from it: down, or not registered with the name servers)", id))
	}
	if len(failed) > 0 {
		return response(remoting.ResponseSystemError, "update broker config: applied on %s but not on group member(s) %s; "+
			"repeat the command once they are up", c.addr, strings.Join(failed, ", "))
	}
	return success()
}

// unapplied lists the members (other than self) that did not answer a
// forwarded change with their id. A member of an older build applies the
// change without naming itself (a rolling upgrade), so each such answer
// stands for one of the ids not named: only more missing ids than those
// answers is a failure.
func unapplied(ids []string, self string, applied map[string]bool, anonymous int) []string {
	var missing []string
	for _, id := range ids {
		if id != self && !applied[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) <= anonymous {
		return nil
	}
	return missing
}

// groupMemberAddrs is the first answering name server's member list of
// this broker group.
func (c *Controller) groupMemberAddrs() []string {
	return slices.Collect(maps.Values(c.peers.route(c.ctx, forwardConfigTimeout)))
}

// raftMemberIDs lists the Raft ids of the group's live configuration
// (learners too: they become voters with the config they have); nil
// without a Raft replica or when the configuration cannot be read.
func (c *Controller) raftMemberIDs(ra RaftAdmin) []string {
	if ra == nil || ra.Raft() == nil {
		return nil
	}
	f := ra.Raft().GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var ids []string
	for _, s := range f.Configuration().Servers {
		ids = append(ids, string(s.ID))
	}
	return ids
}
