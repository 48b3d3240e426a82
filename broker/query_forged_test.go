package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestViewForgedMessageStart: a message body can hold bytes that name
// their own offset as PHYSICALOFFSET, as a stored message does. Viewed or
// sent back there, they fail the message checks: that is bad input
// answered as such, not a corrupt CommitLog entry (which the broker logs
// as damage). END_TRANSACTION reads through the same store method
// (MessageStore.ReadAppliedMessage, whose own test checks the log).
func TestViewForgedMessageStart(t *testing.T) {
	pc, _ := startFakeProc(t, nil)
	addr := pc.nodes[0].Addr()
	pc.createTopic(addr, "FORGE", 1)
	send := func(body []byte) int64 { return pc.sendAt(addr, "FORGE", body) }
	view := func(off int64) *remoting.RemotingCommand {
		return pc.call(addr, remoting.RequestViewMessageByID, map[string]string{"offset": strconv.FormatInt(off, 10)}, nil)
	}
	// The fake replica stores messages back to back: a probe of the same
	// shape says where the next message and its body land.
	body := make([]byte, 100)
	probe := send(body)
	raw := view(probe).Body
	at := bytes.Index(raw, body)
	if at < 0 {
		t.Fatal("probe body not found in its stored bytes")
	}
	fake := probe + int64(len(raw)) + int64(at) + 16
	binary.BigEndian.PutUint32(body[16:], 60)
	binary.BigEndian.PutUint32(body[16+wire.OffMagic:], 0xdeadbeef)
	binary.BigEndian.PutUint64(body[16+wire.OffPhysicalOffset:], uint64(fake))
	if got := send(body); got != probe+int64(len(raw)) {
		t.Fatalf("message stored at %d, want %d", got, probe+int64(len(raw)))
	}
	o := strconv.FormatInt(fake, 10)
	for name, r := range map[string]*remoting.RemotingCommand{
		"VIEW": view(fake),
		"SEND_BACK": pc.call(addr, remoting.RequestConsumerSendMsgBack,
			map[string]string{"offset": o, "group": "READER", "delayLevel": "0", "originMsgId": "x", "originTopic": "FORGE"}, nil),
	} {
		if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "no intact message starts at offset "+o) ||
			strings.Contains(r.Remark, "file") {
			t.Errorf("%s at a forged offset %s: code %d remark %q", name, o, r.Code, r.Remark)
		}
	}
}

// forgedMessage returns placeForged's forge for a complete, valid stored
// message of topic naming its own offset, as a producer can put in a body.
func forgedMessage(t *testing.T, topic string) func(phy int64) []byte {
	return func(phy int64) []byte {
		m := &wire.Message{Topic: topic, Body: []byte("forged"),
			BornHost: netip.MustParseAddrPort("127.0.0.1:1"), StoreHost: netip.MustParseAddrPort("127.0.0.1:2"),
			PhysicalOffset: phy, Properties: map[string]string{wire.PropertyUniqKey: "U-FORGED"}}
		m.EncodedProperties = wire.StoredProperties(m.Properties)
		b, err := wire.AppendMessage(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

// placeForged sends messages of topic carrier to addr until one's body,
// built by forge for the offset it will land at, lands there, and returns
// that offset: where the body's bytes read as the message forge built.
// VIEW_MESSAGE_BY_ID must refuse them there.
// Same-shape carriers land a fixed stride apart; the forged body is built
// for where the next one lands, and tried again if something else was
// appended in between.
func placeForged(t *testing.T, pc *procCluster, addr, carrier string, forge func(phy int64) []byte) int64 {
	t.Helper()
	send := func(body []byte) (int64, []byte) {
		t.Helper()
		off := pc.sendAt(addr, carrier, body)
		v := pc.call(addr, remoting.RequestViewMessageByID, map[string]string{"offset": strconv.FormatInt(off, 10)}, nil)
		if v.Code != remoting.ResponseSuccess {
			t.Fatalf("view %d: %d %s", off, v.Code, v.Remark)
		}
		return off, v.Body
	}
	placeholder := make([]byte, len(forge(0)))
	for range 5 {
		a, _ := send(placeholder)
		b, stored := send(placeholder)
		next := b + (b - a)
		fake := next + int64(bytes.Index(stored, placeholder))
		if got, _ := send(forge(fake)); got == next {
			// Viewed, the bytes decode as a message (the answer is not "no
			// intact message starts at"), and are refused as none stored.
			if v := pc.call(addr, remoting.RequestViewMessageByID, map[string]string{"offset": strconv.FormatInt(fake, 10)}, nil); v.Code != remoting.ResponseSystemError || !strings.Contains(v.Remark, "the bytes are not a stored message") {
				t.Fatalf("view of the forged message at %d: %d %q; want SYSTEM_ERROR saying the bytes are not a stored message", fake, v.Code, v.Remark)
			}
			return fake
		}
	}
	t.Fatal("could not place a forged message where predicted")
	return 0
}

// TestSendBackForgedMessage: a message body can hold a complete, valid
// message naming another topic and its own offset. CONSUMER_SEND_MSG_BACK
// at that offset must not put it into the group's retry topic as a
// message of that topic: the topic's queue has no unit there, though its
// first unit comes after. A real message of that topic still goes back.
func TestSendBackForgedMessage(t *testing.T) {
	t.Parallel()
	pc := startRealCluster(t, nil)
	l := pc.createTopicOnLeader("VICTIM", 1)
	addr := pc.nodes[l].Addr()
	fake := placeForged(t, pc, addr, "SBF-CARRIER", forgedMessage(t, "VICTIM"))
	realOff := sentOffset(t, "real", pc.call(addr, remoting.RequestSendMessage, sendExt("VICTIM", 0, ""), []byte("real")))
	sendBack := func(phy int64) *remoting.RemotingCommand {
		return pc.call(addr, remoting.RequestConsumerSendMsgBack, map[string]string{
			"offset": strconv.FormatInt(phy, 10), "group": "SBF", "delayLevel": "-1"}, nil)
	}
	if r := sendBack(fake); r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "the bytes are not a stored message") {
		t.Fatalf("send-back of a message forged inside a body at %d: %d %q", fake, r.Code, r.Remark)
	}
	if r := sendBack(realOff); r.Code != remoting.ResponseSuccess {
		t.Fatalf("send-back of the real message: %d %s", r.Code, r.Remark)
	}
	waitBodies(t, pc, wire.DLQGroupTopicPrefix+"SBF", 1, map[string]int{"real": 1})
}

// TestConsumeDirectlyForgedMessage: CONSUME_MESSAGE_DIRECTLY (the
// dashboard's resend) reads the message its offset msgId names and relays
// it to a consumer. A message forged inside a body must not reach the
// consumer as a message of the topic it names; a real one still does.
func TestConsumeDirectlyForgedMessage(t *testing.T) {
	pc, _ := startFakeProc(t, nil)
	addr := pc.nodes[0].Addr()
	pc.createTopic(addr, "CDF", 1)
	pc.createTopic(addr, "CDF-CARRIER", 1)

	var mu sync.Mutex
	var relayed []string // topic/body of each message the consumer got
	cli := remoting.NewClient(remoting.DefaultClientConfig(), zap.NewNop())
	t.Cleanup(func() { _ = cli.Close() })
	cli.RegisterProcessor(remoting.RequestConsumeMessageDirectly, func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		m, _, err := wire.DecodeMessage(req.Body, true)
		if err != nil {
			t.Errorf("relayed body: %v", err)
			return remoting.NewResponse(remoting.ResponseSystemError, err.Error()), nil
		}
		mu.Lock()
		relayed = append(relayed, m.Topic+"/"+string(m.Body))
		mu.Unlock()
		r := remoting.NewResponse(remoting.ResponseSuccess, "")
		r.Body, _ = json.Marshal(wire.ConsumeMessageDirectlyResult{ConsumeResult: wire.CMResultSuccess})
		return r, nil
	})
	const clientID = "127.0.0.1@cdf"
	hb, _ := json.Marshal(wire.HeartbeatData{ClientID: clientID, ConsumerDataSet: []wire.HeartbeatConsumerData{{
		GroupName: "CDG", ConsumeType: wire.ConsumeTypePush, MessageModel: "CLUSTERING", ConsumeFromWhere: "CONSUME_FROM_FIRST_OFFSET",
		SubscriptionDataSet: []*wire.SubscriptionData{{Topic: "CDF", SubString: "*", SubVersion: 1}}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r, err := cli.InvokeSync(ctx, addr, remoting.NewRequest(remoting.RequestHeartBeat, nil, hb)); err != nil || r.Code != remoting.ResponseSuccess {
		t.Fatalf("heartbeat: %v %v", r, err)
	}

	fake := placeForged(t, pc, addr, "CDF-CARRIER", forgedMessage(t, "CDF"))
	realOff := pc.sendAt(addr, "CDF", []byte("real"))
	direct := func(phy int64) *remoting.RemotingCommand {
		return pc.call(addr, remoting.RequestConsumeMessageDirectly, map[string]string{"consumerGroup": "CDG", "clientId": clientID,
			"msgId": wire.OffsetMsgID(netip.MustParseAddrPort(addr), phy), "topic": "CDF"}, nil)
	}
	if r := direct(fake); r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "the bytes are not a stored message") {
		t.Errorf("consume directly a message forged inside a body at %d: %d %q", fake, r.Code, r.Remark)
	}
	if r := direct(realOff); r.Code != remoting.ResponseSuccess {
		t.Fatalf("consume directly the real message: %d %s", r.Code, r.Remark)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(relayed) != 1 || relayed[0] != "CDF/real" {
		t.Fatalf("the consumer got %q, want only the real message", relayed)
	}
}

// TestCleanedTopicCreatedAgainChecksUnits: CLEAN_UNUSED_TOPIC retires every
// unit of a deleted topic's queues, whose old messages then go unchecked
// (their units are gone). Once the topic is created again, bytes past
// those messages are checked as before: a message forged inside a body,
// naming the topic, is neither shown nor sent back as one of its messages.
func TestCleanedTopicCreatedAgainChecksUnits(t *testing.T) {
	pc, _ := startFakeProc(t, nil)
	addr := pc.nodes[0].Addr()
	pc.createTopic(addr, "CUF", 1)
	pc.createTopic(addr, "CUF-CARRIER", 1)
	oldOff := pc.sendAt(addr, "CUF", []byte("old"))
	if r := pc.call(addr, remoting.RequestDeleteTopicInBroker, map[string]string{"topic": "CUF"}, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("delete topic: %d %s", r.Code, r.Remark)
	}
	if r := pc.call(addr, remoting.RequestCleanUnusedTopic, nil, nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("clean unused topic: %d %s", r.Code, r.Remark)
	}
	pc.createTopic(addr, "CUF", 1)
	if v := pc.call(addr, remoting.RequestViewMessageByID, map[string]string{"offset": strconv.FormatInt(oldOff, 10)}, nil); v.Code != remoting.ResponseSuccess {
		t.Fatalf("view of a message stored before the clean: %d %s", v.Code, v.Remark)
	}
	// placeForged fails unless VIEW_MESSAGE_BY_ID refuses the forged bytes.
	fake := placeForged(t, pc, addr, "CUF-CARRIER", forgedMessage(t, "CUF"))
	r := pc.call(addr, remoting.RequestConsumerSendMsgBack, map[string]string{
		"offset": strconv.FormatInt(fake, 10), "group": "CUG", "delayLevel": "-1"}, nil)
	if r.Code != remoting.ResponseSystemError || !strings.Contains(r.Remark, "the bytes are not a stored message") {
		t.Fatalf("send-back of a message forged inside a body at %d: %d %q", fake, r.Code, r.Remark)
	}
}

// TestViewForgedMessageBadBodyCRC: bytes inside a body can pass the
// entry CRC a read checks yet carry a BODYCRC that does not match their
// body, so they do not decode. VIEW_MESSAGE_BY_ID must refuse them with
// or without aclEnable, as it refuses bytes that decode: the broker
// writes no such message, and clients that do not check BODYCRC (RocketMQ's
// viewMessage) would show them as a message of the topic they name.
func TestViewForgedMessageBadBodyCRC(t *testing.T) {
	pc, _ := startFakeProc(t, nil)
	addr := pc.nodes[0].Addr()
	pc.createTopic(addr, "VBC", 1)
	pc.createTopic(addr, "VBC-CARRIER", 1)
	// placeForged fails unless VIEW_MESSAGE_BY_ID refuses the forged bytes.
	placeForged(t, pc, addr, "VBC-CARRIER", func(phy int64) []byte {
		b := forgedMessage(t, "VBC")(phy)
		binary.BigEndian.PutUint32(b[wire.OffBodyCRC:], binary.BigEndian.Uint32(b[wire.OffBodyCRC:])^1)
		wire.SealCRC(b)
		if _, _, err := wire.DecodeMessage(b, false); err == nil {
			t.Fatal("the forged bytes decode: the test no longer forges a bad BODYCRC")
		}
		if _, err := wire.CheckEntry(b, true); err != nil {
			t.Fatalf("the forged bytes fail the entry checks (%v): the test no longer forges an intact entry", err)
		}
		return b
	})
}
