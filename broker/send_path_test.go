package broker

import (
	"bytes"
	"context"
	"maps"
	"net/netip"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// Per-request CPU of the send processor on the connection's reader: the
// request frame is decoded, checked and encoded into the stored format the
// batcher takes (Group.encodeRequest), and the answer is built and encoded
// into a response frame, as on the asynchronous path of `raftmq dev`.
// Everything but Raft, the batcher's goroutine and the socket.

// pathReplica is a Replica for the send-path benchmarks: the real state
// table, and PutMessagesAsync doing what Group.PutMessagesAsync and the
// entry's waiter do on the send's CPU path (encodeRequest, msgId per
// result, done) without Raft.
type pathReplica struct {
	Replica // the methods the send path does not call
	g       *Group
	st      *state
	last    *putRequest // what the batcher would have received
	offset  int64
}

func newPathReplica(topics ...wire.TopicConfig) *pathReplica {
	gc := DefaultGroupConfig()
	gc.Store.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	r := &pathReplica{g: &Group{cfg: gc}, st: newState(gc.DedupWindow, 0)}
	for _, tc := range topics {
		r.st.topics[tc.TopicName] = tc
	}
	return r
}

func (r *pathReplica) IsLeader() bool                                      { return true }
func (r *pathReplica) LeaderAddr() string                                  { return "127.0.0.1:10911" }
func (r *pathReplica) State() StateReader                                  { return r.st }
func (r *pathReplica) Store() *store.MessageStore                          { return nil }
func (r *pathReplica) OnRoleChange(func(bool, uint64))                     {}
func (r *pathReplica) CommitOffsets(context.Context, []OffsetCommit) error { return nil }

func (r *pathReplica) PutMessagesAsync(_ context.Context, msgs []*store.Message, done func([]PutResult, error)) {
	pr, err := r.g.encodeRequest(msgs)
	if err != nil {
		done(nil, err)
		return
	}
	r.last = pr
	res := make([]PutResult, len(msgs))
	for i, m := range msgs {
		res[i] = PutResult{QueueID: m.QueueID, QueueOffset: r.offset, PhysicalOffset: r.offset * 1200}
		res[i].MsgID = wire.OffsetMsgID(r.g.cfg.Store.StoreHost, res[i].PhysicalOffset)
		r.offset++
	}
	done(res, nil)
}

// frameResponder answers like remoting's Responder: the response frame is
// encoded as Conn.WriteResponse does, and kept for inspection.
type frameResponder struct {
	req   *remoting.RemotingCommand
	resp  *remoting.RemotingCommand
	frame []byte
}

func (f *frameResponder) Respond(resp *remoting.RemotingCommand) bool {
	resp.Opaque, resp.SerializeType = f.req.Opaque, f.req.SerializeType
	resp.Flag = (resp.Flag | remoting.FlagResponse) &^ remoting.FlagOneway
	frame, err := remoting.EncodeFrame(resp)
	if err != nil {
		panic(err)
	}
	f.resp, f.frame = resp, frame
	return true
}

// newPathController is a controller over r that never starts (no sockets).
func newPathController(tb testing.TB, r Replica) *Controller {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.ListenAddr, cfg.BrokerIP1, cfg.ListenPort = "127.0.0.1", "127.0.0.1", 10911
	cfg.VipChannelEnabled, cfg.GossipEnable, cfg.MetricsPort = false, false, -1
	c, err := New(cfg, r, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	return c
}

// sdkSendFrame is a SEND_MESSAGE_V2 frame as the raftmq SDK sends it
// (ROCKETMQ header, a…n names, UNIQ_KEY only), without the length field.
func sdkSendFrame(tb testing.TB, topic string, props string, body []byte) []byte {
	tb.Helper()
	req := remoting.NewRequest(remoting.RequestSendMessageV2, nil, body)
	req.SerializeType = remoting.SerializeRocketMQ
	req.ExtFields = map[string]string{"a": "benchmark_producer", "b": topic, "c": wire.TopicAutoCreate, "d": "4", "e": "3",
		"f": "0", "g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": props, "j": "0", "k": "false",
		"m": "false", "n": "broker-a"}
	f, err := remoting.EncodeFrame(req)
	if err != nil {
		tb.Fatal(err)
	}
	return f[4:]
}

// officialSendFrame is a SEND_MESSAGE frame like the official Go client's
// (JSON header, long names, properties in map order).
func officialSendFrame(tb testing.TB, topic string, body []byte) []byte {
	tb.Helper()
	req := remoting.NewRequest(remoting.RequestSendMessage, nil, body)
	req.SerializeType = remoting.SerializeJSON
	req.ExtFields = sendExt(topic, 3, "WAIT\x01true\x02UNIQ_KEY\x017F0000010C9418B4AAC2A1C4F3E80001\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02")
	f, err := remoting.EncodeFrame(req)
	if err != nil {
		tb.Fatal(err)
	}
	return f[4:]
}

// runSend takes one request frame through the reader's path: decode, the
// inline choice, the instrumented handler, the answer.
func runSend(tb testing.TB, c *Controller, h remoting.AsyncHandlerFunc, fr *frameResponder, frame []byte) {
	runSendDecoded(tb, c, h, fr, frame, remoting.DecodeFrame)
}

// runSendDecoded is runSend with the frame decoded by decode
// (remoting.DecodeFrameRawExt is what the server does for sends: LazyExt).
func runSendDecoded(tb testing.TB, c *Controller, h remoting.AsyncHandlerFunc, fr *frameResponder, frame []byte,
	decode func([]byte) (*remoting.RemotingCommand, error)) {
	req, err := decode(frame)
	if err != nil {
		tb.Fatal(err)
	}
	if !c.sendInline(req) {
		tb.Fatal("send not inline")
	}
	fr.req, fr.resp = req, nil
	resp, err := h(context.Background(), nil, req, nil)
	if err != nil || resp != nil || fr.resp == nil || fr.resp.Code != remoting.ResponseSuccess {
		tb.Fatalf("send answered %v / %v / %+v", resp, err, fr.resp)
	}
}

func BenchmarkSendPath(b *testing.B) {
	body := make([]byte, 1024)
	sdk := sdkSendFrame(b, "BenchTopic", "UNIQ_KEY\x017F0000010C9418B4AAC2A1C4F3E80001\x02", body)
	cases := []struct {
		name   string
		frame  []byte
		decode func([]byte) (*remoting.RemotingCommand, error)
	}{
		{"sdk", sdk, remoting.DecodeFrame},
		{"sdk-lazyext", sdk, remoting.DecodeFrameRawExt}, // the server's decode with LazyExt
		{"official", officialSendFrame(b, "BenchTopic", body), remoting.DecodeFrameRawExt},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			r := newPathReplica(testTopicConfig("BenchTopic", 8))
			c := newPathController(b, r)
			fr := &frameResponder{}
			h := c.instrumentAsync(func(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand, _ *remoting.Responder) (*remoting.RemotingCommand, error) {
				return c.sendAsync(ctx, conn, req, fr)
			})
			b.ReportAllocs()
			for b.Loop() {
				runSendDecoded(b, c, h, fr, tc.frame, tc.decode)
			}
		})
	}
}

// TestSendDirectPropertiesStoredAlike: the asynchronous path's messages
// (properties straight from the wire, no map where nothing reads one) are
// stored byte for byte like the map path's, for the properties shapes the
// SDK and the official client send and for malformed ones; properties that
// later code reads from the map (DELAY, the idempotent producer id,
// WAIT=false, retry topics) keep the map.
func TestSendDirectPropertiesStoredAlike(t *testing.T) {
	r := newPathReplica(testTopicConfig("T", 8), testTopicConfig("%RETRY%g", 1),
		testTopicConfig(wire.TopicSchedule, 18), testTopicConfig("%DLQ%g", 1))
	c := newPathController(t, r)
	cases := []struct {
		topic, props string
		wantMap      bool
	}{
		{"T", "UNIQ_KEY\x017F0000010C9418B4AAC2A1C4F3E80001\x02", false},
		{"T", "WAIT\x01true\x02UNIQ_KEY\x01u\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02", false},
		{"T", "", false},
		{"T", "B\x011\x02A\x01x\x02B\x012\x02junk\x02__CRC32#\x011\x02", false},
		{"T", "UNIQ_KEY\x01u\x02DELAY\x012\x02", true},
		{"T", "UNIQ_KEY\x01u\x02__RAFTMQ_PID\x01p\x02__RAFTMQ_SEQ\x017\x02", true},
		{"T", "WAIT\x01false\x02", true},
		{"%RETRY%g", "UNIQ_KEY\x01u\x02", true},
	}
	for _, tc := range cases {
		var stored [3][]byte
		frame := sdkSendFrame(t, tc.topic, tc.props, []byte("body"))
		if tc.topic != "T" { // queue 0, and maxReconsumeTimes: becomes MAX_RECONSUME_TIMES
			frame = sendFrameWith(t, frame, map[string]string{"e": "0", "l": "5"})
		}
		for i, direct := range []bool{false, true, true} {
			decode := remoting.DecodeFrame
			if i == 2 {
				decode = remoting.DecodeFrameRawExt
			}
			req, err := decode(frame)
			if err != nil {
				t.Fatal(err)
			}

			msgs, resp := c.prepareSend(context.Background(), nil, req, direct)
			if resp != nil || len(msgs) != 1 {
				t.Fatalf("%q: answered %+v", tc.props, resp)
			}
			m := msgs[0]
			if direct && (m.Properties != nil) != tc.wantMap {
				t.Fatalf("%q on %s: map %v, want %v", tc.props, tc.topic, m.Properties != nil, tc.wantMap)
			}
			if !direct && (m.Properties == nil || m.EncodedProperties != "") {
				t.Fatalf("%q: the synchronous path must build the map", tc.props)
			}
			pr, err := r.g.encodeRequest(msgs)
			if err != nil {
				t.Fatal(err)
			}
			stored[i] = pr.data
		}
		if !bytes.Equal(stored[0], stored[1]) || !bytes.Equal(stored[0], stored[2]) {
			t.Fatalf("%q on %s: stored bytes differ\nmap    %q\ndirect %q\nraw    %q", tc.props, tc.topic, stored[0], stored[1], stored[2])
		}
	}
	// The SDK's sorted properties are stored without a copy.
	req, _ := remoting.DecodeFrame(sdkSendFrame(t, "T", "UNIQ_KEY\x01u\x02", nil))
	msgs, _ := c.prepareSend(context.Background(), nil, req, true)
	if p := req.ExtFields["i"]; unsafe.StringData(msgs[0].EncodedProperties) != unsafe.StringData(p) {
		t.Fatal("sorted wire properties were copied")
	}
}

// TestSendResponseFrame: the answer's ext fields for no, one and several
// results (a batch's msgId is the comma-joined ids; queue fields are the
// first message's), and its frame is byte for byte the frame of the same
// fields given as an ExtFields map, in both header serializations.
func TestSendResponseFrame(t *testing.T) {
	res := []PutResult{{MsgID: "A1", QueueID: 3, QueueOffset: 70}, {MsgID: "B2", QueueID: 3, QueueOffset: 71}, {MsgID: "C3"}}
	for _, tc := range []struct {
		n                 int
		msgID, qid, qoffs string
	}{{0, "", "0", "0"}, {1, "A1", "3", "70"}, {3, "A1,B2,C3", "3", "70"}} {
		want := map[string]string{"msgId": tc.msgID, "queueId": tc.qid, "queueOffset": tc.qoffs,
			"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
		for _, st := range []remoting.SerializeType{remoting.SerializeRocketMQ, remoting.SerializeJSON} {
			r := sendResponse(res[:tc.n])
			byMap := success()
			byMap.ExtFields = want
			for _, c := range []*remoting.RemotingCommand{r, byMap} {
				c.Opaque, c.SerializeType = 42, st
			}
			got, err := remoting.EncodeFrame(r)
			if err != nil {
				t.Fatal(err)
			}
			exp, _ := remoting.EncodeFrame(byMap)
			if !bytes.Equal(got, exp) {
				t.Fatalf("%d results, %v: frame\n%q\nwant\n%q", tc.n, st, got, exp)
			}
			dec, err := remoting.DecodeFrame(got[4:])
			if err != nil {
				t.Fatal(err)
			}
			if dec.Code != remoting.ResponseSuccess || !maps.Equal(dec.ExtFields, want) {
				t.Fatalf("%d results: %d %v, want %v", tc.n, dec.Code, dec.ExtFields, want)
			}
		}
	}
}

// TestSendPathAnswers: the benchmark's path answers each request with its
// own stored message (a decode of what the batcher got) and its result.
func TestSendPathAnswers(t *testing.T) {
	r := newPathReplica(testTopicConfig("BenchTopic", 8))
	c := newPathController(t, r)
	fr := &frameResponder{}
	h := c.instrumentAsync(func(ctx context.Context, conn *remoting.Conn, req *remoting.RemotingCommand, _ *remoting.Responder) (*remoting.RemotingCommand, error) {
		return c.sendAsync(ctx, conn, req, fr)
	})
	for i := 0; i < 3; i++ {
		body := []byte("message " + strconv.Itoa(i))
		runSend(t, c, h, fr, sdkSendFrame(t, "BenchTopic", "UNIQ_KEY\x01u"+strconv.Itoa(i)+"\x02", body))
		m, _, err := wire.DecodeMessage(r.last.data, false)
		if err != nil {
			t.Fatal(err)
		}
		if m.Topic != "BenchTopic" || m.QueueID != 3 || !bytes.Equal(m.Body, body) || m.UniqKey() != "u"+strconv.Itoa(i) {
			t.Fatalf("stored %+v", m)
		}
		dec, err := remoting.DecodeFrame(fr.frame[4:])
		if err != nil {
			t.Fatal(err)
		}
		if got := dec.ExtFields["queueOffset"]; got != strconv.Itoa(i) || dec.Opaque != fr.req.Opaque {
			t.Fatalf("answer %d has queueOffset %s", i, got)
		}
	}
}

// sendFrameWith re-encodes a request frame (no length field) with some
// extFields replaced.
func sendFrameWith(tb testing.TB, frame []byte, set map[string]string) []byte {
	tb.Helper()
	req, err := remoting.DecodeFrame(frame)
	if err != nil {
		tb.Fatal(err)
	}
	maps.Copy(req.ExtFields, set)
	f, err := remoting.EncodeFrame(req)
	if err != nil {
		tb.Fatal(err)
	}
	return f[4:]
}

// TestSendRawExt: a send decoded with its extFields left raw (the server's
// LazyExt) gets the same header, the same header error and the same inline
// choice as with the map, in both name shapes.
func TestSendRawExt(t *testing.T) {
	r := newPathReplica(testTopicConfig("T", 8))
	c := newPathController(t, r)
	v1 := map[string]string{"producerGroup": "PG", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "3", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0", "properties": "KEYS\x01k\x02",
		"reconsumeTimes": "1", "unitMode": "false", "maxReconsumeTimes": "16", "batch": "TRUE", "bname": "broker-a"}
	v2 := map[string]string{"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1700000000000",
		"h": "0", "i": "KEYS\x01k\x02", "j": "1", "k": "false", "l": "16", "m": "TRUE", "n": "broker-a"}
	var cases []map[string]string
	for _, full := range []map[string]string{v1, v2} {
		cases = append(cases, full)
		for k := range full {
			for _, v := range []string{"\x00", "bad value", " 7 ", ""} {
				m := maps.Clone(full)
				if v == "\x00" {
					delete(m, k)
				} else {
					m[k] = v
				}
				cases = append(cases, m)
			}
		}
	}
	cases = append(cases, map[string]string{}, map[string]string{"b": "%RETRY%g", "i": "", "topic": "T"},
		map[string]string{"topic": "T", "properties": "DELAY\x012\x02"}, map[string]string{"topic": "Unknown"})
	for i, ext := range cases {
		for _, code := range []int16{remoting.RequestSendMessage, remoting.RequestSendMessageV2, remoting.RequestSendBatchMessage} {
			req := remoting.NewRequest(code, nil, nil)
			req.SerializeType = remoting.SerializeRocketMQ
			req.ExtFields = ext
			f, err := remoting.EncodeFrame(req)
			if err != nil {
				t.Fatal(err)
			}
			byMap, _ := remoting.DecodeFrame(f[4:])
			raw, err := remoting.DecodeFrameRawExt(f[4:])
			if err != nil || raw.ExtFields != nil {
				t.Fatalf("raw decode: %v, ExtFields %v", err, raw.ExtFields)
			}
			want, wantErr := decodeSendHeader(byMap)
			got, gotErr := decodeSendHeader(raw)
			if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) || got != want {
				t.Fatalf("case %d code %d %v: raw %+v / %v, map %+v / %v", i, code, ext, got, gotErr, want, wantErr)
			}
			if c.sendInline(raw) != c.sendInline(byMap) {
				t.Fatalf("case %d code %d %v: inline raw %v, map %v", i, code, ext, c.sendInline(raw), c.sendInline(byMap))
			}
		}
	}
}

// BenchmarkSendHeaderFromFrame: frame decode plus send header decode, with
// the extFields decoded into the map and left raw (LazyExt).
func BenchmarkSendHeaderFromFrame(b *testing.B) {
	frame := sdkSendFrame(b, "BenchTopic", "UNIQ_KEY\x017F0000010C9418B4AAC2A1C4F3E80001\x02", make([]byte, 1024))
	for _, tc := range []struct {
		name   string
		decode func([]byte) (*remoting.RemotingCommand, error)
	}{{"map", remoting.DecodeFrame}, {"raw", remoting.DecodeFrameRawExt}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, err := tc.decode(frame)
				if err != nil {
					b.Fatal(err)
				}
				if h, err := decodeSendHeader(req); err != nil || h.Topic != "BenchTopic" {
					b.Fatal(h, err)
				}
			}
		})
	}
}

// FuzzSendHeaderRawExt: for any field values and either name shape, the
// send header read from the raw ext block equals the one read from the
// map (value or error), and so does the inline choice.
func FuzzSendHeaderRawExt(f *testing.F) {
	f.Add(true, "T", "3", "0", "1700000000000", "UNIQ_KEY\x01u\x02", "false", "16")
	f.Add(false, "", "-1", "x", "", "\x01\x02", "TRUE", " 7 ")
	f.Add(true, "%RETRY%g", "2147483648", "1", "9223372036854775808", "DELAY\x013\x02", "yes", "")
	r := newPathReplica(testTopicConfig("T", 8))
	c := newPathController(f, r)
	f.Fuzz(func(t *testing.T, short bool, topic, queueID, sysFlag, born, props, batch, maxTimes string) {
		names := &sendHeaderNames
		if short {
			names = &sendHeaderV2Names
		}
		ext := map[string]string{}
		for i, v := range []string{"PG", topic, "TBW102", "4", queueID, sysFlag, born, "0", props, "0", "false", maxTimes, batch, "b"} {
			if v != "" || i%3 == 0 { // some fields absent
				ext[names[i]] = v
			}
		}
		for _, code := range []int16{remoting.RequestSendMessage, remoting.RequestSendMessageV2, remoting.RequestSendBatchMessage} {
			req := remoting.NewRequest(code, nil, nil)
			req.SerializeType = remoting.SerializeRocketMQ
			req.ExtFields = ext
			fr, err := remoting.EncodeFrame(req)
			if err != nil {
				return
			}
			byMap, err1 := remoting.DecodeFrame(fr[4:])
			raw, err2 := remoting.DecodeFrameRawExt(fr[4:])
			if err1 != nil || err2 != nil {
				t.Fatalf("decode: %v / %v", err1, err2)
			}
			want, wantErr := decodeSendHeader(byMap)
			got, gotErr := decodeSendHeader(raw)
			if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) || got != want {
				t.Fatalf("code %d %q: raw %+v / %v, map %+v / %v", code, ext, got, gotErr, want, wantErr)
			}
			if c.sendInline(raw) != c.sendInline(byMap) {
				t.Fatalf("code %d %q: inline differs", code, ext)
			}
		}
	})
}
