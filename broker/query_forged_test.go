package broker

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

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
