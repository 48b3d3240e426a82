package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// The cross-replica ConsumeQueue audit: every AuditInterval, each running
// member of a group is asked (QUERY_CONSUME_QUEUE) for its units of every
// queue the workloads use, and the members' units at each queue offset
// they all hold are compared. Queue offsets are assigned in Apply, so
// every replica's unit at an offset must name the same CommitLog entry;
// a difference the final read would only find after nemeses had wiped
// and rebuilt members is caught when it appears, on the member it
// appears on.

// auditWindow bounds the units asked of one member for one queue per
// round (the broker's QUERY_CONSUME_QUEUE cap).
const auditWindow = 1000

// auditStallRounds is how many rounds a queue's cursor waits for every
// member of its group to answer before it moves on with those that did
// (a member down that long is checked from where it is back).
const auditStallRounds = 6

// AuditUnit is one ConsumeQueue unit as a member answered it.
type AuditUnit struct {
	Phy  int64 `json:"phy"`
	Size int32 `json:"size"`
	Tags int64 `json:"tags"`
}

func (u AuditUnit) String() string {
	return fmt.Sprintf("phy %d size %d tags %d", u.Phy, u.Size, u.Tags)
}

// AuditMember is one member's side of a mismatch: its queue's bounds and
// its units around the first differing offset (From is Units[0]'s queue
// offset).
type AuditMember struct {
	Node  string      `json:"node"`
	Min   int64       `json:"min"`
	Max   int64       `json:"max"`
	From  int64       `json:"from"`
	Units []AuditUnit `json:"units"`
}

// AuditStored is what one member's VIEW_MESSAGE_BY_ID answered for one
// of the CommitLog offsets the mismatching units name.
type AuditStored struct {
	Node string `json:"node"`
	Phy  int64  `json:"phy"`
	// What is the message there (topic, queue, queue offset as this
	// member indexes it, value, body CRC, store time) or the refusal.
	What string `json:"what"`
}

// AuditMismatch is the first offset of one queue whose units differ
// between members.
type AuditMismatch struct {
	Group   string        `json:"group"`
	Topic   string        `json:"topic"`
	Queue   int           `json:"queue"`
	Offset  int64         `json:"offset"`
	AtMs    float64       `json:"atMs"`
	Members []AuditMember `json:"members"`
	// Leaders is each member's last Raft state the monitor saw.
	Leaders string        `json:"leaders"`
	Stored  []AuditStored `json:"stored,omitempty"`
	// CommitLog says whether the members' CommitLogs differ at the
	// offsets the units name, or only their ConsumeQueues.
	CommitLog string `json:"commitLog"`
	// Kept says where the members' files of the queue were copied.
	Kept string `json:"kept,omitempty"`
}

// AuditHistory is the audit's record (nil when the run had none).
type AuditHistory struct {
	IntervalMs int64 `json:"intervalMs"`
	Rounds     int   `json:"rounds"`
	// Compared counts the queue offsets compared between at least two
	// members, each once; Mismatched those whose units differed.
	Compared   int64           `json:"compared"`
	Mismatched int64           `json:"mismatched"`
	Mismatches []AuditMismatch `json:"mismatches,omitempty"`
}

func (a *AuditHistory) clone() *AuditHistory {
	if a == nil {
		return nil
	}
	c := *a
	c.Mismatches = slices.Clone(a.Mismatches)
	return &c
}

// queueAnswer is one member's QUERY_CONSUME_QUEUE answer for a queue,
// asked from a cursor: Units start at max(cursor, From, Min). From is
// where the units were asked from when the member's queue starts past the
// cursor (ask re-asks it there).
type queueAnswer struct {
	Node     string
	Min, Max int64
	From     int64
	Units    []AuditUnit
	Err      error
}

// held is the span [lo, hi) of queue offsets the answer has units for.
func (a queueAnswer) held(cursor int64) (lo, hi int64) {
	lo = max(cursor, a.From, a.Min)
	return lo, lo + int64(len(a.Units))
}

// unit is the answer's unit at queue offset off; a blank filler (what a
// queue holds in front of its first unit, or where a catch-up's write of
// a peer's units was torn) stands for no unit, like an offset out of the
// answer's span.
func (a queueAnswer) unit(cursor, off int64) (AuditUnit, bool) {
	lo, hi := a.held(cursor)
	if off < lo || off >= hi || a.Units[off-lo] == blankAuditUnit {
		return AuditUnit{}, false
	}
	return a.Units[off-lo], true
}

// blankAuditUnit is the broker's blank filler unit (broker/store's
// blankCQUnit).
var blankAuditUnit = AuditUnit{Phy: 0, Size: math.MaxInt32, Tags: 0}

// roundResult is one queue's comparison in one round.
type roundResult struct {
	// next is the queue's cursor after the round.
	next int64
	// compared and mismatched count the offsets of [cursor, next) held by
	// two members or more, and those whose units differ.
	compared, mismatched int64
	// first is the first offset from the cursor whose units differ, -1
	// when none does (offsets past next are compared too, not counted).
	first int64
}

// compareRound compares the answers of one queue asked from cursor with
// window units each. Members whose request failed are left out. At each
// offset only the members holding it are compared (a member rebuilt or
// past retention lacks the head, one catching up lacks the tail: neither
// is a divergence). The cursor moves past the offsets that every
// answering member holds, once members (the group's size) have answered
// or force says the round need not wait for the missing ones, and never
// past an offset fewer than two members hold. A member in stalled (its
// queue has ended at the cursor for many rounds while others grew: its
// apply stopped) does not hold the cursor back.
func compareRound(cursor, window int64, answers []queueAnswer, members int, force bool, stalled map[string]bool) roundResult {
	var ok []queueAnswer
	for _, a := range answers {
		if a.Err == nil {
			ok = append(ok, a)
		}
	}
	r := roundResult{next: cursor, first: -1}
	if len(ok) < 2 {
		return r
	}
	end := cursor + window
	var his []int64
	for _, a := range ok {
		_, hi := a.held(cursor)
		if bound := min(cursor+window, a.Max); hi < bound {
			// Its units stop short of both the window and its queue's
			// end: the broker answers the units up to a ConsumeQueue
			// file it lost. What it lacks there never comes, so, as a
			// stalled member's, it does not hold the cursor back.
			hi = bound
		}
		his = append(his, hi)
		if !stalled[a.Node] {
			end = min(end, hi)
		}
	}
	slices.Sort(his)
	end = min(end, his[len(his)-2])
	if len(ok) >= members || force {
		r.next = max(end, cursor)
	}
	for off := cursor; off < cursor+window; off++ {
		var ref AuditUnit
		holders, differ := 0, false
		for _, a := range ok {
			u, has := a.unit(cursor, off)
			if !has {
				continue
			}
			if holders == 0 {
				ref = u
			} else if u != ref {
				differ = true
			}
			holders++
		}
		if holders < 2 {
			continue
		}
		if differ && r.first < 0 {
			r.first = off
		}
		if off < r.next {
			r.compared++
			if differ {
				r.mismatched++
			}
		}
	}
	return r
}

// auditQueue is one queue the audit follows.
type auditQueue struct {
	group int
	topic string
	queue int
}

type auditState struct {
	cursor int64
	stall  int            // rounds without every member's answer
	behind map[string]int // rounds each member's queue ended at the cursor while another's went on
	found  bool           // first mismatch recorded
}

// auditMember is one member as the audit reaches it.
type auditMember struct {
	id, addr, dataDir string
}

// auditor runs the audit rounds.
type auditor struct {
	rc       *remoting.Client
	rec      *recorder
	dir      string                                            // where the mismatching queues' files are copied
	members  func(group int) (running []auditMember, size int) // the group's running members and its size
	queues   []auditQueue
	timeout  time.Duration
	interval time.Duration

	mu    sync.Mutex
	state map[auditQueue]*auditState
	h     AuditHistory
}

// auditQueues lists the queues of every topic the workloads use on each
// of groups groups: the main, ordered, retry and timer topics' queues,
// the retry group's %RETRY% and %DLQ% queues, the timer wheel's queue and
// the delay levels' SCHEDULE_TOPIC_XXXX queues. A queue a group does not
// have answers an error and is skipped.
func auditQueues(groups, queues int) []auditQueue {
	var out []auditQueue
	for g := range groups {
		for _, t := range []string{Topic, OrderTopic, RetryTopic, TimerTopic} {
			for q := range queues {
				out = append(out, auditQueue{g, t, q})
			}
		}
		out = append(out, auditQueue{g, wire.RetryGroupTopicPrefix + RetryGroup, 0}, auditQueue{g, wire.DLQGroupTopicPrefix + RetryGroup, 0},
			auditQueue{g, wire.TopicTimer, 0})
		for q := range 18 {
			out = append(out, auditQueue{g, wire.TopicSchedule, q})
		}
	}
	return out
}

// newClusterAuditor audits c's groups, copying mismatching queues' files
// under dir.
func newClusterAuditor(c *Cluster, rec *recorder, interval time.Duration, queues int, dir string) *auditor {
	return &auditor{
		rc: c.rc, rec: rec, dir: dir, interval: interval, timeout: time.Second,
		queues: auditQueues(c.groups(), queues),
		members: func(g int) ([]auditMember, int) {
			var out []auditMember
			idx := c.GroupNodes(g)
			for _, i := range idx {
				if n := c.Nodes[i]; n.State() == NodeRunning {
					out = append(out, auditMember{n.ID, n.Addr(), n.DataDir})
				}
			}
			return out, len(idx)
		},
		state: map[auditQueue]*auditState{},
	}
}

// run audits every interval until ctx ends.
func (a *auditor) run(ctx context.Context) {
	t := time.NewTicker(a.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		a.round(ctx)
	}
}

// history is the audit's record so far.
func (a *auditor) history() *AuditHistory {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := a.h
	h.IntervalMs = a.interval.Milliseconds()
	return h.clone()
}

// round compares every queue once. A member whose request fails on the
// network (paused, partitioned, killed) is left out for the rest of the
// round; a refusal (a queue it does not have) only for that queue.
func (a *auditor) round(ctx context.Context) {
	down := map[string]bool{}
	for _, q := range a.queues {
		if ctx.Err() != nil {
			return
		}
		running, size := a.members(q.group)
		a.mu.Lock()
		st := a.state[q]
		if st == nil {
			st = &auditState{behind: map[string]int{}}
			a.state[q] = st
		}
		cursor := st.cursor
		a.mu.Unlock()
		answers := make([]queueAnswer, len(running))
		var wg sync.WaitGroup
		for i, m := range running {
			if down[m.addr] {
				answers[i] = queueAnswer{Node: m.id, Err: fmt.Errorf("unreachable this round")}
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = a.ask(ctx, m, q, cursor)
			}()
		}
		wg.Wait()
		for i, m := range running {
			if err := answers[i].Err; err != nil && !isRefusal(err) {
				down[m.addr] = true
			}
		}
		a.mu.Lock()
		answered := 0
		for _, x := range answers {
			if x.Err == nil {
				answered++
			}
		}
		// Once a member has been missing for auditStallRounds, the cursor
		// moves every round with the others until it is back; once a
		// member's queue has ended at the cursor for as long while
		// another's went on, the cursor moves on without it.
		if answered < size {
			st.stall++
		} else {
			st.stall = 0
		}
		ahead := false
		for _, x := range answers {
			ahead = ahead || (x.Err == nil && x.Max > cursor)
		}
		stalled := map[string]bool{}
		for _, x := range answers {
			if x.Err != nil {
				continue
			}
			if ahead && x.Max <= cursor {
				st.behind[x.Node]++
			} else {
				st.behind[x.Node] = 0
			}
			stalled[x.Node] = st.behind[x.Node] > auditStallRounds
		}
		r := compareRound(cursor, auditWindow, answers, size, st.stall > auditStallRounds, stalled)
		st.cursor = max(st.cursor, r.next)
		a.h.Compared += r.compared
		a.h.Mismatched += r.mismatched
		first := r.first >= 0 && !st.found
		if first {
			st.found = true
		}
		a.mu.Unlock()
		if first {
			m := a.mismatch(ctx, q, cursor, r.first, answers, running)
			a.mu.Lock()
			a.h.Mismatches = append(a.h.Mismatches, m)
			a.mu.Unlock()
		}
	}
	a.mu.Lock()
	a.h.Rounds++
	a.mu.Unlock()
}

// refusalError is a member's answer other than success.
type refusalError struct {
	code   int16
	remark string
}

func (e *refusalError) Error() string { return fmt.Sprintf("code %d: %s", e.code, e.remark) }

func isRefusal(err error) bool {
	_, ok := err.(*refusalError)
	return ok
}

// auditReasks bounds how often ask follows a member's minimum that moves
// past each index it is asked from.
const auditReasks = 3

// ask asks member m for queue q's units from cursor. A broker answers an
// index below its queue's minimum (its head retired, or the member rebuilt
// from a later snapshot) with no units and its bounds, as RocketMQ; the member is asked again
// from its minimum, so that it is compared from there. What lies between
// the cursor and that minimum it does not hold, and is compared among the
// others only.
func (a *auditor) ask(ctx context.Context, m auditMember, q auditQueue, cursor int64) queueAnswer {
	from := cursor
	for range auditReasks + 1 {
		ans := a.askFrom(ctx, m, q, from)
		if ans.Err != nil || len(ans.Units) > 0 || ans.Min <= from || ans.Min >= ans.Max {
			return ans
		}
		from = ans.Min
	}
	// Its minimum kept moving past where it was asked. Kept as an answer
	// without units, it would let the cursor pass what the member holds
	// (compareRound takes units stopping short of the queue's end for a
	// lost file); left out, the member is asked again next round.
	return queueAnswer{Node: m.id, Err: &refusalError{remoting.ResponseSuccess, fmt.Sprintf("queue minimum moved past each of %d asks", auditReasks+1)}}
}

// askFrom asks member m for queue q's units from index from.
func (a *auditor) askFrom(ctx context.Context, m auditMember, q auditQueue, from int64) queueAnswer {
	ans := queueAnswer{Node: m.id, From: from}
	cctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	resp, err := a.rc.InvokeSync(cctx, m.addr, remoting.NewRequest(remoting.RequestQueryConsumeQueue,
		&wire.QueryConsumeQueueRequestHeader{Topic: q.topic, QueueID: int32(q.queue), Index: from, Count: auditWindow}, nil))
	if err != nil {
		ans.Err = err
		return ans
	}
	if resp.Code != remoting.ResponseSuccess {
		ans.Err = &refusalError{resp.Code, resp.Remark}
		return ans
	}
	var body wire.QueryConsumeQueueResponseBody
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		ans.Err = &refusalError{resp.Code, "undecodable answer: " + err.Error()}
		return ans
	}
	ans.Min, ans.Max = body.MinQueueIndex, body.MaxQueueIndex
	for _, d := range body.QueueData {
		ans.Units = append(ans.Units, AuditUnit{Phy: d.PhysicOffset, Size: d.PhysicSize, Tags: d.TagsCode})
	}
	return ans
}

// auditContext is how many units either side of the first differing
// offset a mismatch records per member.
const auditContext = 3

// mismatch records queue q's first differing offset off: each member's
// units around it, the Raft states last seen, what each running member
// stores at the CommitLog offsets the differing units name, and a copy
// of each member's files of the queue.
func (a *auditor) mismatch(ctx context.Context, q auditQueue, cursor, off int64, answers []queueAnswer, running []auditMember) AuditMismatch {
	m := AuditMismatch{Group: GroupNameOf(q.group), Topic: q.topic, Queue: q.queue, Offset: off, AtMs: a.rec.since(time.Now())}
	var phys []int64
	for _, x := range answers {
		if x.Err != nil {
			continue
		}
		lo, hi := x.held(cursor)
		from, to := max(lo, off-auditContext), min(hi, off+auditContext+1)
		am := AuditMember{Node: x.Node, Min: x.Min, Max: x.Max, From: from}
		if from < to {
			am.Units = slices.Clone(x.Units[from-lo : to-lo])
		}
		m.Members = append(m.Members, am)
		if u, ok := x.unit(cursor, off); ok && !slices.Contains(phys, u.Phy) {
			phys = append(phys, u.Phy)
		}
	}
	m.Leaders = a.leaders(m.Group, running)
	slices.Sort(phys)
	for _, phy := range phys {
		for _, mb := range running {
			m.Stored = append(m.Stored, AuditStored{Node: mb.id, Phy: phy, What: a.view(ctx, mb, phy)})
		}
	}
	m.CommitLog = commitLogVerdict(m.Stored)
	m.Kept = a.keep(q, running)
	return m
}

// leaders is the last Raft state the monitor recorded for each member of
// group.
func (a *auditor) leaders(group string, running []auditMember) string {
	a.rec.mu.Lock()
	last := map[string]LeaderObs{}
	for _, l := range a.rec.h.Leaders {
		if l.Group == group {
			last[l.Node] = l
		}
	}
	a.rec.mu.Unlock()
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(last)) {
		l := last[n]
		parts = append(parts, fmt.Sprintf("%s %s term %d serving=%v (since %.1f s)", n, l.State, l.Term, l.Serving, l.AtMs/1000))
	}
	var ids []string
	for _, mb := range running {
		ids = append(ids, mb.id)
	}
	return fmt.Sprintf("%s; running: %s", strings.Join(parts, ", "), strings.Join(ids, " "))
}

// view asks member m what it stores at CommitLog offset phy
// (VIEW_MESSAGE_BY_ID): the message, or the member's refusal.
func (a *auditor) view(ctx context.Context, m auditMember, phy int64) string {
	cctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	resp, err := a.rc.InvokeSync(cctx, m.addr, remoting.NewRequest(remoting.RequestViewMessageByID, &wire.ViewMessageRequestHeader{Offset: phy}, nil))
	if err != nil {
		return "unreachable: " + err.Error()
	}
	if resp.Code != remoting.ResponseSuccess {
		return fmt.Sprintf("refused (code %d): %s", resp.Code, resp.Remark)
	}
	msg, _, err := wire.DecodeMessage(resp.Body, false)
	if err != nil {
		return "undecodable answer: " + err.Error()
	}
	v, intact := decodeBody(msg.Body)
	return fmt.Sprintf("%s q%d@%d value %q intact=%v bodyCRC %08x stored %d", msg.Topic, msg.QueueID, msg.QueueOffset, v, intact, msg.BodyCRC, msg.StoreTimestamp)
}

// commitLogVerdict says, from what the members answered at each
// CommitLog offset, whether their CommitLogs differ there. A message's
// queue offset is left out (each member reports its own index of it); a
// refusal saying the member has no unit for the entry means its log holds
// a message there that its ConsumeQueue lacks.
func commitLogVerdict(stored []AuditStored) string {
	byPhy := map[int64]map[string][]string{}
	unknown := false
	for _, s := range stored {
		key := s.What
		switch {
		case strings.HasPrefix(s.What, "unreachable") || strings.HasPrefix(s.What, "undecodable"):
			unknown = true
			continue
		case strings.HasPrefix(s.What, "refused"):
			if !strings.Contains(s.What, "has no unit there") {
				key = "no message"
			} else {
				key = "not indexed"
			}
		default:
			key = withoutQueueOffset(s.What)
		}
		if byPhy[s.Phy] == nil {
			byPhy[s.Phy] = map[string][]string{}
		}
		byPhy[s.Phy][key] = append(byPhy[s.Phy][key], s.Node)
	}
	var differ []string
	for _, phy := range slices.Sorted(maps.Keys(byPhy)) {
		kinds := byPhy[phy]
		var msgs int
		for k := range kinds {
			if k != "not indexed" && k != "no message" {
				msgs++
			}
		}
		// Two different messages, or a message where another member has
		// none: the logs differ.
		if msgs > 1 || (msgs == 1 && len(kinds["no message"]) > 0) {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(kinds)) {
				parts = append(parts, fmt.Sprintf("%s: %s", strings.Join(kinds[k], " "), k))
			}
			differ = append(differ, fmt.Sprintf("at %d (%s)", phy, strings.Join(parts, "; ")))
		}
	}
	switch {
	case len(differ) > 0:
		return "CommitLogs differ " + strings.Join(differ, ", ")
	case unknown:
		return "CommitLogs agree where every member answered; some did not"
	}
	return "CommitLogs agree at these offsets: only the ConsumeQueues differ"
}

// withoutQueueOffset drops the "@<queue offset>" of a view line.
func withoutQueueOffset(what string) string {
	f := strings.Fields(what)
	if len(f) > 1 {
		if i := strings.IndexByte(f[1], '@'); i > 0 {
			f[1] = f[1][:i]
		}
	}
	return strings.Join(f, " ")
}

// keep copies each running member's files of queue q under the audit
// directory, numbered by mismatch.
func (a *auditor) keep(q auditQueue, running []auditMember) string {
	if a.dir == "" {
		return ""
	}
	a.mu.Lock()
	name := fmt.Sprintf("%02d-%s-%s-q%d", len(a.h.Mismatches)+1, GroupNameOf(q.group), q.topic, q.queue)
	a.mu.Unlock()
	var kept, failed []string
	for _, m := range running {
		src := filepath.Join(m.dataDir, "consumequeue", q.topic, strconv.Itoa(q.queue))
		dst := filepath.Join(a.dir, name, m.id, "consumequeue", q.topic, strconv.Itoa(q.queue))
		size, err := treeSize(src)
		if err == nil && size > keptQueuesLimit {
			err = fmt.Errorf("%d MiB, over %d MiB", size>>20, keptQueuesLimit>>20)
		}
		if err == nil {
			err = os.MkdirAll(dst, 0o755)
		}
		if err == nil {
			err = copyTree(src, dst)
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s (%v)", m.id, err))
			continue
		}
		kept = append(kept, m.id)
	}
	s := fmt.Sprintf("ConsumeQueue files of %s kept in %s", strings.Join(kept, ", "), filepath.Join(filepath.Base(a.dir), name))
	if len(failed) > 0 {
		s += "; not kept: " + strings.Join(failed, ", ")
	}
	return s
}

// checkAudit is the audit's verdict line (false when the run had no
// audit).
func checkAudit(h History) (Check, bool) {
	a := h.Audit
	if a == nil {
		return Check{}, false
	}
	var ex []string
	for _, m := range a.Mismatches {
		ex = addEx(ex, "%s", m.summary())
	}
	value := fmt.Sprintf("%d offsets compared in %d rounds", a.Compared, a.Rounds)
	if len(a.Mismatches) > 0 {
		value = fmt.Sprintf("%d queues (%d of %d offsets compared)", len(a.Mismatches), a.Mismatched, a.Compared)
	}
	return Check{Name: "replica ConsumeQueues differ (audit)", Value: value, OK: len(a.Mismatches) == 0, Required: true, Examples: ex}, true
}

// summary is the mismatch on one line: where, when, each member's unit
// there, what the logs hold and where the files are.
func (m AuditMismatch) summary() string {
	var units []string
	for _, mb := range m.Members {
		u := "none"
		if i := m.Offset - mb.From; i >= 0 && i < int64(len(mb.Units)) {
			u = mb.Units[i].String()
		}
		units = append(units, fmt.Sprintf("%s [%d,%d) %s", mb.Node, mb.Min, mb.Max, u))
	}
	var stored []string
	for _, s := range m.Stored {
		stored = append(stored, fmt.Sprintf("%s@%d: %s", s.Node, s.Phy, s.What))
	}
	s := fmt.Sprintf("%s %s q%d@%d at %.1f s: %s; leaders: %s; %s; stored: %s", m.Group, m.Topic, m.Queue, m.Offset, m.AtMs/1000,
		strings.Join(units, " | "), m.Leaders, m.CommitLog, strings.Join(stored, " | "))
	if m.Kept != "" {
		s += "; " + m.Kept
	}
	return s
}
