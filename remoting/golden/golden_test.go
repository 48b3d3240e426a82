// Package golden_test checks our codec and server against the official
// RocketMQ Go client (github.com/apache/rocketmq-client-go/v2), driven
// through its public API. It lives apart from package remoting because the
// official client keeps process-wide goroutines (its shared client
// instance, timers, log writers) alive after Shutdown, which would trip
// remoting's goleak.VerifyTestMain.
package golden_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/raftmq/raftmq/remoting"
)

var update = flag.Bool("update", false, "rewrite ../testdata/golden/*.bin and the fuzz seeds from live captures")

// recorder is a TCP proxy in front of our server that keeps every byte the
// official client sent, so the test sees the client's raw frames.
type recorder struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	live   []*bytes.Buffer // guarded by mu: one per client connection
	wg     sync.WaitGroup
}

func newRecorder(t *testing.T, target string) *recorder {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln, target: target}
	r.wg.Add(1)
	go r.accept()
	t.Cleanup(func() { _ = ln.Close(); r.wg.Wait() })
	return r
}

type lockedBuf struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (r *recorder) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		buf := &bytes.Buffer{}
		r.mu.Lock()
		r.live = append(r.live, buf)
		r.mu.Unlock()
		r.wg.Add(2)
		go func() {
			defer r.wg.Done()
			// Record before forwarding: the server's answer (and so the
			// client call the test waits for) must not overtake the copy.
			_, _ = io.Copy(io.MultiWriter(lockedBuf{&r.mu, buf}, up), c)
			_ = up.Close()
		}()
		go func() {
			defer r.wg.Done()
			_, _ = io.Copy(c, up)
			_ = c.Close()
		}()
	}
}

// frames splits everything recorded so far into whole frames (with their
// length prefix).
func (r *recorder) frames(t *testing.T) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	for _, b := range r.live {
		data := b.Bytes()
		for len(data) >= 4 {
			n := int(binary.BigEndian.Uint32(data))
			if len(data) < 4+n {
				break
			}
			out = append(out, append([]byte(nil), data[:4+n]...))
			data = data[4+n:]
		}
	}
	return out
}

func TestOfficialGoClientAgainstOurServer(t *testing.T) {
	rlog.SetLogLevel("error")
	received := make(chan *remoting.RemotingCommand, 64)
	var addr string // the recorder's address: clients must come back through it
	route := func() []byte {
		return []byte(fmt.Sprintf(`{"orderTopicConf":"","queueDatas":[{"brokerName":"golden-b","readQueueNums":1,"writeQueueNums":1,"perm":6,"topicSysFlag":0}],`+
			`"brokerDatas":[{"cluster":"golden","brokerName":"golden-b","brokerAddrs":{0:"%s"}}],"filterServerTable":{}}`, addr))
	}
	s := remoting.NewServer(remoting.ServerConfig{ListenAddr: "127.0.0.1:0"}, nil)
	handle := func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		received <- req
		resp := remoting.NewResponse(remoting.ResponseSuccess, "")
		switch req.Code {
		case remoting.RequestGetAllTopicListFromNameserver:
			resp.Body = []byte(`{"topicList":["GoldenTopic","Other"],"brokerAddr":"x"}`)
		case remoting.RequestGetRouteInfoByTopic:
			resp.Body = route()
		case remoting.RequestSendMessage:
			resp.ExtFields = map[string]string{"msgId": "7F00000100002A9F0000000000000042", "queueId": "0", "queueOffset": "1234"}
		}
		return resp, nil
	}
	s.RegisterDefault(handle, 4, 64)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Shutdown(context.Background()) }()
	rec := newRecorder(t, s.Addr().String())
	addr = rec.ln.Addr().String()
	resolver := primitive.NewPassthroughResolver([]string{addr})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	adm, err := admin.NewAdmin(admin.WithResolver(resolver))
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.CreateTopic(ctx, admin.WithTopicCreate("GoldenTopic"), admin.WithBrokerAddrCreate(addr)); err != nil {
		t.Fatalf("CreateTopic against our server: %v", err)
	}
	list, err := adm.FetchAllTopicList(ctx)
	if err != nil {
		t.Fatalf("FetchAllTopicList: %v", err)
	}
	if !reflect.DeepEqual(list.TopicList, []string{"GoldenTopic", "Other"}) {
		t.Fatalf("client decoded topic list %v from our response", list.TopicList)
	}
	_ = adm.Close()

	p, err := producer.NewDefaultProducer(producer.WithNsResolver(resolver), producer.WithRetry(0),
		producer.WithGroupName("golden_pg"), producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	res, err := p.SendSync(ctx, primitive.NewMessage("GoldenTopic", []byte("hello golden")).WithTag("tagA").WithKeys([]string{"k1"}))
	if err != nil {
		t.Fatalf("SendSync against our server: %v", err)
	}
	_ = p.Shutdown()
	if res.Status != primitive.SendOK || res.OffsetMsgID != "7F00000100002A9F0000000000000042" || res.QueueOffset != 1234 ||
		res.MessageQueue == nil || res.MessageQueue.BrokerName != "golden-b" {
		t.Fatalf("client decoded send result %+v from our response", res)
	}

	// What our server decoded, by code.
	got := map[int16]*remoting.RemotingCommand{}
	for len(received) > 0 {
		r := <-received
		got[r.Code] = r
	}
	wantCreate := map[string]string{"topic": "GoldenTopic", "defaultTopic": "defaultTopic", "readQueueNums": "8",
		"writeQueueNums": "8", "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
	checkCmd(t, got[remoting.RequestUpdateAndCreateTopic], wantCreate)
	checkCmd(t, got[remoting.RequestGetAllTopicListFromNameserver], map[string]string{})
	checkCmd(t, got[remoting.RequestGetRouteInfoByTopic], map[string]string{"topic": "GoldenTopic"})
	send := got[remoting.RequestSendMessage]
	if send == nil {
		t.Fatal("no SEND_MESSAGE received")
	}
	for k, v := range map[string]string{"producerGroup": "golden_pg", "topic": "GoldenTopic", "queueId": "0",
		"defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "batch": "false", "bname": "golden-b", "unitMode": "false"} {
		if send.ExtFields[k] != v {
			t.Errorf("SEND_MESSAGE ext %s=%q, want %q", k, send.ExtFields[k], v)
		}
	}
	if string(send.Body) != "hello golden" {
		t.Errorf("SEND_MESSAGE body %q", send.Body)
	}

	// The raw frames: our codec decodes them to what the server saw, and
	// re-encodes them byte for byte.
	named := map[int16]string{
		remoting.RequestUpdateAndCreateTopic:          "update_and_create_topic",
		remoting.RequestGetAllTopicListFromNameserver: "get_all_topic_list",
		remoting.RequestGetRouteInfoByTopic:           "get_route_info",
		remoting.RequestSendMessage:                   "send_message",
	}
	seen := map[int16]bool{}
	for _, raw := range rec.frames(t) {
		c, err := remoting.DecodeFrame(raw[4:])
		if err != nil {
			t.Fatalf("decode captured frame: %v\n%q", err, raw)
		}
		if c.Language != remoting.LanguageGo || c.Version != 317 || c.SerializeType != remoting.SerializeJSON || c.IsResponse() {
			t.Errorf("captured frame header %v", c)
		}
		again, err := remoting.EncodeFrame(c)
		if err != nil || !bytes.Equal(again, raw) {
			t.Errorf("re-encode of code %d not byte-identical:\n got %q\nwant %q", c.Code, again, raw)
		}
		if srv := got[c.Code]; srv != nil && !reflect.DeepEqual(srv.ExtFields, c.ExtFields) && len(c.ExtFields)+len(srv.ExtFields) > 0 {
			// Several frames share a code (route lookups); compare only the
			// ext key sets for those.
			if c.Code != remoting.RequestGetRouteInfoByTopic && c.Code != remoting.RequestHeartBeat {
				t.Errorf("code %d: server saw %v, raw frame says %v", c.Code, srv.ExtFields, c.ExtFields)
			}
		}
		if name, ok := named[c.Code]; ok && !seen[c.Code] {
			seen[c.Code] = true
			if *update {
				writeGolden(t, name, raw)
			}
		}
	}
	for code := range named {
		if !seen[code] {
			t.Errorf("no raw frame captured for code %d", code)
		}
	}
}

func checkCmd(t *testing.T, c *remoting.RemotingCommand, ext map[string]string) {
	t.Helper()
	if c == nil {
		t.Fatal("request not received")
	}
	if c.Language != remoting.LanguageGo || c.Version != 317 || c.SerializeType != remoting.SerializeJSON {
		t.Errorf("code %d: header %v", c.Code, c)
	}
	if len(ext) == 0 && len(c.ExtFields) == 0 {
		return
	}
	if !reflect.DeepEqual(c.ExtFields, ext) {
		t.Errorf("code %d: ext %v, want %v", c.Code, c.ExtFields, ext)
	}
}

func writeGolden(t *testing.T, name string, raw []byte) {
	for _, p := range []string{
		filepath.Join("..", "testdata", "golden", name+".bin"),
	} {
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Fuzz seed: the frame without its length, in go test corpus format.
	seed := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", raw[4:])
	p := filepath.Join("..", "testdata", "fuzz", "FuzzDecodeFrame", "golden_"+name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(seed), 0o644); err != nil {
		t.Fatal(err)
	}
}
