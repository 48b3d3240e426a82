package broker

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// TestQueryMessageBodyBounded: a key many large messages share is answered
// with as many as fit maxQueryBodyBytes (at least one), not with a frame
// past the clients' 16 MiB limit that fails the whole lookup.
func TestQueryMessageBodyBounded(t *testing.T) {
	pc, _ := startFakeProc(t, nil)
	addr := pc.nodes[0].Addr()
	pc.createTopic(addr, "QB", 1)
	body := bytes.Repeat([]byte("q"), 900<<10)
	const sent = 12 // ~11 MB under one key: more than maxQueryBodyBytes
	props := wire.PropertyKeys + "\x01big\x02"
	for range sent {
		if r := pc.call(addr, remoting.RequestSendMessage, sendExt("QB", 0, props), body); r.Code != remoting.ResponseSuccess {
			t.Fatalf("send: %d %s", r.Code, r.Remark)
		}
	}
	end := strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)
	r := pc.call(addr, remoting.RequestQueryMessage, map[string]string{"topic": "QB", "key": "big", "maxNum": "64",
		"beginTimestamp": "0", "endTimestamp": end}, nil)
	if r.Code != remoting.ResponseSuccess {
		t.Fatalf("QUERY_MESSAGE: %d %s", r.Code, r.Remark)
	}
	msgs := decodeAll(t, r.Body)
	if len(r.Body) > maxQueryBodyBytes || len(msgs) == 0 || len(msgs) >= sent {
		t.Fatalf("QUERY_MESSAGE answered %d of %d messages in %d bytes; want at least one, within %d bytes", len(msgs), sent, len(r.Body), maxQueryBodyBytes)
	}
}
