package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/console"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// fakeMember is a broker that answers RAFT_STATUS as st and refuses
// LEADERSHIP_TRANSFER with NO_PERMISSION, as a broker whose ACL does not
// grant the console's account the transfer.
func fakeMember(t *testing.T, st wire.RaftStatus) string {
	t.Helper()
	srv := remoting.NewServer(remoting.ServerConfig{ListenAddr: "127.0.0.1:0"}, nil)
	srv.Register(remoting.RequestRaftStatus, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		resp := remoting.NewResponse(remoting.ResponseSuccess, "")
		resp.Body, _ = json.Marshal(st)
		return resp, nil
	}, 1, 16)
	srv.Register(remoting.RequestLeadershipTransfer, func(context.Context, *remoting.Conn, *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		return remoting.NewResponse(remoting.ResponseNoPermission, "LEADERSHIP_TRANSFER needs an admin account"), nil
	}, 1, 16)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv.Addr().String()
}

// A balance whose move the broker refused answered 200, as if the cluster
// were balanced, with the failure only in the move's result text (raftmq
// admin balanceLeaders fails the same run). It answers the broker's
// refusal as an error status now, with every move's result.
func TestBalanceFailureIsAnError(t *testing.T) {
	cfg := namesrv.DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort, cfg.MetricsPort = "127.0.0.1", testutil.FreePort(t), -1
	cfg.KVConfigPath = filepath.Join(t.TempDir(), "kv.json")
	ns, err := namesrv.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	defer ns.Close()

	members := []wire.RaftMember{{ID: "n0", RaftAddr: "127.0.0.1:1", Suffrage: "Voter"}, {ID: "n1", RaftAddr: "127.0.0.1:2", Suffrage: "Voter"}}
	n0 := fakeMember(t, wire.RaftStatus{SelfID: "n0", State: "Leader", Term: 3, LeaderID: "n0", PreferredLeaderID: "n1", Members: members})
	n1 := fakeMember(t, wire.RaftStatus{SelfID: "n1", State: "Follower", Term: 3, LeaderID: "n0", PreferredLeaderID: "n1", Members: members})
	for id, addr := range []string{n0, n1} {
		if _, err := ns.Routes().RegisterBroker(namesrv.RegisterBrokerArgs{Cluster: "C", BrokerAddr: addr, BrokerName: "broker-a", BrokerID: int64(id),
			Topics: wire.TopicConfigSerializeWrapper{TopicConfigTable: map[string]wire.TopicConfig{}}}); err != nil {
			t.Fatal(err)
		}
	}

	con, err := console.New(ns, console.Options{AccessKey: adminAK, SecretKey: adminSK, TransferWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()
	srv := httptest.NewServer(con.Handler())
	defer srv.Close()
	e := &env{url: srv.URL}
	code, b := e.call(t, http.MethodPost, "/api/raft/balance", adminAK+":"+adminSK, "application/json", `{}`)
	var res console.BalanceResult
	mustJSON(t, b, &res)
	if len(res.Moves) != 1 || res.Moves[0].To != "n1" || !strings.HasPrefix(res.Moves[0].Result, "failed") {
		t.Fatalf("moves %+v, want n0 → n1 failed", res.Moves)
	}
	if code != http.StatusForbidden || !strings.Contains(res.Error, "NO_PERMISSION") && !strings.Contains(res.Error, "admin account") {
		t.Errorf("balance with a refused move: %d, error %q; want 403 with the broker's refusal", code, res.Error)
	}
}
