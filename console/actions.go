package console

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// maxActionBody bounds an action's JSON body.
const maxActionBody = 4 << 10

// ActionsInfo says whether the Raft actions can be used.
type ActionsInfo struct {
	Enabled bool `json:"enabled"`
	// Reason says why not, or how to authenticate.
	Reason string `json:"reason"`
}

// noCredentialReason is shown while no console account is configured.
const noCredentialReason = "actions are disabled: this name server has no console admin account " +
	"(set consoleAccessKey and consoleSecretKey to an admin account of the brokers' plain_acl.yml and restart it)"

func (c *Console) actionsInfo() ActionsInfo {
	if c.opts.AccessKey == "" {
		return ActionsInfo{Reason: noCredentialReason}
	}
	return ActionsInfo{Enabled: true, Reason: "actions need the console's admin account: HTTP basic auth with its accessKey and secretKey"}
}

// AuthView is GET /api/auth's answer.
type AuthView struct {
	ActionsInfo
	// Authenticated is true when the request carried the admin account.
	Authenticated bool `json:"authenticated"`
}

func (c *Console) serveAuth(w http.ResponseWriter, r *http.Request) {
	v := AuthView{ActionsInfo: c.actionsInfo()}
	if _, _, ok := r.BasicAuth(); ok && c.opts.AccessKey != "" {
		if !c.authenticated(w, r) {
			return
		}
		v.Authenticated = true
	}
	writeJSON(w, http.StatusOK, v)
}

// authenticated checks the request's basic credentials against the
// console account in constant time, answering 403 (no account
// configured) or 401 itself when they fail.
func (c *Console) authenticated(w http.ResponseWriter, r *http.Request) bool {
	if c.opts.AccessKey == "" {
		writeError(w, http.StatusForbidden, noCredentialReason)
		return false
	}
	ak, sk, ok := r.BasicAuth()
	if !ok {
		// No WWW-Authenticate challenge: the page asks for the keys
		// itself, and a browser's own prompt would pop up on every poll.
		writeError(w, http.StatusUnauthorized, "authenticate as the console's admin account: HTTP basic auth with its accessKey and secretKey")
		return false
	}
	akOK := subtle.ConstantTimeCompare([]byte(ak), []byte(c.opts.AccessKey))
	skOK := subtle.ConstantTimeCompare([]byte(sk), []byte(c.opts.SecretKey))
	if akOK&skOK != 1 {
		c.log.Warn("console request refused: wrong credentials")
		writeError(w, http.StatusUnauthorized, "accessKey or secretKey is not the console's admin account")
		return false
	}
	return true
}

// actionAllowed gates every POST: the admin account, a JSON body (a
// cross-site form cannot send one without a CORS preflight, which is
// never granted) and, when the browser says, a same-origin page.
func (c *Console) actionAllowed(w http.ResponseWriter, r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			writeError(w, http.StatusForbidden, "cross-origin action refused (Origin "+o+")")
			return false
		}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "actions take a JSON body: send Content-Type: application/json")
		return false
	}
	return c.authenticated(w, r)
}

// TransferRequest is POST /api/raft/transfer's body.
type TransferRequest struct {
	BrokerName string `json:"brokerName"`
	// TargetID is the Raft id to hand leadership to; "" lets the leader
	// pick the most caught-up follower.
	TargetID string `json:"targetId"`
}

// BalanceRequest is POST /api/raft/balance's body.
type BalanceRequest struct {
	// Cluster limits the plan to one brokerClusterName ("" = all).
	Cluster string `json:"cluster"`
	// DryRun plans without moving anything.
	DryRun bool `json:"dryRun"`
}

// decodeAction reads an action body strictly: one JSON object of known
// fields, at most maxActionBody bytes.
func decodeAction(body io.Reader, v any) error {
	b, err := io.ReadAll(io.LimitReader(body, maxActionBody+1))
	if err != nil {
		return fmt.Errorf("body: %w", err)
	}
	if len(b) > maxActionBody {
		return fmt.Errorf("body: over %d bytes", maxActionBody)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("body: one JSON object expected, found more")
	}
	return nil
}

// TransferResult is POST /api/raft/transfer's answer.
type TransferResult struct {
	BrokerName string `json:"brokerName"`
	broker.LeadershipTransferResult
	// Registered is true once the name server routes the new leader as
	// brokerId 0.
	Registered bool `json:"registered"`
}

func (c *Console) serveTransfer(w http.ResponseWriter, r *http.Request) {
	if !c.actionAllowed(w, r) {
		return
	}
	var req TransferRequest
	if err := decodeAction(r.Body, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.BrokerName == "" {
		writeError(w, http.StatusBadRequest, "brokerName is required")
		return
	}
	c.actionMu.Lock()
	defer c.actionMu.Unlock()
	defer c.cluster.invalidate()
	ctx, cancel := context.WithTimeout(r.Context(), 3*c.opts.TransferWait)
	defer cancel()
	gs := c.groupStatuses(ctx, c.ns.Routes().ClusterInfo(), req.BrokerName)
	if len(gs) == 0 {
		writeError(w, http.StatusNotFound, "the name server knows no broker group "+req.BrokerName)
		return
	}
	g := gs[0]
	if req.TargetID != "" && req.TargetID == g.LeaderID {
		writeError(w, http.StatusConflict, req.TargetID+" is already the leader of "+g.BrokerName)
		return
	}
	res, status, err := c.transfer(ctx, g, req.TargetID)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	c.log.Info("console: leadership transferred")
	writeJSON(w, http.StatusOK, res)
}

// transfer asks g's leader to hand leadership to target, then waits for
// the name server to route the new leader as brokerId 0. The status is
// the HTTP status of a failure.
func (c *Console) transfer(ctx context.Context, g *GroupView, target string) (*TransferResult, int, error) {
	if target != "" && !slices.ContainsFunc(g.Members, func(m MemberView) bool { return m.ID == target }) {
		var ids []string
		for _, m := range g.Members {
			if m.ID != "" {
				ids = append(ids, m.ID)
			}
		}
		return nil, http.StatusNotFound, fmt.Errorf("%q is not a member of broker group %s (members: %v)", target, g.BrokerName, ids)
	}
	if g.LeaderAddr == "" {
		return nil, http.StatusConflict, fmt.Errorf("broker group %s has no leader right now (election in progress?)", g.BrokerName)
	}
	adm, err := c.client()
	if err != nil {
		return nil, http.StatusServiceUnavailable, err
	}
	resp, err := adm.BrokerRequest(ctx, g.LeaderAddr, remoting.RequestLeadershipTransfer, &wire.LeadershipTransferRequestHeader{TargetID: target}, nil)
	if err != nil {
		return nil, brokerStatus(err), fmt.Errorf("leadership transfer of %s: %w", g.BrokerName, err)
	}
	res := &TransferResult{BrokerName: g.BrokerName}
	if err := json.Unmarshal(resp.Body, &res.LeadershipTransferResult); err != nil {
		return nil, http.StatusBadGateway, fmt.Errorf("unreadable LEADERSHIP_TRANSFER answer from %s: %w", g.LeaderAddr, err)
	}
	deadline := time.Now().Add(c.opts.TransferWait)
	for res.NewLeaderAddr != "" && time.Now().Before(deadline) {
		if c.ns.Routes().ClusterInfo().BrokerAddrTable[g.BrokerName].BrokerAddrs[wire.MasterID] == res.NewLeaderAddr {
			res.Registered = true
			break
		}
		select {
		case <-ctx.Done():
			return res, 0, nil
		case <-time.After(20 * time.Millisecond):
		}
	}
	return res, 0, nil
}

// BalanceMove is one group's line of a balance plan.
type BalanceMove struct {
	BrokerName string `json:"brokerName"`
	From       string `json:"from"`
	To         string `json:"to"`
	Reason     string `json:"reason"`
	// Result is planned (dry run), skipped, "moved in …" or "failed: …".
	Result string `json:"result"`
}

// BalanceResult is POST /api/raft/balance's answer.
type BalanceResult struct {
	Moves []BalanceMove `json:"moves"`
}

func (c *Console) serveBalance(w http.ResponseWriter, r *http.Request) {
	if !c.actionAllowed(w, r) {
		return
	}
	var req BalanceRequest
	if err := decodeAction(r.Body, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	c.actionMu.Lock()
	defer c.actionMu.Unlock()
	defer c.cluster.invalidate()
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	var gs []*GroupView
	for _, g := range c.groupStatuses(ctx, c.ns.Routes().ClusterInfo(), "") {
		if req.Cluster == "" || g.Cluster == req.Cluster {
			gs = append(gs, g)
		}
	}
	if len(gs) == 0 {
		writeError(w, http.StatusNotFound, "no broker group in cluster "+req.Cluster)
		return
	}
	byName := map[string]*GroupView{}
	for _, g := range gs {
		byName[g.BrokerName] = g
	}
	res := BalanceResult{Moves: planBalance(gs)}
	for i := range res.Moves {
		m := &res.Moves[i]
		if m.Result != "" || req.DryRun {
			if m.Result == "" {
				m.Result = "planned"
			}
			continue
		}
		tr, _, err := c.transfer(ctx, byName[m.BrokerName], m.To)
		if err != nil {
			m.Result = "failed: " + err.Error()
			continue
		}
		m.Result = fmt.Sprintf("moved in %s", time.Duration(tr.TookMillis)*time.Millisecond)
	}
	c.log.Info("console: balance leaders run")
	writeJSON(w, http.StatusOK, res)
}

// planBalance picks, per group, where leadership should be: the
// preferredLeaderId when one is configured and answered, otherwise a
// member on the host with the fewest leaders when the leader's host has
// at least two more than that one (as raftmq admin balanceLeaders).
func planBalance(gs []*GroupView) []BalanceMove {
	hostOf := func(addr string) string {
		if h, _, err := net.SplitHostPort(addr); err == nil {
			return h
		}
		return addr
	}
	load := map[string]int{}
	for _, g := range gs {
		for _, st := range g.statuses {
			load[hostOf(st.RemotingAddr)] += 0
		}
		if g.LeaderAddr != "" {
			load[hostOf(g.LeaderAddr)]++
		}
	}
	moves := []BalanceMove{}
	for _, g := range gs {
		if g.LeaderID == "" {
			moves = append(moves, BalanceMove{BrokerName: g.BrokerName, Reason: "no leader (election in progress)", Result: "skipped"})
			continue
		}
		if p := g.PreferredLeaderID; p != "" {
			if p == g.LeaderID {
				continue
			}
			st, ok := g.statuses[p]
			if !ok {
				moves = append(moves, BalanceMove{BrokerName: g.BrokerName, From: g.LeaderID, To: p, Reason: "preferred leader did not answer", Result: "skipped"})
				continue
			}
			load[hostOf(g.LeaderAddr)]--
			load[hostOf(st.RemotingAddr)]++
			moves = append(moves, BalanceMove{BrokerName: g.BrokerName, From: g.LeaderID, To: p, Reason: "preferredLeaderId"})
			continue
		}
		cur := hostOf(g.LeaderAddr)
		best, bestLoad := "", load[cur]-1
		for _, id := range slices.Sorted(maps.Keys(g.statuses)) {
			st := g.statuses[id]
			if id == g.LeaderID || st.State == "Shutdown" {
				continue
			}
			if l := load[hostOf(st.RemotingAddr)]; l < bestLoad {
				best, bestLoad = id, l
			}
		}
		if best != "" {
			load[cur]--
			load[hostOf(g.statuses[best].RemotingAddr)]++
			moves = append(moves, BalanceMove{BrokerName: g.BrokerName, From: g.LeaderID, To: best,
				Reason: fmt.Sprintf("host %s leads %d groups", cur, load[cur]+1)})
		}
	}
	return moves
}

// brokerStatus maps a broker's refusal to an HTTP status: NO_PERMISSION
// (the brokers' ACL refused the console account) is 403, anything else
// from the broker 502.
func brokerStatus(err error) int {
	var be *client.BrokerError
	if errors.As(err, &be) && be.Code == remoting.ResponseNoPermission {
		return http.StatusForbidden
	}
	var re *remoting.RemoteError
	if errors.As(err, &re) && re.Code == remoting.ResponseNoPermission {
		return http.StatusForbidden
	}
	return http.StatusBadGateway
}

func writeBrokerError(w http.ResponseWriter, err error) {
	writeError(w, brokerStatus(err), err.Error())
}

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
