package devcluster

import (
	"fmt"
	"path/filepath"

	"github.com/raftmq/raftmq/internal/freeport"
)

// AddMember starts a new member of group g that joins the running group
// (raftJoin=true): it holds no state and waits until the group's leader
// adds it (`raftmq admin addMember`, Admin.AddRaftMember). Its id is
// n<1000·g + k> for the group's k-th member (n3 for the fourth member of
// broker-a), its data directory Dir/<brokerName>-<id>, and its
// dLegerPeers the group's first member's plus itself, as an operator
// would write them. It returns the member's index in Members(g).
func (c *Cluster) AddMember(g int) (int, error) {
	k := len(c.members[g])
	cfg := c.members[g][0].Config
	id := fmt.Sprintf("n%d", 1000*g+k)
	listen, err := freeport.Port()
	if err != nil {
		return 0, err
	}
	raftPort := listen + 4
	if c.net == nil {
		if raftPort, err = freeport.Port(); err != nil {
			return 0, err
		}
	}
	cfg.ListenPort = listen
	cfg.Gossip.BindPort = 0 // Derive: listenPort+2
	cfg.Store.StorePathRootDir = filepath.Join(c.opts.Dir, GroupName(g)+"-"+id)
	cfg.Raft.DLegerPeers += fmt.Sprintf(";%s-127.0.0.1:%d", id, raftPort)
	cfg.Raft.DLegerSelfID = id
	cfg.RaftJoin = true
	if c.opts.Configure != nil {
		c.opts.Configure(g, k, &cfg)
	}
	if err := cfg.Derive(); err != nil {
		return 0, err
	}
	if err := cfg.Validate(); err != nil {
		return 0, err
	}
	c.members[g] = append(c.members[g], &Member{Config: cfg, log: c.opts.Logger.Named(id)})
	if err := c.Restart(g, k); err != nil {
		return 0, err
	}
	return k, nil
}

// RaftAddr is the member's Raft transport address (its dLegerPeers entry).
func (m *Member) RaftAddr() string {
	addr, _ := m.Config.Raft.SelfAddr()
	return addr
}
