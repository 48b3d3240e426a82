package broker

import (
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// heapInUse returns the live heap after two collections (the second one
// empties sync.Pool's victim caches).
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestHeldPullKeepsNoRequestBytes: a pull held by long polling is counted
// against maxHeldPulls, not in bytes, so what it keeps while held must
// not grow with the request frame: a client could otherwise park
// maxHeldPulls frames of up to 16 MiB each (extFields the broker does
// not read) for the suspend timeout it chooses.
func TestHeldPullKeepsNoRequestBytes(t *testing.T) {
	pc, _ := startFakeProc(t, nil)
	c := pc.nodes[0]
	addr := c.Addr()
	for i, st := range []remoting.SerializeType{remoting.SerializeJSON, remoting.SerializeRocketMQ} {
		topic := "HM" + strconv.Itoa(i)
		pc.createTopic(addr, topic, 1)
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// Each frame is past the connection's scratch buffer, so it is read
		// into a buffer of its own as a 16 MiB one would be; pulls that
		// kept their frames would grow the heap fourfold past the bound.
		const pulls, junk = 8, 1 << 20
		held := c.hold.heldCount()
		before := heapInUse()
		for range pulls {
			req := remoting.NewRequest(remoting.RequestPullMessage, nil, nil)
			req.SerializeType = st
			for k, v := range pullExt("HMG", topic, 0, 0, 60000) {
				req.ExtFields[k] = v
			}
			req.ExtFields["padding"] = strings.Repeat("x", junk)
			f, err := remoting.EncodeFrame(req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Write(f); err != nil {
				t.Fatal(err)
			}
		}
		testutil.WaitFor(t, 30*time.Second, "every pull held", func() bool { return c.hold.heldCount() == held+pulls })
		if grown := int64(heapInUse()) - int64(before); grown > pulls*junk/4 {
			t.Fatalf("serialize type %d: %d held pulls of %d-byte frames keep %d bytes of heap", st, pulls, junk, grown)
		}
	}
}

// TestPullPostedSubscriptionBounded: a pull carrying its own subscription
// (sysFlag PullFlagSubscription) longer than maxPullSubscriptionLength is
// refused as SUBSCRIPTION_PARSE_FAILED naming the bound, and so is a pull
// of a group whose heartbeat registered a tag expression that long:
// parsed, a 16 MiB tag expression is a set of millions of tags, some
// 300 MB of allocations, on every pull; held, the posted text is kept for
// the suspend timeout.
func TestPullPostedSubscriptionBounded(t *testing.T) {
	pc, _ := startFakeProc(t, nil)
	addr := pc.nodes[0].Addr()
	pc.createTopic(addr, "PS", 1)
	pc.sendAt(addr, "PS", []byte("m"))
	pull := func(expr string) *remoting.RemotingCommand {
		ext := pullExt("PSG", "PS", 0, 0, 0)
		ext["sysFlag"] = strconv.Itoa(int(wire.PullFlagSubscription))
		ext["subscription"], ext["expressionType"] = expr, wire.ExpressionTypeTag
		return pc.call(addr, remoting.RequestPullMessage, ext, nil)
	}
	var b strings.Builder
	for i := 0; b.Len() <= maxPullSubscriptionLength; i++ {
		b.WriteString("t" + strconv.Itoa(i) + " || ")
	}
	b.WriteString("*")
	if r := pull(b.String()); r.Code != remoting.ResponseSubscriptionParseFailed || !strings.Contains(r.Remark, strconv.Itoa(maxPullSubscriptionLength)) {
		t.Fatalf("pull with a %d-byte subscription: code %d remark %q", b.Len(), r.Code, r.Remark)
	}
	if r := pull(b.String()[b.Len()-maxPullSubscriptionLength:]); r.Code != remoting.ResponseSuccess {
		t.Fatalf("pull with a %d-byte subscription: code %d remark %q", maxPullSubscriptionLength, r.Code, r.Remark)
	}

	// The subscription a heartbeat registers is parsed by every pull that
	// does not carry its own: a heartbeat past the bound is refused, by
	// its expression or by the tag set the client parsed from it.
	tags := make([]string, maxPullSubscriptionLength+1)
	for i := range tags {
		tags[i] = "t"
	}
	for name, sd := range map[string]*wire.SubscriptionData{
		"expression": {Topic: "PS", SubString: b.String(), ExpressionType: wire.ExpressionTypeTag},
		"tag set":    {Topic: "PS", SubString: "t", ExpressionType: wire.ExpressionTypeTag, TagsSet: tags},
	} {
		if r := heartbeatSubAnswer(pc, "PSH", sd); r.Code != remoting.ResponseSubscriptionParseFailed ||
			!strings.Contains(r.Remark, strconv.Itoa(maxPullSubscriptionLength)) {
			t.Fatalf("heartbeat with a long %s: code %d remark %q", name, r.Code, r.Remark)
		}
	}
	heartbeatSub(t, pc, "PSH", "PS", wire.ExpressionTypeTag, b.String()[b.Len()-maxPullSubscriptionLength:])
	if r := pc.call(addr, remoting.RequestPullMessage, pullExt("PSH", "PS", 0, 0, 0), nil); r.Code != remoting.ResponseSuccess {
		t.Fatalf("pull of a group whose heartbeat subscribed with %d bytes: code %d remark %q", maxPullSubscriptionLength, r.Code, r.Remark)
	}
}
