package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestAdminQueryMsgResend: queryMsgById -s true does what mqadmin's does:
// it looks the message up and sends it again to its topic, as a producer
// sends the MessageExt it was given (body, tags, keys, properties and its
// client msgId kept), printing "prepare resend msg. originalMsgId=..." and
// the SendResult; the group's live consumer gets the copy.
func TestAdminQueryMsgResend(t *testing.T) {
	f := startParity(t)
	before := f.consumed.Load()
	out := f.run(t, "queryMsgById", "-i", f.offsetID, "-s", "true")
	wantLines(t, out, "prepare resend msg. originalMsgId="+f.offsetID,
		"SendResult [sendStatus=SEND_OK, msgId="+f.uniq+", offsetMsgId=", "messageQueue=MessageQueue [topic=ParT, brokerName=broker-a, queueId=")

	var mv messageView
	f.js(t, &mv, "queryMsgById", "-i", f.uniq, "-t", "ParT", "-s", "true")
	r := mv.Resend
	if r == nil || r.SendStatus != "SEND_OK" || r.MsgID != f.uniq || r.OffsetMsgID == "" || r.OffsetMsgID == f.offsetID {
		t.Fatalf("queryMsgById -s true --json: resend result %+v; want SEND_OK, msgId %s and a new offset msgId", r, f.uniq)
	}
	var copyView messageView
	f.js(t, &copyView, "queryMsgById", "-i", r.OffsetMsgID)
	if copyView.Topic != "ParT" || copyView.Body != "parity-0" || copyView.Tags != "TagA" || strings.Join(copyView.Keys, " ") != "pk0" ||
		copyView.MsgID != f.uniq || copyView.QueueOffset != r.QueueOffset {
		t.Fatalf("the resent copy %+v; want ParT's first message (parity-0, TagA, pk0, msgId %s) at queue offset %d", copyView, f.uniq, r.QueueOffset)
	}
	testutil.WaitFor(t, 20*time.Second, "ParCG consumed both copies", func() bool { return f.consumed.Load()-before >= 2 })

	// -s false is a plain lookup (mqadmin prints nothing then).
	wantLines(t, f.run(t, "queryMsgById", "-i", f.offsetID, "-s", "false"), "Body:", "parity-0")
	// mqadmin lets -g -d win over -s silently; raftmq refuses the mix.
	if _, err := runAdmin(t, append(f.n, "queryMsgById", "-i", f.offsetID, "-s", "true", "-g", "ParCG", "-d", f.consumer)...); !errors.Is(err, errAdminUsage) {
		t.Fatalf("queryMsgById -s true -g -d: %v; want a usage error", err)
	}
}

// TestAdminQueryMsgUnitName: mqadmin's -u names the unit whose name-server
// list the resend producer fetches from an address server; raftmq has no
// address server (name servers come from -n), so -u is refused, naming
// why, rather than ignored.
func TestAdminQueryMsgUnitName(t *testing.T) {
	for _, args := range [][]string{
		{"queryMsgById", "-i", "0A000001000078BF0000000000000000", "-s", "true", "-u", "unitA"},
		{"queryMsgById", "-i", "0A000001000078BF0000000000000000", "-u", "unitA"},
	} {
		out, err := runAdmin(t, append([]string{"-n", "127.0.0.1:1"}, args...)...)
		if !errors.Is(err, errAdminUsage) || !strings.Contains(err.Error(), "-u") || !strings.Contains(err.Error(), "address server") {
			t.Fatalf("%s: %v\n%s; want a usage error explaining -u", strings.Join(args, " "), err, out)
		}
	}
}
