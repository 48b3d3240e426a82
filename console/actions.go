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
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"go.uber.org/zap"
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
// configured), 401 or, while the remote address is locked out after
// refused credentials (login.go), 429 itself when they fail.
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
	key := loginKey(r.RemoteAddr)
	if d := c.logins.wait(key); d > 0 {
		secs := int((d + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("too many refused sign-ins from this address: try again in %d s", secs))
		return false
	}
	akOK := subtle.ConstantTimeCompare([]byte(ak), []byte(c.opts.AccessKey))
	skOK := subtle.ConstantTimeCompare([]byte(sk), []byte(c.opts.SecretKey))
	if akOK&skOK != 1 {
		c.logins.failed(key)
		// Anyone reaching the port can send wrong keys as fast as it
		// likes: one warning a second, with the count held back.
		if ok, held := c.authWarn.Allow(); ok {
			c.log.Warn("console request refused: wrong credentials", zap.String("remote", r.RemoteAddr),
				zap.Int64("suppressedSinceLast", held))
		}
		writeError(w, http.StatusUnauthorized, "accessKey or secretKey is not the console's admin account")
		return false
	}
	c.logins.succeeded(key)
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
type TransferResult = client.LeadershipTransfer

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
	adm, err := c.client()
	if err != nil {
		return nil, http.StatusServiceUnavailable, err
	}
	res, err := adm.TransferLeadership(ctx, &g.RaftGroup, target, c.opts.TransferWait)
	switch {
	case err == nil:
		return res, 0, nil
	case errors.Is(err, client.ErrNotMember):
		return nil, http.StatusNotFound, err
	case errors.Is(err, client.ErrNoBroker):
		return nil, http.StatusConflict, err
	}
	return nil, brokerStatus(err), err
}

// BalanceMove is one group's line of a balance plan.
type BalanceMove = client.LeaderMove

// BalanceResult is POST /api/raft/balance's answer.
type BalanceResult struct {
	Moves []BalanceMove `json:"moves"`
	// Error is set, with a 403 or 502 status, when a move failed; the
	// moves say which.
	Error string `json:"error,omitempty"`
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
	rgs := make([]*client.RaftGroup, len(gs))
	for i, g := range gs {
		rgs[i] = &g.RaftGroup
	}
	res := BalanceResult{Moves: client.PlanLeaderBalance(rgs)}
	adm, err := c.client()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	if err := adm.BalanceLeaders(ctx, rgs, res.Moves, req.DryRun, c.opts.TransferWait); err != nil {
		// As raftmq admin balanceLeaders fails: a caller checking the
		// status must not take refused moves for a balanced cluster.
		c.log.Warn("console: balance leaders: some moves failed", zap.Error(err))
		res.Error = "some moves failed: " + err.Error()
		writeJSON(w, brokerStatus(err), res)
		return
	}
	c.log.Info("console: balance leaders run")
	writeJSON(w, http.StatusOK, res)
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
