package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// units makes n units of a queue from queue offset from, the unit at
// offset o naming CommitLog offset 1000*o.
func units(from, n int64) []AuditUnit {
	var out []AuditUnit
	for o := from; o < from+n; o++ {
		out = append(out, AuditUnit{Phy: 1000 * o, Size: 200, Tags: 7})
	}
	return out
}

func answer(node string, lo0, hi0, cursor, window int64) queueAnswer {
	lo := max(cursor, lo0)
	hi := max(lo, min(hi0, cursor+window))
	return queueAnswer{Node: node, Min: lo0, Max: hi0, Units: units(lo, hi-lo)}
}

func TestCompareRoundEqual(t *testing.T) {
	r := compareRound(0, 1000, []queueAnswer{answer("n0", 0, 10, 0, 1000), answer("n1", 0, 10, 0, 1000), answer("n2", 0, 10, 0, 1000)}, 3, false, nil)
	if r.next != 10 || r.compared != 10 || r.mismatched != 0 || r.first != -1 {
		t.Fatalf("equal members: %+v, want next 10, 10 compared, no mismatch", r)
	}
	// The next round asks from the cursor: nothing new, nothing counted.
	r = compareRound(10, 1000, []queueAnswer{answer("n0", 0, 10, 10, 1000), answer("n1", 0, 10, 10, 1000), answer("n2", 0, 10, 10, 1000)}, 3, false, nil)
	if r.next != 10 || r.compared != 0 || r.first != -1 {
		t.Fatalf("no new units: %+v", r)
	}
}

func TestCompareRoundShiftedByOne(t *testing.T) {
	short := answer("n2", 0, 9, 0, 1000)
	// n2 lacks the unit at offset 4: its later units sit one offset lower.
	short.Units = append(units(0, 4), units(5, 5)...)
	r := compareRound(0, 1000, []queueAnswer{answer("n0", 0, 10, 0, 1000), answer("n1", 0, 10, 0, 1000), short}, 3, false, nil)
	if r.first != 4 {
		t.Fatalf("first mismatch at %d, want 4 (%+v)", r.first, r)
	}
	if r.next != 9 || r.compared != 10-1 || r.mismatched != 5 {
		t.Fatalf("shifted member: %+v, want next 9, 9 compared, 5 mismatched", r)
	}
	// A different tags code or size is a mismatch too.
	tags := answer("n1", 0, 3, 0, 1000)
	tags.Units[1].Tags++
	if r := compareRound(0, 1000, []queueAnswer{answer("n0", 0, 3, 0, 1000), tags}, 2, false, nil); r.first != 1 || r.mismatched != 1 {
		t.Fatalf("tags code differs: %+v", r)
	}
}

func TestCompareRoundMemberLackingARange(t *testing.T) {
	// n2 was rebuilt (its queue starts at 5) and is still catching up (it
	// ends at 8): neither is a divergence, and the cursor stops where n2
	// ends so its next units are compared when it has them.
	r := compareRound(0, 1000, []queueAnswer{answer("n0", 0, 10, 0, 1000), answer("n1", 0, 10, 0, 1000), answer("n2", 5, 8, 0, 1000)}, 3, false, nil)
	if r.first != -1 || r.next != 8 || r.compared != 8 {
		t.Fatalf("member lacking the head and the tail: %+v, want no mismatch, next 8, 8 compared", r)
	}
	// n0's retention removed its head: offsets 0..2 are compared between
	// the two others.
	r = compareRound(0, 1000, []queueAnswer{answer("n0", 3, 10, 0, 1000), answer("n1", 0, 10, 0, 1000), answer("n2", 0, 10, 0, 1000)}, 3, false, nil)
	if r.first != -1 || r.next != 10 || r.compared != 10 {
		t.Fatalf("member past retention: %+v", r)
	}
	// A member holding nothing from the cursor on (it has not applied the
	// new entries yet) holds the cursor back...
	behind := []queueAnswer{answer("n0", 0, 10, 4, 1000), answer("n1", 0, 10, 4, 1000), answer("n2", 0, 4, 4, 1000)}
	r = compareRound(4, 1000, behind, 3, false, nil)
	if r.first != -1 || r.next != 4 || r.compared != 0 {
		t.Fatalf("member behind the cursor: %+v, want the cursor kept at 4", r)
	}
	// ... unless it is stalled (its apply stopped).
	r = compareRound(4, 1000, behind, 3, false, map[string]bool{"n2": true})
	if r.first != -1 || r.next != 10 || r.compared != 6 {
		t.Fatalf("stalled member behind the cursor: %+v", r)
	}
	// The cursor never passes an offset only one member holds (the
	// leader applies first).
	r = compareRound(0, 1000, []queueAnswer{answer("n0", 0, 10, 0, 1000), answer("n1", 0, 0, 0, 1000), answer("n2", 0, 0, 0, 1000)}, 3, true, map[string]bool{"n1": true, "n2": true})
	if r.next != 0 || r.compared != 0 {
		t.Fatalf("one member ahead: %+v, want the cursor kept at 0", r)
	}
	// n2 lost the ConsumeQueue file of its units [12, 20): it answers
	// those before the gap, then none from the gap on, though its queue
	// goes on to 35. The gap never fills, so the cursor moves past it
	// with the others, and n2 is compared again from there.
	gapped := answer("n2", 0, 35, 0, 1000)
	gapped.Units = gapped.Units[:12]
	r = compareRound(0, 1000, []queueAnswer{answer("n0", 0, 35, 0, 1000), answer("n1", 0, 35, 0, 1000), gapped}, 3, false, nil)
	if r.first != -1 || r.next != 35 || r.compared != 35 {
		t.Fatalf("member with a lost queue file: %+v, want no mismatch, next 35, 35 compared", r)
	}
	inGap := answer("n2", 0, 35, 14, 1000)
	inGap.Units = nil
	r = compareRound(14, 1000, []queueAnswer{answer("n0", 0, 35, 14, 1000), answer("n1", 0, 35, 14, 1000), inGap}, 3, false, nil)
	if r.next != 35 || r.compared != 35-14 {
		t.Fatalf("cursor in a member's lost queue file: %+v, want next 35, 21 compared", r)
	}
	// Two members, one with the gap: the other's offsets past it are
	// held by one member only, and the cursor still does not wait for
	// the gap to fill.
	r = compareRound(14, 1000, []queueAnswer{answer("n0", 0, 35, 14, 1000), inGap}, 2, false, nil)
	if r.next != 35 || r.compared != 0 {
		t.Fatalf("two members, one in a lost queue file: %+v, want next 35, none compared", r)
	}
	// A blank filler stands for no unit: the others are compared there.
	blank := answer("n2", 0, 10, 0, 1000)
	blank.Units[3] = blankAuditUnit
	r = compareRound(0, 1000, []queueAnswer{answer("n0", 0, 10, 0, 1000), answer("n1", 0, 10, 0, 1000), blank}, 3, false, nil)
	if r.first != -1 || r.next != 10 || r.compared != 10 {
		t.Fatalf("member with a blank unit: %+v", r)
	}
	// The window bounds a round.
	r = compareRound(0, 4, []queueAnswer{answer("n0", 0, 10, 0, 4), answer("n1", 0, 10, 0, 4)}, 2, false, nil)
	if r.next != 4 || r.compared != 4 {
		t.Fatalf("window of 4: %+v", r)
	}
}

func TestCompareRoundFailingMember(t *testing.T) {
	down := queueAnswer{Node: "n2", Err: context.DeadlineExceeded}
	bad := answer("n1", 0, 10, 0, 1000)
	bad.Units[6].Phy++
	// The two that answered are compared (a mismatch is found at once),
	// but the cursor waits for the third.
	r := compareRound(0, 1000, []queueAnswer{answer("n0", 0, 10, 0, 1000), bad, down}, 3, false, nil)
	if r.first != 6 || r.next != 0 || r.compared != 0 {
		t.Fatalf("one member failing: %+v, want the mismatch at 6 and the cursor kept at 0", r)
	}
	// Forced (the member has been missing too long), it moves on.
	r = compareRound(0, 1000, []queueAnswer{answer("n0", 0, 10, 0, 1000), bad, down}, 3, true, nil)
	if r.first != 6 || r.next != 10 || r.compared != 10 || r.mismatched != 1 {
		t.Fatalf("forced round: %+v", r)
	}
	// One answer compares nothing.
	r = compareRound(0, 1000, []queueAnswer{answer("n0", 0, 10, 0, 1000), down, {Node: "n1", Err: &refusalError{1, "no queue"}}}, 3, true, nil)
	if r.first != -1 || r.next != 0 || r.compared != 0 {
		t.Fatalf("one answer: %+v", r)
	}
}

func TestCommitLogVerdict(t *testing.T) {
	same := "T q0@4 value \"v4\" intact=true bodyCRC 0000abcd stored 1"
	cases := []struct {
		stored []AuditStored
		want   string
	}{
		{[]AuditStored{{"n0", 4000, same}, {"n1", 4000, strings.Replace(same, "@4", "@5", 1)}}, "only the ConsumeQueues differ"},
		{[]AuditStored{{"n0", 4000, same}, {"n1", 4000, "refused (code 1): no message at commit log offset 4000: queue T/0 has no unit there, so ..."}}, "only the ConsumeQueues differ"},
		{[]AuditStored{{"n0", 4000, same}, {"n1", 4000, strings.Replace(same, "v4", "v9", 1)}}, "CommitLogs differ at 4000"},
		{[]AuditStored{{"n0", 4000, same}, {"n1", 4000, "refused (code 1): no message at commit log offset 4000: beyond the applied log"}}, "CommitLogs differ at 4000"},
		{[]AuditStored{{"n0", 4000, same}, {"n1", 4000, "unreachable: timeout"}}, "some did not"},
	}
	for i, c := range cases {
		if got := commitLogVerdict(c.stored); !strings.Contains(got, c.want) {
			t.Errorf("case %d: %q, want it to say %q", i, got, c.want)
		}
	}
}

// fakeMember answers QUERY_CONSUME_QUEUE from its units of queue T/0 and
// VIEW_MESSAGE_BY_ID from its log (CommitLog offset → value); an offset
// its queue has no unit for is refused as a broker refuses it.
type fakeMember struct {
	srv     *remoting.Server
	dataDir string
	mu      sync.Mutex
	min     int64
	units   []AuditUnit // from min
	log     map[int64]string
	// retire is how many head units each query below min retires after
	// it is answered (retention running between the audit's asks).
	retire int
}

func startFakeMember(t *testing.T, dataDir string) *fakeMember {
	t.Helper()
	f := &fakeMember{srv: remoting.NewServer(remoting.ServerConfig{ListenAddr: "127.0.0.1:0"}, nil), dataDir: dataDir, log: map[int64]string{}}
	f.srv.Register(remoting.RequestQueryConsumeQueue, f.query, 1, 16)
	f.srv.Register(remoting.RequestViewMessageByID, f.view, 1, 16)
	if err := f.srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = f.srv.Shutdown(ctx)
	})
	return f
}

func (f *fakeMember) set(from int64, us []AuditUnit) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.min, f.units = from, us
	for _, u := range us {
		if _, ok := f.log[u.Phy]; !ok {
			f.log[u.Phy] = fmt.Sprintf("v%d", u.Phy/1000)
		}
	}
}

func (f *fakeMember) query(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.QueryConsumeQueueRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if h.Topic != "T" || h.QueueID != 0 {
		return remoting.NewResponse(remoting.ResponseSystemError, "not exist"), nil
	}
	maxOff := f.min + int64(len(f.units))
	body := wire.QueryConsumeQueueResponseBody{MinQueueIndex: f.min, MaxQueueIndex: maxOff, QueueData: []wire.ConsumeQueueData{}}
	r := remoting.NewResponse(remoting.ResponseSuccess, "")
	// As the broker: nothing outside [min, max), with RocketMQ's remark.
	if h.Index < f.min || h.Index >= maxOff {
		r.Remark = fmt.Sprintf("Index %d of 0@T is not exist!", h.Index)
		if h.Index < f.min {
			n := min(f.retire, len(f.units))
			f.min, f.units = f.min+int64(n), f.units[n:]
		}
	}
	for i := h.Index; r.Remark == "" && i < h.Index+int64(h.Count) && i < maxOff; i++ {
		u := f.units[i-f.min]
		body.QueueData = append(body.QueueData, wire.ConsumeQueueData{PhysicOffset: u.Phy, PhysicSize: u.Size, TagsCode: u.Tags})
	}
	r.Body, _ = json.Marshal(body)
	return r, nil
}

func (f *fakeMember) view(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
	var h wire.ViewMessageRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.log[h.Offset]
	if !ok {
		return remoting.NewResponse(remoting.ResponseSystemError, "no message at commit log offset: beyond the log"), nil
	}
	qo := int64(-1)
	for i, u := range f.units {
		if u.Phy == h.Offset {
			qo = f.min + int64(i)
		}
	}
	if qo < 0 {
		return remoting.NewResponse(remoting.ResponseSystemError, "no message at commit log offset: queue T/0 has no unit there, so the bytes are not a stored message of that queue"), nil
	}
	b, err := wire.AppendMessage(nil, &wire.Message{Topic: "T", QueueID: 0, QueueOffset: qo, Body: encodeBody(v), PhysicalOffset: h.Offset,
		BornHost: netip.MustParseAddrPort("127.0.0.1:1"), StoreHost: netip.MustParseAddrPort("127.0.0.1:2")})
	if err != nil {
		return nil, err
	}
	r := remoting.NewResponse(remoting.ResponseSuccess, "")
	r.Body = b
	return r, nil
}

// TestAuditorOverSockets runs audit rounds against three members served
// over real sockets: equal queues are compared once each; a member that
// stops answering is skipped; a member that lost one unit from its
// ConsumeQueue is caught on the round it appears, with each member's
// units, what each log stores there, and a copy of each member's files.
func TestAuditorOverSockets(t *testing.T) {
	dir := t.TempDir()
	var fs []*fakeMember
	var members []auditMember
	for i := range 3 {
		dd := filepath.Join(dir, "data", "n"+string(rune('0'+i)))
		qdir := filepath.Join(dd, "consumequeue", "T", "0")
		if err := os.MkdirAll(qdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(qdir, "00000000000000000000"), []byte("units of n"+string(rune('0'+i))), 0o644); err != nil {
			t.Fatal(err)
		}
		f := startFakeMember(t, dd)
		f.set(0, units(0, 20))
		fs = append(fs, f)
		members = append(members, auditMember{id: "n" + string(rune('0'+i)), addr: f.srv.Addr().String(), dataDir: dd})
	}
	// A fourth address accepts connections and never answers (a paused
	// member).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var hmu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hmu.Lock()
			held = append(held, c)
			hmu.Unlock()
		}
	}()
	defer func() {
		hmu.Lock()
		for _, c := range held {
			_ = c.Close()
		}
		hmu.Unlock()
	}()

	rc := remoting.NewClient(remoting.DefaultClientConfig(), nil)
	defer rc.Close()
	rec := &recorder{h: History{Start: time.Now(), Leaders: []LeaderObs{{Node: "n0", Group: GroupNameOf(0), Term: 3, State: "Leader", Serving: true}}}}
	running := members
	a := &auditor{rc: rc, rec: rec, dir: filepath.Join(dir, "report", "audit"), timeout: 300 * time.Millisecond,
		queues:  []auditQueue{{0, "T", 0}, {0, "Missing", 0}},
		members: func(int) ([]auditMember, int) { return running, 3 },
		state:   map[auditQueue]*auditState{}}
	ctx := context.Background()

	a.round(ctx)
	if h := a.history(); h.Compared != 20 || len(h.Mismatches) != 0 {
		t.Fatalf("equal members: %+v, want 20 offsets compared and no mismatch", h)
	}

	// n2 is paused: the two others are still compared; the cursor waits.
	for _, f := range fs {
		f.set(0, units(0, 30))
	}
	running = []auditMember{members[0], members[1], {id: "n2", addr: ln.Addr().String()}}
	a.round(ctx)
	if h := a.history(); h.Compared != 20 || len(h.Mismatches) != 0 || h.Rounds != 2 {
		t.Fatalf("paused member: %+v, want no new offset counted, no mismatch", h)
	}
	running = members
	a.round(ctx)
	if h := a.history(); h.Compared != 30 || len(h.Mismatches) != 0 {
		t.Fatalf("member back: %+v, want 30 offsets compared", h)
	}

	// n1's queue loses the unit at offset 33 (its log still holds the
	// entry): from there its units are one offset early.
	full := units(0, 40)
	for _, f := range fs {
		f.set(0, full)
	}
	fs[1].set(0, append(units(0, 33), units(34, 6)...))
	a.round(ctx)
	h := a.history()
	if len(h.Mismatches) != 1 {
		t.Fatalf("one member shifted: %d mismatches, want 1 (%+v)", len(h.Mismatches), h)
	}
	m := h.Mismatches[0]
	if m.Topic != "T" || m.Queue != 0 || m.Offset != 33 || len(m.Members) != 3 {
		t.Fatalf("mismatch %+v, want T q0@33 with three members' units", m)
	}
	if !strings.Contains(m.CommitLog, "only the ConsumeQueues differ") {
		t.Errorf("commit log verdict %q, want the logs to agree (n1's log holds the entry it does not index)", m.CommitLog)
	}
	var n1At33 string
	for _, s := range m.Stored {
		if s.Node == "n1" && s.Phy == 33000 {
			n1At33 = s.What
		}
	}
	if !strings.Contains(n1At33, "has no unit there") {
		t.Errorf("n1 at 33000: %q, want its refusal naming the missing unit (stored: %+v)", n1At33, m.Stored)
	}
	if !strings.Contains(m.Leaders, "n0 Leader term 3") {
		t.Errorf("leaders %q, want the monitor's last state", m.Leaders)
	}
	for _, id := range []string{"n0", "n1", "n2"} {
		b, err := os.ReadFile(filepath.Join(dir, "report", "audit", "01-"+GroupNameOf(0)+"-T-q0", id, "consumequeue", "T", "0", "00000000000000000000"))
		if err != nil || string(b) != "units of "+id {
			t.Errorf("%s's kept queue file: %q, %v", id, b, err)
		}
	}
	c, ok := checkAudit(History{Audit: h})
	if !ok || c.OK || !c.Required || len(c.Examples) != 1 || !strings.Contains(c.Examples[0], "T q0@33") {
		t.Fatalf("verdict %+v, want a failing required check naming T q0@33", c)
	}
	// The same queue's later mismatches are counted, not recorded again.
	a.round(ctx)
	if h := a.history(); len(h.Mismatches) != 1 {
		t.Fatalf("%d mismatches recorded after another round, want 1", len(h.Mismatches))
	}
	if c, _ := checkAudit(History{Audit: &AuditHistory{Compared: 5, Rounds: 1}}); !c.OK || c.Value != "5 offsets compared in 1 rounds" {
		t.Fatalf("clean audit verdict %+v", c)
	}
}

// TestAuditorMemberMinPastCursor: a member whose queue's head was retired
// past the cursor answers no units there (as the broker answers an index
// below its minimum). It is asked again from its minimum and compared
// from there, its units at their own offsets: a unit that differs past
// the minimum is caught at its offset. The offsets it skipped are
// compared among the others only, and not at all when no other pair
// holds them. A minimum that moves past every ask is a refusal, not an
// answer holding nothing.
func TestAuditorMemberMinPastCursor(t *testing.T) {
	dir := t.TempDir()
	var fs []*fakeMember
	var members []auditMember
	for i := range 3 {
		dd := filepath.Join(dir, "data", fmt.Sprint("n", i))
		f := startFakeMember(t, dd)
		f.set(0, units(0, 20))
		fs = append(fs, f)
		members = append(members, auditMember{id: fmt.Sprint("n", i), addr: f.srv.Addr().String(), dataDir: dd})
	}
	rc := remoting.NewClient(remoting.DefaultClientConfig(), nil)
	defer rc.Close()
	rec := &recorder{h: History{Start: time.Now()}}
	newAuditor := func(running []auditMember) *auditor {
		return &auditor{rc: rc, rec: rec, dir: filepath.Join(dir, "report"), timeout: 2 * time.Second,
			queues:  []auditQueue{{0, "T", 0}},
			members: func(int) ([]auditMember, int) { return running, len(running) },
			state:   map[auditQueue]*auditState{}}
	}
	a := newAuditor(members)
	ctx := context.Background()
	a.round(ctx)
	if h := a.history(); h.Compared != 20 || len(h.Mismatches) != 0 {
		t.Fatalf("equal members: %+v, want 20 offsets compared", h)
	}

	// The cursor is at 20; n2's queue now starts at 25, and its unit at
	// 30 names another CommitLog offset.
	fs[0].set(0, units(0, 40))
	fs[1].set(0, units(0, 40))
	n2 := units(25, 15)
	n2[30-25].Phy++
	fs[2].set(25, n2)
	a.round(ctx)
	h := a.history()
	if h.Compared != 40 || len(h.Mismatches) != 1 {
		t.Fatalf("member's minimum past the cursor: %+v, want 40 offsets compared and one mismatch", h)
	}
	m := h.Mismatches[0]
	if m.Offset != 30 {
		t.Fatalf("mismatch at %d, want 30 (n2's units labelled from its minimum 25)", m.Offset)
	}
	for _, mb := range m.Members {
		if mb.Node == "n2" && (mb.Min != 25 || mb.From != 27 || len(mb.Units) != 7 || mb.Units[3] != n2[30-25]) {
			t.Fatalf("n2's side %+v, want min 25 and its units from 27, its own at 30", mb)
		}
	}

	// Two members, one starting at 25: [0, 25) is held by one member
	// only and is not counted as compared.
	fs[2].set(25, units(25, 15))
	b := newAuditor([]auditMember{members[0], members[2]})
	b.round(ctx)
	if h := b.history(); h.Compared != 15 || len(h.Mismatches) != 0 {
		t.Fatalf("two members, one from 25: %+v, want only [25, 40) compared", h)
	}

	// Retention moves n2's minimum on after each ask below it.
	fs[2].mu.Lock()
	fs[2].retire = 5
	fs[2].mu.Unlock()
	fs[2].set(5, units(5, 35))
	ans := a.ask(ctx, members[2], auditQueue{0, "T", 0}, 0)
	if !isRefusal(ans.Err) || len(ans.Units) != 0 {
		t.Fatalf("minimum moving past each ask: %+v, want a refusal", ans)
	}
}

// TestAuditRealGroup audits a real 3-node group (OS processes, proxy
// mode): equal replicas, a follower killed and restarted, then one unit's
// tags code changed in a follower's ConsumeQueue file (the broker maps
// the file, so it serves the change): the audit names that member and
// offset, and finds the CommitLogs equal there. It builds raftmq, so it
// runs with the chaos suite (RAFTMQ_CHAOS=1).
func TestAuditRealGroup(t *testing.T) {
	if os.Getenv("RAFTMQ_CHAOS") != "1" && os.Getenv("RAFTMQ_LONG") != "1" {
		t.Skip("builds raftmq and starts a real group: RAFTMQ_CHAOS=1 go test -race -run TestAuditRealGroup ./jepsen/")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin, err := BuildBinary(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(ClusterConfig{Dir: filepath.Join(dir, "cluster"), Binary: bin, SegmentBytes: 4 << 20, ElectionMillis: 300, Queues: 1, TmpfsNode: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := client.NewProducer(client.NameServers(c.NamesrvAddr()), client.ProducerGroup("JepsenAuditProducer"),
		client.AutoCreateTopic(true, 1), client.SendTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	next := 0
	send := func(n int) {
		t.Helper()
		for end := next + n; next < end; {
			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := p.SendSync(sctx, &client.Message{Topic: Topic, Tags: "audit", Body: encodeBody(fmt.Sprintf("a-%d", next))})
			scancel()
			if err == nil {
				next++
			} else if ctx.Err() != nil {
				t.Fatalf("send %d: %v", next, err)
			}
		}
	}
	rec := &recorder{h: History{Start: time.Now()}}
	a := newClusterAuditor(c, rec, time.Second, 1, filepath.Join(dir, "report", "audit"))
	auditUntil := func(compared int64) *AuditHistory {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			a.round(ctx)
			h := a.history()
			if h.Compared >= compared || len(h.Mismatches) > 0 {
				return h
			}
			if time.Now().After(deadline) {
				for _, n := range c.Nodes {
					ans := a.ask(ctx, auditMember{n.ID, n.Addr(), n.DataDir}, auditQueue{0, Topic, 0}, 0)
					t.Logf("%s: [%d,%d) %d units, %v", n.ID, ans.Min, ans.Max, len(ans.Units), ans.Err)
				}
				t.Fatalf("audit compared %d offsets in a minute, want %d", h.Compared, compared)
			}
		}
	}

	send(30)
	if h := auditUntil(30); len(h.Mismatches) > 0 {
		t.Fatalf("equal replicas: %+v", h.Mismatches)
	}
	leader := c.Leader(ctx)
	follower := -1
	for _, i := range c.GroupNodes(0) {
		if i != leader && follower < 0 {
			follower = i
		}
	}
	if err := c.KillNode(follower); err != nil {
		t.Fatal(err)
	}
	send(30)
	a.round(ctx)
	if err := c.StartNode(follower); err != nil {
		t.Fatal(err)
	}
	if h := auditUntil(60); len(h.Mismatches) > 0 {
		t.Fatalf("follower restarted: %+v", h.Mismatches)
	}

	// Offsets 60..89 on every member, not yet audited.
	send(30)
	q := auditQueue{0, Topic, 0}
	fn := c.Nodes[follower]
	deadline := time.Now().Add(time.Minute)
	for {
		ans := a.ask(ctx, auditMember{fn.ID, fn.Addr(), fn.DataDir}, q, 60)
		if ans.Err == nil && ans.Max >= 90 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's queue never reached 90: %+v", fn.ID, ans)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f, err := os.OpenFile(filepath.Join(fn.DataDir, "consumequeue", Topic, "0", "00000000000000000000"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	const unit = 70
	if _, err := f.WriteAt([]byte{0, 0, 0, 0, 0, 0, 0x12, 0x34}, unit*20+12); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	h := auditUntil(90)
	if len(h.Mismatches) != 1 {
		t.Fatalf("one unit's tags changed on %s: %d mismatches (%+v), want 1", fn.ID, len(h.Mismatches), h)
	}
	m := h.Mismatches[0]
	t.Log(m.summary())
	if m.Offset != unit || m.Topic != Topic || !strings.Contains(m.CommitLog, "only the ConsumeQueues differ") {
		t.Fatalf("mismatch %s, want %s q0@%d with equal CommitLogs", m.summary(), Topic, unit)
	}
	var tags []int64
	for _, mb := range m.Members {
		if i := m.Offset - mb.From; i >= 0 && i < int64(len(mb.Units)) {
			tags = append(tags, mb.Units[i].Tags)
			if mb.Node == fn.ID && mb.Units[i].Tags != 0x1234 {
				t.Errorf("%s's unit at %d: %+v, want the tags code written", fn.ID, unit, mb.Units[i])
			}
		}
	}
	if len(tags) != 3 {
		t.Errorf("units at %d from %d members, want 3", unit, len(tags))
	}
	if _, err := os.Stat(filepath.Join(dir, "report", "audit", "01-"+GroupNameOf(0)+"-"+Topic+"-q0", fn.ID, "consumequeue", Topic, "0", "00000000000000000000")); err != nil {
		t.Errorf("%s's queue file not kept: %v", fn.ID, err)
	}
}
