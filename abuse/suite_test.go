package abuse

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/proccluster"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/jepsen"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// profile is the suite's scale: the CI profile's small counts, or the
// full ones (RAFTMQ_ABUSE_FULL=1) against the broker's default limits.
type profile struct {
	full        bool
	halfFrames  int // connections each holding a half frame
	slowloris   int // connections trickling a frame a byte at a time
	topicFlood  int // sends to distinct new topics
	offsetFlood int // offset commits for unknown keys
	heldPulls   int // pulls asking to be held
	heldPerConn int // maxHeldPullsPerConnection in brokerConf
	neverReads  int // pulls sent by a client that never reads
	probeSends  int // the well-behaved producer's sends per measurement
	// attackFor is the shortest measurement under attack: the probe
	// goes on sending until then (the paced floods last about as long).
	attackFor time.Duration
	// connTimeout is the broker's frame-read and write timeout
	// (frameReadTimeoutMillis, writeTimeoutMillis): the slowloris and
	// never-reading connections are closed after it.
	connTimeout time.Duration
	// brokerConf scales the limits down with the counts.
	brokerConf []string
}

func suiteProfile() profile {
	// pprofEnable: the live heap is read from /debug/pprof/heap?gc=1.
	// diskMaxUsedSpaceRatio=95: on a shared disk above the default 75 %
	// retention deletes the oldest segments, and the final read-back
	// would count retention as loss. shutdownTransferTimeout=0: the suite
	// stops a leader only at its cleanup, where every member stops at
	// once and the leader would wait out the hand-off (5 s) for a
	// follower that is stopping too.
	//
	// The full profile keeps the broker's 10 s connection timeouts. The CI
	// profile's are 2 s past its measurement, so the half-frame, slowloris
	// and never-reading connections are still open when it ends, and the
	// last two cases do not wait out 10 s each.
	var p profile
	if os.Getenv("RAFTMQ_ABUSE_FULL") == "1" {
		p = profile{full: true, halfFrames: 2000, slowloris: 500, topicFlood: 5000, offsetFlood: 20000,
			heldPulls: 10000, heldPerConn: 4096, neverReads: 4000, probeSends: 400, attackFor: 10 * time.Second,
			connTimeout: 10 * time.Second,
			brokerConf:  []string{"pprofEnable=true", "diskMaxUsedSpaceRatio=95", "shutdownTransferTimeout=0"}}
	} else {
		p = profile{halfFrames: 200, slowloris: 50, topicFlood: 300, offsetFlood: 1000, heldPulls: 1000, heldPerConn: 300,
			neverReads: 600, probeSends: 150, attackFor: 3 * time.Second, connTimeout: 5 * time.Second,
			brokerConf: []string{"pprofEnable=true", "diskMaxUsedSpaceRatio=95", "shutdownTransferTimeout=0", "maxHeldPullsPerConnection=300"}}
	}
	ms := strconv.FormatInt(p.connTimeout.Milliseconds(), 10)
	p.brokerConf = append(p.brokerConf, "frameReadTimeoutMillis="+ms, "writeTimeoutMillis="+ms)
	return p
}

// p99Slack is added to twice the baseline p99: sends of a few
// milliseconds on a shared 2-core host jitter by that much whatever the
// broker does — 5 ms in the full profile, 25 ms in CI, where 150 sends
// make a p99 of their second-slowest and other jobs share the cores
// (RAFTMQ_ABUSE_P99_SLACK_MS overrides it; 0 asserts the bare 2×).
func p99Slack() time.Duration {
	if v, err := strconv.Atoi(os.Getenv("RAFTMQ_ABUSE_P99_SLACK_MS")); err == nil {
		return time.Duration(v) * time.Millisecond
	}
	if suiteProfile().full {
		return 5 * time.Millisecond
	}
	return 25 * time.Millisecond
}

// pace returns a wait that spaces a worker's requests to perSecond: the
// attacker runs on the same 2 cores as the cluster, and unpaced it would
// measure its own CPU use, not what the broker does with the requests.
// The paced rates are still tens of times what the limits let through.
func pace(perSecond int) func() {
	t := time.NewTicker(time.Second / time.Duration(perSecond))
	return func() { <-t.C }
}

// env is the running cluster and what the suite observed.
type env struct {
	t    *testing.T
	prof profile
	pc   *proccluster.Cluster
	rc   *remoting.Client
	prod *client.Producer
	http *http.Client
	// lastAck is the broker that answered the producer's latest send.
	lastAck string

	mu sync.Mutex
	// leader is the remoting address of the group's leader, the target.
	// Each case targets the member that leads when it starts and follows
	// a not-leader answer (call), so a leader change (a loaded host can
	// miss a Raft lease) neither carries into the next case nor fails one.
	leader  string       // guarded by mu
	acks    []ack        // guarded by mu
	results []caseResult // guarded by mu
}

// ack is an acknowledged message, read back at the end.
type ack struct {
	addr, offsetMsgID, topic string
	body                     []byte
}

// caseResult is one row of the report.
type caseResult struct {
	name                  string
	baseP99, p99          time.Duration
	heapBase, heapMax     int64 // heap in use, garbage included (GOGC 400)
	liveBase, liveMax     int64 // heap alive at a forced GC
	rssMax, bound         int64
	detail                string
	probeFails, probeSent int
}

// raiseFileLimit lifts the soft limit on open files to the hard one: the
// half-frame case holds 2,000 connections from this process.
func raiseFileLimit(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
	}
	if need := uint64(suiteProfile().halfFrames + 512); lim.Cur < need {
		t.Skipf("open-file limit %d is below the %d the suite needs", lim.Cur, need)
	}
}

// startEnv builds raftmq, starts a name server and a 3-node group as
// separate processes, and a well-behaved producer whose first send finds
// the leader.
func startEnv(t *testing.T) *env {
	raiseFileLimit(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := jepsen.BuildBinary(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	prof := suiteProfile()
	pc, err := proccluster.New(proccluster.Config{Dir: dir, Launch: proccluster.Binary(bin), ClusterName: "AbuseCluster",
		GroupName: func(int) string { return "broker-abuse" }, Metrics: true, Queues: 4, NamesrvLogLevel: "warn",
		BrokerConf: prof.brokerConf})
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.WriteConfs(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pc.StopAll(10 * time.Second)
		if t.Failed() {
			for _, n := range append([]*proccluster.Node{pc.NS}, pc.Nodes...) {
				t.Logf("%s log tail:\n%s", n.ID, n.Tail(30))
			}
		}
	})
	for _, n := range append([]*proccluster.Node{pc.NS}, pc.Nodes...) {
		if err := pc.Start(n); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{t: t, prof: prof, pc: pc, http: &http.Client{Timeout: 2 * time.Second}}
	e.rc = remoting.NewClient(remoting.ClientConfig{DefaultTimeout: 10 * time.Second}, zap.NewNop())
	t.Cleanup(func() { _ = e.rc.Close() })
	e.prod, err = client.NewProducer(client.NameServers(pc.NS.Addr()), client.ProducerGroup("WELL_BEHAVED"),
		client.SendTimeout(5*time.Second), client.RequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.prod.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.prod.Close(context.Background()) })
	testutil.WaitFor(t, 90*time.Second, "the group elected a leader and routes topic GOOD", func() bool {
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		res, err := e.prod.SendSync(sctx, client.NewMessage("GOOD", []byte("warm-up")))
		if err != nil {
			return false
		}
		e.setLeader(res.Addr)
		return true
	})
	// Warm the path (connections, JIT-free Go, page cache) before any baseline.
	e.probe(50, 0)
	return e
}

// leaderAddr is the remoting address of the leader the case targets.
func (e *env) leaderAddr() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leader
}

// setLeader makes addr the leader the case targets.
func (e *env) setLeader(addr string) {
	e.mu.Lock()
	e.leader = addr
	e.mu.Unlock()
}

// leaderNode is the process behind the leader the case targets.
func (e *env) leaderNode() *proccluster.Node { return e.pc.NodeByAddr(e.leaderAddr()) }

// metric reads one sample of the leader's /metrics (first series of
// name whose labels contain label).
func (e *env) metric(name, label string) (float64, bool) {
	resp, err := e.http.Get("http://" + e.leaderNode().MetricsAddr() + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		if label != "" && !strings.Contains(line, label) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		return v, err == nil
	}
	return 0, false
}

// counter is metric, 0 when absent.
func (e *env) counter(name, label string) float64 {
	v, _ := e.metric(name, label)
	return v
}

// rss is the leader process's resident set, from /proc.
func (e *env) rss() int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(e.leaderNode().PID()), "status"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// heap is the leader's Go heap in use.
func (e *env) heap() int64 {
	v, _ := e.metric("go_memstats_heap_inuse_bytes", "")
	return int64(v)
}

// live is what the leader's heap holds right after a garbage
// collection: /debug/pprof/heap?gc=1 forces one, then go_memstats_heap_alloc_bytes
// is read at once — without the garbage GOGC=400 lets pile up between
// collections (what the process allocates in the few milliseconds between
// the two requests is counted too).
func (e *env) live() int64 {
	resp, err := e.http.Get("http://" + e.leaderNode().MetricsAddr() + "/debug/pprof/heap?gc=1")
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	v, _ := e.metric("go_memstats_heap_alloc_bytes", "")
	return int64(v)
}

// sampler records the leader's peak heap and RSS every 100 ms, and its
// live heap every second, until stopped.
type sampler struct {
	stop                     chan struct{}
	done                     chan struct{}
	heapMax, rssMax, liveMax int64
}

func (e *env) sample() *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			s.heapMax = max(s.heapMax, e.heap())
			s.rssMax = max(s.rssMax, e.rss())
			if i%10 == 0 {
				s.liveMax = max(s.liveMax, e.live())
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *sampler) finish() { close(s.stop); <-s.done }

// probe sends n messages one after another (and more until at least
// minDur passed), as a well-behaved producer does, and returns the p99
// latency and the failures. Every ack is kept for the final read-back.
func (e *env) probe(n int, minDur time.Duration) (p99 time.Duration, fails int) {
	lat := make([]time.Duration, 0, n)
	begin := time.Now()
	for i := 0; i < n || time.Since(begin) < minDur; i++ {
		body := []byte(fmt.Sprintf("good-%d-%d", time.Now().UnixNano(), i))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		res, err := e.prod.SendSync(ctx, client.NewMessage("GOOD", body))
		d := time.Since(start)
		cancel()
		if err != nil || res.Status != client.SendOK {
			fails++
			e.t.Logf("well-behaved send failed: %v", err)
			continue
		}
		lat = append(lat, d)
		e.mu.Lock()
		e.acks = append(e.acks, ack{addr: res.Addr, offsetMsgID: res.OffsetMsgID, topic: "GOOD", body: body})
		e.mu.Unlock()
		if res.Addr != e.leaderAddr() && res.Addr != e.lastAck {
			e.t.Logf("leader moved from %s to %s", e.leaderAddr(), res.Addr)
		}
		e.lastAck = res.Addr
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		return 0, fails
	}
	return lat[min(len(lat)-1, len(lat)*99/100)], fails
}

// attack is one case: start begins the abuse and returns once it is in
// place (it may keep running in the background until ctx ends); check,
// run after the measurement, asserts the case's own outcomes and returns
// a detail for the report.
type attack struct {
	name string
	// bound is the most the leader's live heap may grow over its value
	// before the attack, for the profile's counts.
	bound func(profile) int64
	start func(ctx context.Context, e *env) (detail func() string)
}

// run measures the baseline, starts the attack, measures again under it
// and asserts the common outcomes.
func (e *env) run(a attack) {
	t := e.t
	t.Run(a.name, func(t *testing.T) {
		parent := e.t
		e.t = t // the case's helpers fail the case, not the suite
		defer func() { e.t = parent }()
		base, _ := e.probe(e.prof.probeSends, 0)
		lctx, lcancel := context.WithTimeout(context.Background(), 30*time.Second)
		l := e.currentLeader(lctx)
		if l == "" {
			l = e.lastAck
		}
		e.setLeader(l)
		lcancel()
		heapBase, liveBase := e.heap(), e.live()
		ctx, cancel := context.WithCancel(context.Background())
		detail := a.start(ctx, e)
		smp := e.sample() // the attack is in place: its first sample sees it
		p99, fails := e.probe(e.prof.probeSends, e.prof.attackFor)
		cancel()
		smp.finish()
		bound := a.bound(e.prof)
		r := caseResult{name: a.name, baseP99: base, p99: p99, heapBase: heapBase, heapMax: smp.heapMax, rssMax: smp.rssMax,
			liveBase: liveBase, liveMax: smp.liveMax,
			bound: bound, probeFails: fails, probeSent: e.prof.probeSends}
		if detail != nil {
			r.detail = detail()
		}
		e.mu.Lock()
		e.results = append(e.results, r)
		e.mu.Unlock()
		t.Logf("%s: p99 %v (baseline %v), live heap %d → %d MiB (bound +%d MiB), heap in use %d → %d MiB, RSS %d MiB; %s",
			a.name, p99, base, liveBase>>20, smp.liveMax>>20, bound>>20, heapBase>>20, smp.heapMax>>20, smp.rssMax>>20, r.detail)
		for _, n := range e.pc.Nodes {
			if n.Exited() {
				t.Fatalf("%s exited during %s", n.ID, a.name)
			}
		}
		if fails > 0 {
			t.Errorf("%d well-behaved sends failed", fails)
		}
		if smp.liveMax == 0 {
			t.Error("no live-heap sample (is pprofEnable on?)")
		}
		if grown := smp.liveMax - liveBase; grown > bound {
			t.Errorf("leader live heap grew %d MiB, bound %d MiB", grown>>20, bound>>20)
		}
		if limit := 2*base + p99Slack(); p99 > limit {
			// The CI profile's 150 probe sends share 2 cores with whatever
			// else the machine runs; its p99 reports, the full profile's
			// (RAFTMQ_ABUSE_FULL=1, a quiet box) asserts.
			report := t.Errorf
			if !e.prof.full {
				report = t.Logf
			}
			report("well-behaved p99 %v under attack, over 2× the baseline %v (+%v slack)", p99, base, p99Slack())
		}
	})
}

// checkAcks reads back every acknowledged message by its offset id.
func (e *env) checkAcks(extra []ack) {
	e.t.Helper()
	e.mu.Lock()
	acks := append(append([]ack(nil), e.acks...), extra...)
	e.mu.Unlock()
	// Tens of thousands of reads, each a round trip: a few readers at once.
	var lost atomic.Int64
	next := make(chan ack)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for a := range next {
				m, err := e.view(a.addr, a.offsetMsgID)
				if err != nil || m.Topic != a.topic || string(m.Body) != string(a.body) {
					if lost.Add(1) <= 5 {
						e.t.Errorf("acked message %s (%q) not read back: %v", a.offsetMsgID, a.body, err)
					}
				}
			}
		})
	}
	for _, a := range acks {
		next <- a
	}
	close(next)
	wg.Wait()
	e.t.Logf("%d acknowledged messages read back, %d missing", int64(len(acks))-lost.Load(), lost.Load())
}

// view reads a message by its offset id (VIEW_MESSAGE_BY_ID).
func (e *env) view(addr, offsetMsgID string) (*wire.Message, error) {
	id, err := wire.ParseMessageID(offsetMsgID)
	if err != nil {
		return nil, err
	}
	resp, err := e.call(addr, remoting.RequestViewMessageByID, map[string]string{"offset": strconv.FormatInt(id.Offset, 10)}, nil)
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.ResponseSuccess {
		return nil, fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
	}
	m, _, err := wire.DecodeMessage(resp.Body, true)
	return m, err
}

// call sends one request with extFields ext and waits for the answer.
// Sent to the leader the case targets, a not-leader answer (leadership
// moved mid-case) is followed to the current leader, which the case
// targets from then on.
func (e *env) call(addr string, code int16, ext map[string]string, body []byte) (*remoting.RemotingCommand, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		resp, err := e.rc.InvokeSync(ctx, addr, request(code, ext, body))
		if err != nil || addr != e.leaderAddr() || !notLeader(resp) {
			return resp, err
		}
		next := resp.ExtFields[wire.ExtLeaderAddr]
		if next == "" || next == addr {
			if next = e.currentLeader(ctx); next == "" {
				return resp, err
			}
		}
		e.t.Logf("leader moved from %s to %s", addr, next)
		e.setLeader(next)
		addr = next
	}
}

// notLeader reports whether resp is a raftmq member's not-leader answer.
func notLeader(resp *remoting.RemotingCommand) bool {
	switch resp.Code {
	case remoting.ResponseNotLeaderForQueue, remoting.ResponseServiceNotAvailable:
		return resp.ExtFields[wire.ExtLeaderAddr] != "" || wire.IsNotLeaderRemark(resp.Remark)
	}
	return false
}

// currentLeader asks every member for its Raft status until one leads and
// serves (past its barrier), and returns its address; "" when ctx ends
// first.
func (e *env) currentLeader(ctx context.Context) string {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		for _, n := range e.pc.Nodes {
			resp, err := e.rc.InvokeSync(ctx, n.Addr(), request(remoting.RequestRaftStatus, nil, nil))
			if err != nil || resp.Code != remoting.ResponseSuccess {
				continue
			}
			var st wire.RaftStatus
			if json.Unmarshal(resp.Body, &st) == nil && st.Serving {
				return n.Addr()
			}
		}
		select {
		case <-ctx.Done():
			return ""
		case <-t.C:
		}
	}
}

// request builds a request with extFields ext.
func request(code int16, ext map[string]string, body []byte) *remoting.RemotingCommand {
	req := remoting.NewRequest(code, nil, body)
	for k, v := range ext {
		req.ExtFields[k] = v
	}
	return req
}

// frame encodes a request as its whole frame.
func frame(t testing.TB, code int16, ext map[string]string, body []byte) []byte {
	f, err := remoting.EncodeFrame(request(code, ext, body))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// readFrame reads one frame from a raw connection.
func readFrame(r io.Reader) (*remoting.RemotingCommand, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(n[:]))
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return remoting.DecodeFrame(b)
}

// dial opens a raw connection to the leader.
func (e *env) dial() net.Conn {
	nc, err := net.DialTimeout("tcp", e.leaderAddr(), 5*time.Second)
	if err != nil {
		e.t.Fatalf("dial %s: %v", e.leaderAddr(), err)
	}
	return nc
}

// createTopic creates topic with queues queues on the leader (updateTopic
// is not an auto-creation and is not rate-limited).
func (e *env) createTopic(topic string, queues int) {
	q := strconv.Itoa(queues)
	resp, err := e.call(e.leaderAddr(), remoting.RequestUpdateAndCreateTopic, map[string]string{"topic": topic,
		"readQueueNums": q, "writeQueueNums": q, "perm": "6", "topicFilterType": "SINGLE_TAG"}, nil)
	if err != nil || resp.Code != remoting.ResponseSuccess {
		e.t.Fatalf("create topic %s: %v %v", topic, resp, err)
	}
}

// sendExt is a SEND_MESSAGE header to topic/queue with wire properties.
func sendExt(topic string, queueID int, props string) map[string]string {
	return map[string]string{
		"producerGroup": "ABUSER", "topic": topic, "defaultTopic": wire.TopicAutoCreate, "defaultTopicQueueNums": "4",
		"queueId": strconv.Itoa(queueID), "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
		"flag": "0", "properties": props, "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
	}
}

// pullExt is a PULL_MESSAGE header; suspend > 0 asks to be held.
func pullExt(group, topic string, queueID int, offset int64, suspend time.Duration) map[string]string {
	sys := "0"
	if suspend > 0 {
		sys = strconv.Itoa(int(wire.PullFlagSuspend))
	}
	return map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(queueID), "queueOffset": strconv.FormatInt(offset, 10),
		"maxMsgNums": "32", "sysFlag": sys, "commitOffset": "0", "suspendTimeoutMillis": strconv.FormatInt(suspend.Milliseconds(), 10),
		"subVersion": "0",
	}
}

// TestAbuseSuite runs every case against one cluster, in order, checks
// that the cases' helpers follow a leader change, then reads back
// everything acknowledged and prints the report.
func TestAbuseSuite(t *testing.T) {
	if os.Getenv("RAFTMQ_ABUSE") != "1" && os.Getenv("RAFTMQ_ABUSE_FULL") != "1" && os.Getenv("RAFTMQ_LONG") != "1" {
		t.Skip("the abuse suite (builds raftmq, then attacks a real-process cluster): RAFTMQ_ABUSE=1 go test -race ./abuse/, as .ci/run does")
	}
	e := startEnv(t)
	var extra []ack
	for _, a := range cases(&extra) {
		e.run(a)
	}
	t.Run("helpers follow a leader change", e.helpersFollowLeaderChange)
	e.checkAcks(extra)
	for _, n := range e.pc.Nodes {
		if n.Exited() {
			t.Errorf("%s is not running at the end", n.ID)
		}
	}
	e.report()
}

// report logs the suite's figures as a Markdown table (BENCHMARKS.md).
func (e *env) report() {
	var b strings.Builder
	profileName := "CI"
	if e.prof.full {
		profileName = "full"
	}
	fmt.Fprintf(&b, "abuse suite, %s profile (p99 slack %v):\n", profileName, p99Slack())
	b.WriteString("| case | well-behaved p99 baseline → under attack | leader live heap before → peak (bound) | heap in use before → peak | RSS peak | what the limits did |\n|---|---|---|---|---|---|\n")
	for _, r := range e.results {
		fmt.Fprintf(&b, "| %s | %.1f → %.1f ms | %d → %d MiB (+%d) | %d → %d MiB | %d MiB | %s |\n", r.name,
			float64(r.baseP99.Microseconds())/1000, float64(r.p99.Microseconds())/1000,
			r.liveBase>>20, r.liveMax>>20, r.bound>>20, r.heapBase>>20, r.heapMax>>20, r.rssMax>>20, r.detail)
	}
	e.t.Log("\n" + b.String())
}
