package console

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/ha"
	"github.com/raftmq/raftmq/wire"
)

// ClusterView is GET /api/cluster: every cluster's broker groups with
// each Raft member's state as the member reports it (RAFT_STATUS), the
// name server's routes and its gossip pool.
type ClusterView struct {
	// Time is when the view was collected (ms since the epoch).
	Time int64 `json:"time"`
	// Namesrv is the name server's remoting address.
	Namesrv  string        `json:"namesrv"`
	Clusters []ClusterInfo `json:"clusters"`
	// Gossip is the name server's gossip pool (Enabled false without
	// gossipEnable).
	Gossip GossipView `json:"gossip"`
	// Actions says whether the Raft actions are available.
	Actions ActionsInfo `json:"actions"`
}

// ClusterInfo is one brokerClusterName and its groups.
type ClusterInfo struct {
	Name   string      `json:"name"`
	Groups []GroupView `json:"groups"`
}

// GroupView is one broker group (Raft group) as the SDK admin merges it
// (client.RaftGroup), each member with its gossip state.
type GroupView struct {
	client.RaftGroup
	// Members shadows RaftGroup.Members in JSON: the same rows plus gossip.
	Members []MemberView `json:"members"`
}

// MemberView is one Raft member of a group.
type MemberView struct {
	client.RaftGroupMember
	// Gossip is the member's state in the name server's gossip pool:
	// alive, left, dead, or "" when gossip is off or it never joined.
	Gossip string `json:"gossip"`
}

// GossipView is the name server's gossip pool.
type GossipView struct {
	Enabled bool           `json:"enabled"`
	Members []GossipMember `json:"members"`
}

// GossipMember is one node of the pool.
type GossipMember struct {
	Name       string `json:"name"`
	Addr       string `json:"addr"`
	Kind       string `json:"kind"`
	State      string `json:"state"`
	Cluster    string `json:"cluster,omitempty"`
	BrokerName string `json:"brokerName,omitempty"`
	RaftID     string `json:"raftId,omitempty"`
	Role       string `json:"role,omitempty"`
	Term       uint64 `json:"term,omitempty"`
}

func (c *Console) serveCluster(w http.ResponseWriter, r *http.Request) {
	v := c.cluster.get(c.opts.CacheFor, func() *ClusterView { return c.collectCluster(r.Context()) })
	writeJSON(w, http.StatusOK, v)
}

// collectCluster asks every registered member for RAFT_STATUS at once
// and merges the answers with the Raft configuration, so a member that is
// down still shows (from the others' configuration) with its error.
func (c *Console) collectCluster(ctx context.Context) *ClusterView {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.ReadTimeout)
	defer cancel()
	v := &ClusterView{Time: time.Now().UnixMilli(), Actions: c.actionsInfo(), Clusters: []ClusterInfo{}}
	if a := c.ns.Addr(); a != nil {
		v.Namesrv = a.String()
	}
	v.Gossip = c.gossipView()
	ci := c.ns.Routes().ClusterInfo()
	groups := c.groupStatuses(ctx, ci, "")
	c.mergeDownMembers(groups)
	for _, name := range slices.Sorted(maps.Keys(ci.ClusterAddrTable)) {
		cl := ClusterInfo{Name: name, Groups: []GroupView{}}
		for _, g := range groups {
			if g.Cluster == name {
				cl.Groups = append(cl.Groups, *g)
			}
		}
		v.Clusters = append(v.Clusters, cl)
	}
	gossipByAddr := map[string]string{}
	for _, m := range v.Gossip.Members {
		if m.Kind == string(ha.KindBroker) {
			gossipByAddr[m.Cluster+"/"+m.BrokerName+"/"+m.RaftID] = m.State
		}
	}
	for i := range v.Clusters {
		for j := range v.Clusters[i].Groups {
			g := &v.Clusters[i].Groups[j]
			for k := range g.Members {
				g.Members[k].Gossip = gossipByAddr[g.Cluster+"/"+g.BrokerName+"/"+g.Members[k].ID]
			}
		}
	}
	return v
}

func (c *Console) gossipView() GossipView {
	g := c.ns.Gossip()
	if g == nil {
		return GossipView{Members: []GossipMember{}}
	}
	v := GossipView{Enabled: true, Members: []GossipMember{}}
	for _, m := range g.Members() {
		v.Members = append(v.Members, GossipMember{Name: m.Name, Addr: m.Addr, Kind: string(m.Meta.Kind), State: m.State.String(),
			Cluster: m.Meta.Cluster, BrokerName: m.Meta.BrokerName, RaftID: m.Meta.RaftID, Role: string(m.Meta.Role), Term: m.Meta.Term})
	}
	slices.SortFunc(v.Members, func(a, b GossipMember) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return v
}

// groupStatuses builds the groups of ci (only brokerName when set),
// asking every registered member at once (client.Admin.RaftGroups).
func (c *Console) groupStatuses(ctx context.Context, ci *wire.ClusterInfo, only string) []*GroupView {
	var rgs []*client.RaftGroup
	adm, err := c.client()
	if err == nil {
		rgs, err = adm.RaftGroups(ctx, ci, "", only)
	}
	if err != nil {
		// No admin client: every registered member is a row saying why.
		rgs = nil
		for _, name := range slices.Sorted(maps.Keys(ci.BrokerAddrTable)) {
			bd := ci.BrokerAddrTable[name]
			if only != "" && name != only {
				continue
			}
			g := &client.RaftGroup{Cluster: bd.Cluster, BrokerName: name, RoutedLeader: bd.BrokerAddrs[wire.MasterID]}
			for _, id := range slices.Sorted(maps.Keys(bd.BrokerAddrs)) {
				g.Members = append(g.Members, client.RaftGroupMember{RemotingAddr: bd.BrokerAddrs[id], BrokerID: id,
					State: "Unreachable", Error: err.Error(), LastContactMillis: -1, Lag: -1})
			}
			rgs = append(rgs, g)
		}
	}
	out := make([]*GroupView, 0, len(rgs))
	for _, g := range rgs {
		gv := &GroupView{RaftGroup: *g, Members: make([]MemberView, 0, len(g.Members))}
		for _, m := range g.Members {
			gv.Members = append(gv.Members, MemberView{RaftGroupMember: m})
		}
		out = append(out, gv)
	}
	return out
}

// mergeDownMembers folds the row of a registered address that did not
// answer RAFT_STATUS into the row the Raft configuration gives the member
// at that address: a member that is down but still registered (a hung
// host, whose connection lingers until its registration expires) showed
// twice, as its Raft id (Unknown) and as its address (Unreachable). The
// address's id is the one its gossip metadata names, else the one that
// last answered from it (remembered while the address stays registered).
func (c *Console) mergeDownMembers(groups []*GroupView) {
	byGossip := map[string]string{}
	if g := c.ns.Gossip(); g != nil {
		for _, m := range g.Members() {
			if m.Meta.Kind == ha.KindBroker && m.Meta.RemotingAddr != "" && m.Meta.RaftID != "" {
				byGossip[m.Meta.Cluster+"/"+m.Meta.BrokerName+"/"+m.Meta.RemotingAddr] = m.Meta.RaftID
			}
		}
	}
	c.memberMu.Lock()
	defer c.memberMu.Unlock()
	next := map[string]string{}
	for _, g := range groups {
		prefix := g.Cluster + "/" + g.BrokerName + "/"
		for _, m := range g.Members {
			if _, answered := g.Statuses[m.ID]; answered && m.RemotingAddr != "" {
				next[prefix+m.RemotingAddr] = m.ID
			}
		}
		merged := make([]bool, len(g.Members))
		for j, m := range g.Members {
			if m.ID != "" || m.RemotingAddr == "" {
				continue
			}
			key := prefix + m.RemotingAddr
			id, ok := byGossip[key]
			if !ok {
				id, ok = c.memberIDs[key]
			}
			if !ok {
				continue
			}
			next[key] = id
			i := slices.IndexFunc(g.Members, func(o MemberView) bool { return o.ID == id && o.RemotingAddr == "" })
			if i < 0 {
				continue
			}
			cm := &g.Members[i]
			cm.RemotingAddr, cm.BrokerID, cm.State, cm.Error = m.RemotingAddr, m.BrokerID, m.State, m.Error
			merged[j] = true
		}
		rows := g.Members[:0]
		for j, m := range g.Members {
			if !merged[j] {
				rows = append(rows, m)
			}
		}
		g.Members = rows
	}
	c.memberIDs = next
}
