package client

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// memberGroup is a fake broker group G of two members registered with a
// real name server: a (brokerId 0, routed as master) and b (brokerId 1).
func memberGroup(t *testing.T) (a, b *fakeBroker, admin *Admin) {
	t.Helper()
	ns := startNameServer(t)
	log := &requestLog{}
	a, b = startFakeBroker(t, "G", log), startFakeBroker(t, "G", log)
	a.register(t, ns, 0, 1, nil)
	b.register(t, ns, 1, 1, nil)
	admin, err := NewAdmin(NameServers(ns.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	return a, b, admin
}

// memberAnswer is a membership answer with code and a RaftMemberChange body.
func memberAnswer(code int16, remark string, ch wire.RaftMemberChange, ext map[string]string) *remoting.RemotingCommand {
	r := remoting.NewResponse(code, remark)
	r.Body, _ = json.Marshal(ch)
	r.ExtFields = ext
	return r
}

// A leader that lost its lease during a membership change answers "not
// leader" without naming one, and is often elected again at once while
// the name servers still route it as master. The change must go back to
// it (its followers name it) rather than wait for the routes to name
// another member.
func TestMemberChangeFollowsLeaderReElected(t *testing.T) {
	a, b, admin := memberGroup(t)
	var asked atomic.Int32
	a.setAnswer(func(_ *fakeBroker, _ *remoting.Conn, req *remoting.RemotingCommand) *remoting.RemotingCommand {
		if req.Code != remoting.RequestAddRaftMember {
			return remoting.NewResponse(remoting.ResponseRequestCodeNotSupported, "")
		}
		if asked.Add(1) == 1 {
			return remoting.NewResponse(remoting.ResponseServiceNotAvailable, wire.NotLeaderRemark(""))
		}
		return memberAnswer(remoting.ResponseSuccess, "", wire.RaftMemberChange{ID: "n3", Suffrage: "Voter"}, nil)
	})
	b.setAnswer(func(_ *fakeBroker, _ *remoting.Conn, _ *remoting.RemotingCommand) *remoting.RemotingCommand {
		r := remoting.NewResponse(remoting.ResponseServiceNotAvailable, wire.NotLeaderRemark(a.addr))
		r.ExtFields = map[string]string{wire.ExtLeaderAddr: a.addr}
		return r
	})
	// Well under leaderFollowWait: a call that waits for the routes to
	// name a master other than a runs out of it.
	ctx, cancel := context.WithTimeout(context.Background(), defaultLeaderFollowWait/2)
	defer cancel()
	res, err := admin.AddRaftMember(ctx, "G", "n3", "127.0.0.1:1", RaftMemberOptions{})
	if err != nil {
		t.Fatalf("add after the leader was re-elected: %v", err)
	}
	if res.Suffrage != "Voter" || asked.Load() != 2 {
		t.Fatalf("add answered %+v after %d requests to the leader, want Voter after 2", res, asked.Load())
	}
}

// A refusal that is not about leadership (a catch-up that timed out) is
// the call's answer at once, with the change the broker reported.
func TestMemberChangeRefusalKeepsBrokerReport(t *testing.T) {
	a, b, admin := memberGroup(t)
	var asked atomic.Int32
	a.setAnswer(func(_ *fakeBroker, _ *remoting.Conn, _ *remoting.RemotingCommand) *remoting.RemotingCommand {
		asked.Add(1)
		return memberAnswer(remoting.ResponseSystemError, "addMember n3: catch-up timed out",
			wire.RaftMemberChange{ID: "n3", Suffrage: "Nonvoter", Lag: 42}, nil)
	})
	b.setAnswer(answerCode(remoting.ResponseSystemError, nil))
	res, err := admin.AddRaftMember(context.Background(), "G", "n3", "127.0.0.1:1", RaftMemberOptions{})
	var be *BrokerError
	if !errors.As(err, &be) || be.Code != remoting.ResponseSystemError || be.Addr != a.addr {
		t.Fatalf("add refused by the leader: err %v, want its SYSTEM_ERROR", err)
	}
	if res == nil || res.Lag != 42 || asked.Load() != 1 {
		t.Fatalf("add refused: report %+v after %d requests, want lag 42 after 1", res, asked.Load())
	}
}
