package broker

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestBadRequests: each malformed or illegal request gets RocketMQ's code
// and a remark naming what was wrong, and the broker keeps serving.
func TestBadRequests(t *testing.T) {
	tc, _ := startFakeProc(t, func(c *BrokerConfig) { c.AutoCreateTopicEnable = false })
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "T1", 4)

	missing := sendExt("T1", 0, "")
	delete(missing, "queueId")
	cases := []struct {
		name   string
		code   int16
		ext    map[string]string
		body   []byte
		want   int16
		remark string
	}{
		{"missing header field", remoting.RequestSendMessage, missing, []byte("x"), remoting.ResponseSystemError, "queueId"},
		{"unknown topic, no auto-create", remoting.RequestSendMessage, sendExt("NOPE", 0, ""), []byte("x"), remoting.ResponseTopicNotExist, "NOPE"},
		{"oversize body", remoting.RequestSendMessage, sendExt("T1", 0, ""), make([]byte, 1<<20+1), remoting.ResponseMessageIllegal, "maxMessageSize"},
		{"queueId out of range", remoting.RequestSendMessage, sendExt("T1", 9, ""), []byte("x"), remoting.ResponseSystemError, "queueId[9]"},
		{"illegal topic characters", remoting.RequestSendMessage, sendExt("bad topic!", 0, ""), []byte("x"), remoting.ResponseInvalidParameter, "illegal characters"},
		{"over-long topic", remoting.RequestSendMessage, sendExt(strings.Repeat("t", 200), 0, ""), []byte("x"), remoting.ResponseInvalidParameter, "longer than 127"},
		{"over-long group", remoting.RequestPullMessage, pullExt(strings.Repeat("g", 300), "T1", 0, 0, 0), nil, remoting.ResponseInvalidParameter, "longer than 255"},
		{"pull bad queueId", remoting.RequestPullMessage, pullExt("G", "T1", 7, 0, 0), nil, remoting.ResponseSystemError, "queueId[7]"},
		{"pull malformed offset", remoting.RequestPullMessage, func() map[string]string {
			m := pullExt("G", "T1", 0, 0, 0)
			m["queueOffset"] = "abc"
			return m
		}(), nil, remoting.ResponseSystemError, "queueOffset"},
		{"system topic", remoting.RequestSendMessage, sendExt(wire.TopicSchedule, 0, ""), []byte("x"), remoting.ResponseNoPermission, wire.TopicSchedule},
		{"bad delay", remoting.RequestSendMessage, sendExt("T1", 0, "DELAY\x01x\x02"), []byte("x"), remoting.ResponseMessageIllegal, "DELAY"},
		{"unknown code", 9999, nil, nil, remoting.ResponseRequestCodeNotSupported, "9999"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := tc.call(addr, c.code, c.ext, c.body)
			if resp.Code != c.want || !strings.Contains(resp.Remark, c.remark) {
				t.Fatalf("got code %d remark %q; want code %d with remark containing %q", resp.Code, resp.Remark, c.want, c.remark)
			}
		})
	}
	// Still up: a good send works.
	if resp := tc.call(addr, remoting.RequestSendMessage, sendExt("T1", 1, ""), []byte("ok")); resp.Code != remoting.ResponseSuccess {
		t.Fatalf("good send after bad ones: %d %s", resp.Code, resp.Remark)
	}
}

// TestNotLeaderAnswer: a follower refuses writes with SERVICE_NOT_AVAILABLE
// naming the leader (broker-plan decision 5). It sends a pull of a topic or
// queue it does not know there too: it may not have applied the creation
// yet (one restarted moments ago replays its log), and TOPIC_NOT_EXIST
// would make clients back off for seconds. It still serves the topics it
// knows. The admin writes that decide on the state (clone and reset
// offsets) refuse before reading it: a follower's lagging state made
// cloneGroupOffset answer success with nothing cloned, and a reset
// answer TOPIC_NOT_EXIST, where the leader would have done the write.
func TestNotLeaderAnswer(t *testing.T) {
	tc, rep := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "T1", 2)
	rep.setLeader(false, "127.0.0.1:1")
	for _, c := range []struct {
		name string
		code int16
		ext  map[string]string
		body []byte
	}{
		{"send", remoting.RequestSendMessage, sendExt("T1", 0, ""), []byte("x")},
		{"pull of an unknown topic", remoting.RequestPullMessage, pullExt("G", "NotYetApplied", 0, 0, 0), nil},
		{"pull of an unknown queue", remoting.RequestPullMessage, pullExt("G", "T1", 5, 0, 0), nil},
		{"clone of a topic not applied yet", remoting.RequestCloneGroupOffset,
			map[string]string{"srcGroup": "S", "destGroup": "D", "topic": "NotYetApplied", "offline": "true"}, nil},
		{"clone of a group without offsets here", remoting.RequestCloneGroupOffset,
			map[string]string{"srcGroup": "S", "destGroup": "D", "offline": "true"}, nil},
		{"reset of a topic not applied yet", remoting.RequestInvokeBrokerToResetOffset,
			map[string]string{"topic": "NotYetApplied", "group": "G", "timestamp": "0", "isForce": "true"}, nil},
		{"delete topic", remoting.RequestDeleteTopicInBroker, map[string]string{"topic": "T1"}, nil},
		{"delete group with its offsets", remoting.RequestDeleteSubscriptionGroup, map[string]string{"groupName": "G", "cleanOffset": "true"}, nil},
	} {
		resp := tc.call(addr, c.code, c.ext, c.body)
		if resp.Code != remoting.ResponseServiceNotAvailable || resp.ExtFields[wire.ExtLeaderAddr] != "127.0.0.1:1" ||
			!strings.Contains(resp.Remark, "leader is 127.0.0.1:1") {
			t.Fatalf("follower %s: %d %q %v", c.name, resp.Code, resp.Remark, resp.ExtFields)
		}
	}
	if resp := tc.call(addr, remoting.RequestPullMessage, pullExt("G", "T1", 1, 0, 0), nil); resp.Code != remoting.ResponsePullNotFound {
		t.Fatalf("follower pull of a known empty queue: %d %q", resp.Code, resp.Remark)
	}
}

// TestLongPolling: a pull on an empty queue is held and answered as soon
// as a message is committed (p99 of the wake-up under 50 ms), and with
// PULL_NOT_FOUND after its suspend timeout when nothing arrives.
func TestLongPolling(t *testing.T) {
	t.Run("fake", func(t *testing.T) {
		tc, _ := startFakeProc(t, nil)
		checkLongPolling(t, tc, tc.nodes[0])
	})
	t.Run("raft", func(t *testing.T) {
		tc := startRealCluster(t, nil)
		checkLongPolling(t, tc, tc.nodes[tc.leader()])
	})
}

// TestFollowerHoldsPull: a pull with the suspend flag that finds nothing
// on a follower is parked there as on the leader, and answered with the
// message once the follower applies it. Answered at once instead, a
// consumer reading from a follower (its leader marked down, or its route
// not refreshed yet) would pull again as fast as the follower answers.
// The answer names the leader, where the SDK reads from next.
func TestFollowerHoldsPull(t *testing.T) {
	tc := startRealCluster(t, nil)
	li := tc.leader()
	leader, follower := tc.nodes[li], tc.nodes[(li+1)%len(tc.nodes)]
	tc.createTopic(leader.Addr(), "FH", 1)
	testutil.WaitFor(t, 10*time.Second, "the follower applied the topic", func() bool {
		_, ok := follower.rep.State().Topic("FH")
		return ok
	})
	ch := tc.parkPull(follower, pullExt("G", "FH", 0, 0, 20000))
	if sent := tc.call(leader.Addr(), remoting.RequestSendMessage, sendExt("FH", 0, ""), []byte("m")); sent.Code != remoting.ResponseSuccess {
		t.Fatalf("send: %d %s", sent.Code, sent.Remark)
	}
	r := <-ch
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("held pull at the follower answered %d %q", r.Code, r.Remark)
	}
	if msgs := decodeAll(t, r.Body); len(msgs) != 1 || string(msgs[0].Body) != "m" {
		t.Fatalf("held pull at the follower got %d messages", len(msgs))
	}
	// The follower names the leader, where the SDK reads from next; the
	// leader's own answer names nobody.
	var h wire.PullMessageResponseHeader
	if err := r.DecodeHeader(&h); err != nil || h.LeaderAddr != leader.Addr() {
		t.Fatalf("follower's pull answer names leader %q (%v), want %s", h.LeaderAddr, err, leader.Addr())
	}
	lr := tc.call(leader.Addr(), remoting.RequestPullMessage, pullExt("G", "FH", 0, 0, 0), nil)
	h = wire.PullMessageResponseHeader{}
	if err := lr.DecodeHeader(&h); lr.Code != remoting.ResponseSuccess || err != nil || h.LeaderAddr != "" {
		t.Fatalf("leader's pull answer: code %d, leader %q, %v", lr.Code, h.LeaderAddr, err)
	}
}

// longPollRounds is the number of measured wake-ups (≥ 200 so p99 is not
// just the maximum of a handful).
const longPollRounds = 200

func checkLongPolling(t *testing.T, tc *procCluster, node *Controller) {
	addr := node.Addr()
	tc.createTopic(addr, "LP", 1)

	// Timeout path.
	start := time.Now()
	resp := tc.call(addr, remoting.RequestPullMessage, pullExt("G", "LP", 0, 0, 300), nil)
	if el := time.Since(start); resp.Code != remoting.ResponsePullNotFound || el < 250*time.Millisecond || el > 2*time.Second {
		t.Fatalf("held pull without message: code %d after %v", resp.Code, el)
	}

	// Wake-up path, measured over enough rounds for a meaningful p99.
	var lat []time.Duration
	for i := int64(0); i < longPollRounds; i++ {
		type res struct {
			resp *remoting.RemotingCommand
			at   time.Time
		}
		ch := make(chan res, 1)
		go func() {
			req := remoting.NewRequest(remoting.RequestPullMessage, nil, nil)
			for k, v := range pullExt("G", "LP", 0, i, 10000) {
				req.ExtFields[k] = v
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			r, err := tc.client.InvokeSync(ctx, addr, req)
			if err != nil {
				r = remoting.NewResponse(-1, err.Error())
			}
			ch <- res{r, time.Now()}
		}()
		// Wait until the pull is parked, then commit a message.
		testutil.WaitFor(t, 10*time.Second, "pull parked", func() bool { return node.hold.heldCount() > 0 })
		// The wake-up is measured from the send's start: an upper bound of
		// the time from commit to answer.
		committed := time.Now()
		sent := tc.call(addr, remoting.RequestSendMessage, sendExt("LP", 0, ""), []byte("m"))
		if sent.Code != remoting.ResponseSuccess {
			t.Fatalf("send: %d %s", sent.Code, sent.Remark)
		}
		r := <-ch
		if r.resp.Code != remoting.ResponseSuccess {
			t.Fatalf("round %d: held pull answered %d %q", i, r.resp.Code, r.resp.Remark)
		}
		msgs := decodeAll(t, r.resp.Body)
		if len(msgs) != 1 || msgs[0].QueueOffset != i {
			t.Fatalf("round %d: got %d messages (first offset %v)", i, len(msgs), msgs)
		}
		lat = append(lat, max(r.at.Sub(committed), 0))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p99 := lat[len(lat)*99/100]
	t.Logf("long-poll wake-up after commit, %d rounds: p50 %v p90 %v p99 %v max %v", len(lat),
		lat[len(lat)/2], lat[len(lat)*9/10], p99, lat[len(lat)-1])
	// The goal is p99 ≤ 50 ms (logged above); the assertion is generous
	// because the 2-core test machine is shared.
	if p99 > time.Second {
		t.Fatalf("wake-up p99 %v above 1s", p99)
	}
}

// decodeAll decodes a pull or query body the way clients do (the SDK's
// decoder; pulled copies carry a patched QUEUEOFFSET, which the store's
// entry CRC does not cover, so the store's own verifying decoder is not
// the right tool here).
func decodeAll(t *testing.T, b []byte) []*client.MessageExt {
	t.Helper()
	msgs, err := client.DecodeMessages(b)
	if err != nil {
		t.Fatalf("decode pulled messages: %v", err)
	}
	return msgs
}

// TestTransactionHalfRefused: on a Replica that cannot decide transactions
// (the fake), a transaction's half message (prepared
// sysflag, or the TRAN_MSG property RocketMQ's broker reads) is refused
// with NO_PERMISSION and a remark saying why, and nothing is stored: the
// next plain message on that queue gets offset 0.
func TestTransactionHalfRefused(t *testing.T) {
	tc, _ := startFakeProc(t, nil)
	addr := tc.nodes[0].Addr()
	tc.createTopic(addr, "TX", 4)
	bySysFlag := sendExt("TX", 2, "")
	bySysFlag["sysFlag"] = strconv.Itoa(int(wire.SysFlagTransPrepared))
	byProperty := sendExt("TX", 2, wire.PropertyTransactionPrep+"\x01TRUE\x02")
	for name, ext := range map[string]map[string]string{"sysflag": bySysFlag, "property": byProperty} {
		resp := tc.call(addr, remoting.RequestSendMessage, ext, []byte("half"))
		if resp.Code != remoting.ResponseNoPermission || !strings.Contains(resp.Remark, "transactional") {
			t.Fatalf("%s: half message answered %d %q; want NO_PERMISSION naming transactions", name, resp.Code, resp.Remark)
		}
	}
	notHalf := sendExt("TX", 2, wire.PropertyTransactionPrep+"\x01false\x02")
	resp := tc.call(addr, remoting.RequestSendMessage, notHalf, []byte("plain"))
	if resp.Code != remoting.ResponseSuccess || resp.ExtFields["queueOffset"] != "0" {
		t.Fatalf("plain send after refused halves: %d %q offset %q; want success at offset 0",
			resp.Code, resp.Remark, resp.ExtFields["queueOffset"])
	}
}
