package console

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/ha"
	"github.com/raftmq/raftmq/remoting"
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

// GroupView is one broker group (Raft group).
type GroupView struct {
	Cluster    string `json:"cluster"`
	BrokerName string `json:"brokerName"`
	// LeaderID and LeaderAddr are the leader of the highest term any
	// member reported ("" while there is none).
	LeaderID   string `json:"leaderId"`
	LeaderAddr string `json:"leaderAddr"`
	Term       uint64 `json:"term"`
	// RoutedLeader is the address the name server routes as brokerId 0.
	RoutedLeader      string       `json:"routedLeader"`
	PreferredLeaderID string       `json:"preferredLeaderId,omitempty"`
	Members           []MemberView `json:"members"`

	statuses map[string]*broker.RaftStatus // by Raft id, members that answered
}

// MemberView is one Raft member of a group.
type MemberView struct {
	ID           string `json:"id"`
	RaftAddr     string `json:"raftAddr,omitempty"`
	RemotingAddr string `json:"remotingAddr,omitempty"`
	// BrokerID is the id the member registered with (0 = routed leader),
	// -1 when it is not registered with this name server.
	BrokerID int64 `json:"brokerId"`
	// Suffrage is Voter, Nonvoter or Staging (from the Raft configuration).
	Suffrage string `json:"suffrage,omitempty"`
	// State is Leader, Follower, Candidate, Shutdown, or Unreachable /
	// Unknown when the member did not answer.
	State        string `json:"state"`
	Term         uint64 `json:"term"`
	LastLogIndex uint64 `json:"lastLogIndex"`
	CommitIndex  uint64 `json:"commitIndex"`
	AppliedIndex uint64 `json:"appliedIndex"`
	// Lag is the leader's last log index minus this member's, -1 when
	// unknown (no leader, or no answer).
	Lag int64 `json:"lag"`
	// LastContactMillis is how long ago the member heard from a leader (0
	// on the leader, -1 never or unknown).
	LastContactMillis int64 `json:"lastContactMillis"`
	// Gossip is the member's state in the name server's gossip pool:
	// alive, left, dead, or "" when gossip is off or it never joined.
	Gossip          string `json:"gossip"`
	AcksBeforeFsync bool   `json:"acksBeforeFsync"`
	LogStopped      string `json:"logStopped,omitempty"`
	ApplyStopped    string `json:"applyStopped,omitempty"`
	// Error says why the member could not be asked.
	Error string `json:"error,omitempty"`
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
// asking every registered member at once.
func (c *Console) groupStatuses(ctx context.Context, ci *wire.ClusterInfo, only string) []*GroupView {
	var out []*GroupView
	type ask struct {
		g    *GroupView
		id   int64
		addr string
		st   *broker.RaftStatus
		err  error
	}
	var asks []*ask
	for _, name := range slices.Sorted(maps.Keys(ci.BrokerAddrTable)) {
		if only != "" && name != only {
			continue
		}
		bd := ci.BrokerAddrTable[name]
		g := &GroupView{Cluster: bd.Cluster, BrokerName: name, RoutedLeader: bd.BrokerAddrs[wire.MasterID],
			statuses: map[string]*broker.RaftStatus{}, Members: []MemberView{}}
		out = append(out, g)
		for _, id := range slices.Sorted(maps.Keys(bd.BrokerAddrs)) {
			asks = append(asks, &ask{g: g, id: id, addr: bd.BrokerAddrs[id]})
		}
	}
	adm, aerr := c.client()
	var wg sync.WaitGroup
	for _, a := range asks {
		if aerr != nil {
			a.err = aerr
			continue
		}
		wg.Go(func() {
			resp, err := adm.BrokerRequest(ctx, a.addr, remoting.RequestRaftStatus, nil, nil)
			if err != nil {
				a.err = err
				return
			}
			var st broker.RaftStatus
			if err := json.Unmarshal(resp.Body, &st); err != nil {
				a.err = fmt.Errorf("unreadable RAFT_STATUS answer: %w", err)
				return
			}
			st.RemotingAddr = a.addr
			a.st = &st
		})
	}
	wg.Wait()
	failed := map[*GroupView][]MemberView{}
	registered := map[string]int64{}
	for _, a := range asks {
		registered[a.addr] = a.id
		if a.err != nil {
			failed[a.g] = append(failed[a.g], MemberView{RemotingAddr: a.addr, BrokerID: a.id, State: "Unreachable",
				Error: a.err.Error(), LastContactMillis: -1, Lag: -1})
			continue
		}
		a.g.statuses[a.st.SelfID] = a.st
	}
	for _, g := range out {
		g.merge(failed[g], registered)
	}
	return out
}

// merge builds the member rows from the answers; the leader's view of
// the configuration wins.
func (g *GroupView) merge(failed []MemberView, registered map[string]int64) {
	var leader *broker.RaftStatus
	conf := map[string]broker.RaftMember{}
	for _, id := range slices.Sorted(maps.Keys(g.statuses)) {
		st := g.statuses[id]
		g.Term = max(g.Term, st.Term)
		if st.State == "Leader" && (leader == nil || st.Term > leader.Term) {
			leader = st
		}
		if g.PreferredLeaderID == "" {
			g.PreferredLeaderID = st.PreferredLeaderID
		}
		for _, m := range st.Members {
			conf[m.ID] = m
		}
	}
	if leader != nil {
		g.LeaderID, g.LeaderAddr = leader.SelfID, leader.RemotingAddr
		for _, m := range leader.Members {
			conf[m.ID] = m
		}
	}
	for _, id := range slices.Sorted(maps.Keys(conf)) {
		cm := conf[id]
		mv := MemberView{ID: id, RaftAddr: cm.RaftAddr, Suffrage: cm.Suffrage, State: "Unknown", BrokerID: -1,
			LastContactMillis: -1, Lag: -1, Error: "no answer: down, or not registered with the name server"}
		if st, ok := g.statuses[id]; ok {
			mv = MemberView{ID: id, RaftAddr: cm.RaftAddr, RemotingAddr: st.RemotingAddr, BrokerID: registered[st.RemotingAddr],
				Suffrage: cm.Suffrage, State: st.State, Term: st.Term, LastLogIndex: st.LastLogIndex, CommitIndex: st.CommitIndex,
				AppliedIndex: st.AppliedIndex, Lag: -1, LastContactMillis: st.LastContactMillis,
				AcksBeforeFsync: st.AcksBeforeFsync, LogStopped: st.LogStopped, ApplyStopped: st.ApplyStopped}
			if leader != nil {
				mv.Lag = max(int64(leader.LastLogIndex)-int64(st.LastLogIndex), 0)
			}
		}
		g.Members = append(g.Members, mv)
	}
	g.Members = append(g.Members, failed...)
}
