package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

func TestParseTagExpression(t *testing.T) {
	for _, expr := range []string{"", "*", "  "} {
		sd, err := ParseTagExpression("T", expr, 1)
		if err != nil || sd.SubString != wire.SubAll || len(sd.TagsSet) != 0 || !sd.MatchesTag("") || !sd.MatchesTag("x") {
			t.Fatalf("%q: %+v %v", expr, sd, err)
		}
	}
	sd, err := ParseTagExpression("T", " TagA || TagB ||  || TagA", 7)
	if err != nil {
		t.Fatal(err)
	}
	// Java: "TagA".hashCode() == 2598919.
	if !reflect.DeepEqual(sd.TagsSet, []string{"TagA", "TagB"}) || string(sd.CodeSet) != "[2598919,2598920]" ||
		sd.SubString != " TagA || TagB ||  || TagA" || sd.SubVersion != 7 || sd.ExpressionType != "TAG" {
		t.Fatalf("%+v", sd)
	}
	if !sd.MatchesTag("TagB") || sd.MatchesTag("TagC") || sd.MatchesTag("") {
		t.Fatal("tag matching")
	}
	if _, err := ParseTagExpression("T", "|| ||", 1); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("empty tags: %v", err)
	}
	var back map[string]any
	if err := json.Unmarshal(sd.JSON(), &back); err != nil || back["subString"] != sd.SubString || back["classFilterMode"] != false {
		t.Fatalf("json %s: %v", sd.JSON(), err)
	}
}

// pullBroker answers PULL_MESSAGE with answer.
func pullBroker(t *testing.T, answer func(req *remoting.RemotingCommand) *remoting.RemotingCommand) (string, *remoting.Client) {
	srv := remoting.NewServer(remoting.ServerConfig{}, nil)
	srv.Register(remoting.RequestPullMessage, func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		return answer(req), nil
	}, 1, 16)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	rc := remoting.NewClient(remoting.ClientConfig{}, nil)
	t.Cleanup(func() {
		_ = rc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv.Addr().String(), rc
}

func TestPullMessage(t *testing.T) {
	var got *remoting.RemotingCommand
	var body []byte
	for i, tag := range []string{"TagA", "TagB", "TagA", ""} {
		props := ""
		if tag != "" {
			props = wire.EncodeProperties(map[string]string{"TAGS": tag})
		}
		body = append(body, encodeStored(t, storedMessage{topic: "T", body: []byte(strconv.Itoa(i)), props: props, queueID: 2, queueOffset: int64(10 + i)})...)
	}
	code := remoting.ResponseSuccess
	addr, rc := pullBroker(t, func(req *remoting.RemotingCommand) *remoting.RemotingCommand {
		got = req
		resp := remoting.NewResponse(code, "")
		resp.ExtFields = map[string]string{"nextBeginOffset": "14", "minOffset": "0", "maxOffset": "20", "suggestWhichBrokerId": "1"}
		if code == remoting.ResponseSuccess {
			resp.Body = body
		}
		return resp
	})
	sub, _ := ParseTagExpression("T", "TagA", 5)
	req := &PullRequest{Group: "G", Queue: MessageQueue{"T", "b", 2}, Offset: 10, MaxMsgNums: 32,
		SysFlag: wire.PullFlagSuspend | wire.PullFlagSubscription, SuspendMillis: 15000, Subscription: sub}
	res, err := PullMessage(context.Background(), rc, addr, req)
	if err != nil {
		t.Fatal(err)
	}
	h := got.ExtFields
	if h["consumerGroup"] != "G" || h["topic"] != "T" || h["queueId"] != "2" || h["queueOffset"] != "10" || h["maxMsgNums"] != "32" ||
		h["sysFlag"] != "6" || h["suspendTimeoutMillis"] != "15000" || h["subscription"] != "TagA" || h["subVersion"] != "5" || h["expressionType"] != "TAG" {
		t.Fatalf("request header %v", h)
	}
	if res.Status != PullFound || res.NextBeginOffset != 14 || res.MaxOffset != 20 || res.SuggestWhichBrokerID != 1 || len(res.Messages) != 2 {
		t.Fatalf("result %+v", res)
	}
	for _, m := range res.Messages {
		if m.Tags != "TagA" || m.Properties[wire.PropertyMaxOffset] != "20" || m.Properties[wire.PropertyMinOffset] != "0" || m.ServedBy != addr {
			t.Fatalf("message %+v", m)
		}
	}
	// "*" keeps everything, including untagged messages.
	req.Subscription, _ = ParseTagExpression("T", "*", 5)
	if res, err := PullMessage(context.Background(), rc, addr, req); err != nil || len(res.Messages) != 4 {
		t.Fatalf("all: %v %v", res, err)
	}
	for c, want := range map[int16]PullStatus{remoting.ResponsePullNotFound: PullNoNewMsg, remoting.ResponsePullRetryImmediately: PullNoMatchedMsg, remoting.ResponsePullOffsetMoved: PullOffsetIllegal} {
		code = c
		res, err := PullMessage(context.Background(), rc, addr, req)
		if err != nil || res.Status != want || res.NextBeginOffset != 14 || len(res.Messages) != 0 || want.String() == "" {
			t.Fatalf("code %d: %+v %v", c, res, err)
		}
	}
	code = remoting.ResponseSystemBusy
	var be *BrokerError
	if _, err := PullMessage(context.Background(), rc, addr, req); !errors.As(err, &be) || !errors.Is(err, remoting.ErrServerBusy) {
		t.Fatalf("busy: %v", err)
	}
	// A body that breaks after two entries yields those two and resumes after them.
	code = remoting.ResponseSuccess
	body = body[:len(body)-5]
	res, err = PullMessage(context.Background(), rc, addr, req)
	if err != nil || len(res.Messages) != 3 || res.NextBeginOffset != 13 {
		t.Fatalf("truncated body: %+v %v", res, err)
	}
}

// TestPullUndecodableMessage: a found message whose body cannot be decoded
// ends the batch before it; first in a batch, it fails the pull with an
// *UndecodableMessageError holding it as stored (stamped with the pulled
// queue), unless the subscription would not take it anyway: then it is
// passed over like any other message filtered out.
func TestPullUndecodableMessage(t *testing.T) {
	good := func(off int64, tags string) []byte {
		return encodeStored(t, storedMessage{topic: "T", body: []byte("ok"), queueID: 9, queueOffset: off, props: wire.EncodeProperties(map[string]string{"TAGS": tags})})
	}
	badBody := []byte("zstd? no")
	bad := encodeStored(t, storedMessage{topic: "T", body: badBody, sysFlag: SysFlagZstd, queueID: 9, queueOffset: 6, physical: 600,
		props: wire.EncodeProperties(map[string]string{"TAGS": "B", "UNIQ_KEY": "BAD"})})
	resp := func(body []byte) *remoting.RemotingCommand {
		r := remoting.NewResponse(remoting.ResponseSuccess, "")
		r.ExtFields = map[string]string{"nextBeginOffset": "8", "minOffset": "0", "maxOffset": "8", "suggestWhichBrokerId": "0"}
		r.Body = body
		return r
	}
	mq := MessageQueue{Topic: "T", BrokerName: "b", QueueID: 3}
	all, _ := ParseTagExpression("T", "*", 1)
	onlyA, _ := ParseTagExpression("T", "A", 1)

	res, err := parsePullResponse("a:1", &PullRequest{Queue: mq, Subscription: all}, resp(slices.Concat(good(5, "A"), bad, good(7, "A"))))
	if err != nil || len(res.Messages) != 1 || res.Messages[0].QueueOffset != 5 || res.NextBeginOffset != 6 {
		t.Fatalf("bad message second: %+v, err %v; want the first, next 6", res, err)
	}
	_, err = parsePullResponse("a:1", &PullRequest{Queue: mq, Subscription: all}, resp(slices.Concat(bad, good(7, "A"))))
	var ue *UndecodableMessageError
	if !errors.As(err, &ue) || !errors.Is(err, ErrMalformedMessage) {
		t.Fatalf("bad message first: err %v", err)
	}
	if m := ue.Message; m.MsgID != "BAD" || m.QueueOffset != 6 || m.CommitLogOffset != 600 || m.QueueID != 3 || !bytes.Equal(m.Body, badBody) ||
		m.SysFlag != SysFlagZstd || !strings.Contains(err.Error(), "zstd") {
		t.Fatalf("undecodable message %+v (%v)", m, err)
	}
	res, err = parsePullResponse("a:1", &PullRequest{Queue: mq, Subscription: onlyA}, resp(slices.Concat(bad, good(7, "A"))))
	if err != nil || len(res.Messages) != 0 || res.NextBeginOffset != 7 {
		t.Fatalf("bad message first, filtered out: %+v, err %v; want none, next 7", res, err)
	}
}

// TestPullInflateBudget: each compressed body is bounded by the inflate
// limit, and one pull's bodies together by pullInflateBudget: a batch of
// bodies that inflate to the limit ends before the one that would pass
// the budget (the first is always taken), and the next pull starts there
// instead of holding a gigabyte for one queue.
func TestPullInflateBudget(t *testing.T) {
	// Under the per-message limit, and just over a quarter of the budget:
	// three fit, the fourth passes it. Under -race every inflated page
	// costs page faults for it and its shadow, so the pull inflates
	// little more than the budget.
	const each = 17 << 20
	big := JavaZstd(t, make([]byte, each))
	var body []byte
	for off := int64(10); off < 14; off++ {
		body = append(body, encodeStored(t, storedMessage{topic: "T", body: big, sysFlag: SysFlagZstd, queueOffset: off})...)
	}
	r := remoting.NewResponse(remoting.ResponseSuccess, "")
	r.ExtFields = map[string]string{"nextBeginOffset": "14", "minOffset": "0", "maxOffset": "14", "suggestWhichBrokerId": "0"}
	r.Body = body
	all, _ := ParseTagExpression("T", "*", 1)
	res, err := parsePullResponse("a:1", &PullRequest{Queue: MessageQueue{Topic: "T", BrokerName: "b"}, Subscription: all}, r)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(res.Messages); n != pullInflateBudget/each || n >= 4 || res.NextBeginOffset != 10+int64(n) {
		t.Fatalf("pull of 4 bodies inflating to %d bytes each: %d messages, next %d; want %d and next %d",
			each, n, res.NextBeginOffset, pullInflateBudget/each, 10+pullInflateBudget/each)
	}
	for _, m := range res.Messages {
		if len(m.Body) != each {
			t.Fatalf("message %d: body %d bytes, want %d", m.QueueOffset, len(m.Body), each)
		}
	}

	// The budget's edges, on small bodies: one body alone is taken
	// whatever the budget, or the queue could not move; bodies that reach
	// the budget exactly are all taken, the next one is not.
	const small = 4 << 10
	zs := JavaZstd(t, make([]byte, small))
	var smalls []byte
	for off := int64(0); off < 4; off++ {
		smalls = append(smalls, encodeStored(t, storedMessage{topic: "T", body: zs, sysFlag: SysFlagZstd, queueOffset: off})...)
	}
	for _, c := range []struct{ budget, want int }{{1, 1}, {small - 1, 1}, {2 * small, 2}, {2*small + 1, 2}, {3*small - 1, 2}} {
		msgs, more, err := decodeMessages(smalls, DecodeOptions{}, c.budget)
		if err != nil || len(msgs) != c.want || !more {
			t.Fatalf("budget %d over bodies of %d bytes: %d messages, more %v, err %v; want %d and more", c.budget, small, len(msgs), more, err, c.want)
		}
	}
	if msgs, more, err := decodeMessages(smalls, DecodeOptions{}, 4*small); err != nil || len(msgs) != 4 || more {
		t.Fatalf("budget of all 4 bodies: %d messages, more %v, err %v; want 4 and no more", len(msgs), more, err)
	}
}
