package console

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/broker"
)

// FuzzDecodeAction feeds arbitrary bodies to the action decoder: it must
// never panic, and what it accepts is one object of known fields within
// the size bound.
func FuzzDecodeAction(f *testing.F) {
	for _, s := range []string{`{"brokerName":"broker-a"}`, `{"brokerName":"b","targetId":"n1"}`, `{"cluster":"c","dryRun":true}`,
		`{}`, `{"x":1}`, `[]`, `{"brokerName":1}`, `{"brokerName":"a"}{"brokerName":"b"}`, `{"brokerName":"` + strings.Repeat("a", 5000) + `"}`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var tr TransferRequest
		if err := decodeAction(strings.NewReader(body), &tr); err == nil && len(body) > maxActionBody {
			t.Fatalf("accepted a %d-byte body", len(body))
		}
		var br BalanceRequest
		_ = decodeAction(strings.NewReader(body), &br)
	})
}

// TestDecodeAction pins what the decoder refuses.
func TestDecodeAction(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"brokerName":"broker-a","targetId":"n1"}`:                   true,
		`{"brokerName":"broker-a"} `:                                  true,
		`{"brokerName":"broker-a","extra":1}`:                         false,
		`{"brokerName":"a"}{"brokerName":"b"}`:                        false,
		`not json`:                                                    false,
		`{"brokerName":"` + strings.Repeat("a", maxActionBody) + `"}`: false,
	} {
		var tr TransferRequest
		if err := decodeAction(strings.NewReader(body), &tr); (err == nil) != ok {
			t.Errorf("%.60s: err=%v, want ok=%v", body, err, ok)
		}
	}
}

// TestPlanBalance: a preferred leader wins; otherwise leadership leaves a
// host that leads two more groups than another.
func TestPlanBalance(t *testing.T) {
	g := func(name, leader, preferred string, members map[string]string) *GroupView {
		gv := &GroupView{BrokerName: name, LeaderID: leader, PreferredLeaderID: preferred, statuses: map[string]*broker.RaftStatus{}}
		for id, addr := range members {
			st := "Follower"
			if id == leader {
				st, gv.LeaderAddr = "Leader", addr
			}
			gv.statuses[id] = &broker.RaftStatus{SelfID: id, State: st, RemotingAddr: addr}
		}
		return gv
	}
	hosts := map[string]string{"n0": "10.0.0.1:10911", "n1": "10.0.0.2:10911", "n2": "10.0.0.3:10911"}
	moves := planBalance([]*GroupView{
		g("a", "n0", "n1", hosts),
		g("b", "n0", "", hosts),
		g("c", "n0", "", hosts),
		g("d", "", "", hosts),
	})
	want := []string{"a:n0->n1 preferredLeaderId", "b:n0->n2", "d:->skipped"}
	var got []string
	for _, m := range moves {
		s := m.BrokerName + ":" + m.From + "->" + m.To
		if m.Reason == "preferredLeaderId" {
			s += " preferredLeaderId"
		}
		if m.Result == "skipped" {
			s = m.BrokerName + ":->skipped"
		}
		got = append(got, s)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("plan %v, want %v (%+v)", got, want, moves)
	}
}
