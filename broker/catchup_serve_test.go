package broker

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/remoting"
)

// TestCatchupReadForgedPosition: CATCHUP_READ names a log position, and a
// client can aim it inside a message body it wrote to look like a frame
// or a blank filler that fails its checks. That is bad input, not damage:
// the member keeps running (a damaged log stops it), the answer says the
// position is no entry, and reads at real entries still work.
func TestCatchupReadForgedPosition(t *testing.T) {
	pc := startRealCluster(t, nil)
	l := pc.leader()
	addr, g := pc.nodes[l].Addr(), pc.groups[l]
	pc.createTopic(addr, "FORGE", 1)

	// Two fake entry headers, each followed by bytes that fail its checks:
	// a blank filler that does not run to the segment's end, and a frame
	// whose CRC does not match.
	fake := func(magic uint32) []byte {
		b := make([]byte, 64)
		binary.BigEndian.PutUint32(b, 48)
		binary.BigEndian.PutUint32(b[4:], magic)
		return b
	}
	body := append([]byte("forged:"), fake(raftlog.BlankMagic)...)
	body = append(body, fake(raftlog.FrameMagic)...)
	off := pc.sendAt(addr, "FORGE", body)
	view := pc.call(addr, remoting.RequestViewMessageByID, map[string]string{"offset": strconv.FormatInt(off, 10)}, nil)
	at := bytes.Index(view.Body, body)
	if view.Code != remoting.ResponseSuccess || at < 0 {
		t.Fatalf("view at %d: code %d remark %q", off, view.Code, view.Remark)
	}
	bodyPos := off + int64(at)
	for _, pos := range []int64{bodyPos + 7, bodyPos + 7 + 64} {
		resp := pc.call(addr, remoting.RequestCatchupRead, map[string]string{"op": "log", "pos": strconv.FormatInt(pos, 10), "n": "1048576"}, nil)
		if resp.Code != remoting.ResponseSystemError || len(resp.Body) != 0 || !strings.Contains(resp.Remark, "not an entry boundary") {
			t.Errorf("CATCHUP_READ at %d (inside a message body): code %d, %d bytes, remark %q", pos, resp.Code, len(resp.Body), resp.Remark)
		}
	}
	// Past the committed log (where Raft may still truncate) nothing is served.
	past := pc.call(addr, remoting.RequestCatchupRead, map[string]string{"op": "log", "pos": strconv.FormatInt(1<<40, 10), "n": "1048576"}, nil)
	if past.Code != remoting.ResponseSystemError || !strings.Contains(past.Remark, "not below the end of the committed log") {
		t.Errorf("CATCHUP_READ past the log: code %d remark %q", past.Code, past.Remark)
	}
	if err := g.LogDamaged(); err != nil {
		t.Fatalf("a forged position made the member report damage: %v", err)
	}
	if s := g.raft.State(); s == raft.Shutdown {
		t.Fatal("a forged position shut the member's Raft down")
	}

	// A real entry is served.
	start := pc.call(addr, remoting.RequestCatchupRead, map[string]string{"op": "start"}, nil)
	if start.Code != remoting.ResponseSuccess {
		t.Fatalf("start: %d %s", start.Code, start.Remark)
	}
	first := start.ExtFields["pos"]
	if first == "" {
		first = "0" // omitted when 0
	}
	resp := pc.call(addr, remoting.RequestCatchupRead, map[string]string{"op": "log", "pos": first, "n": "1048576"}, nil)
	if resp.Code != remoting.ResponseSuccess || len(resp.Body) == 0 {
		t.Fatalf("CATCHUP_READ at the first entry %s: code %d, %d bytes, remark %q", first, resp.Code, len(resp.Body), resp.Remark)
	}
}
