package ha

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestMemberlistLogLinesBecomeZapDebug(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := newMemberlistLogger(zap.New(core))
	l.Printf("[WARN] memberlist: Refuting a suspect message (from: %s)", "b")
	l.Printf("no level prefix")

	got := logs.AllUntimed()
	if len(got) != 2 {
		t.Fatalf("%d entries", len(got))
	}
	e := got[0]
	if e.Level != zapcore.DebugLevel || e.Message != "Refuting a suspect message (from: b)" ||
		e.LoggerName != "memberlist" || e.ContextMap()["mlLevel"] != "WARN" {
		t.Fatalf("entry %+v %v", e.Entry, e.ContextMap())
	}
	if got[1].Message != "no level prefix" || got[1].ContextMap()["mlLevel"] != "INFO" {
		t.Fatalf("entry %+v %v", got[1].Entry, got[1].ContextMap())
	}

	// At info level (the binary's default) memberlist stays silent.
	core, logs = observer.New(zapcore.InfoLevel)
	newMemberlistLogger(zap.New(core)).Printf("[ERR] memberlist: Failed to send ping")
	if logs.Len() != 0 {
		t.Fatal("memberlist line logged above debug")
	}
}

// TestRefutingQueuesResync: memberlist's "Refuting a ... message" lines
// (their format in state.go) are the only sign that this node refuted a
// claim about itself, after which resyncLoop syncs with the seeds and
// signals MaybeDeclaredDead; other lines queue nothing.
func TestRefutingQueuesResync(t *testing.T) {
	g, err := NewGossip(namedConfig("n"), NodeMeta{Kind: KindBroker}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := newMemberlistLoggerRefute(g.log, g.noteRefuted)
	l.Printf("[DEBUG] memberlist: Initiating push/pull sync with: %s", "b")
	select {
	case <-g.refuted:
		t.Fatal("an unrelated line queued a resync")
	default:
	}
	for _, format := range []string{
		"[WARN] memberlist: Refuting a suspect message (from: %s)",
		"[WARN] memberlist: Refuting a dead message (from: %s)",
		"[WARN] memberlist: Refuting an alive message for '%s' (127.0.0.1:7946) meta:([1] VS [2]), vsn:([1] VS [1])",
	} {
		l.Printf(format, "b")
		l.Printf(format, "c")
		select {
		case <-g.refuted:
		default:
			t.Fatalf("%q did not queue a resync", format)
		}
		select {
		case <-g.refuted:
			t.Fatal("resyncs did not coalesce")
		default:
		}
	}
}

func namedConfig(name string) GossipConfig {
	c := DefaultGossipConfig()
	c.Name = name
	return c
}
