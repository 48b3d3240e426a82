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

// TestRefutingSignalsRefuted: memberlist's "Refuting a suspect/dead
// message" lines (their format in state.go) are what tell a node that its
// peers may have declared it dead; other lines signal nothing.
func TestRefutingSignalsRefuted(t *testing.T) {
	g, err := NewGossip(namedConfig("n"), NodeMeta{Kind: KindBroker}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := newMemberlistLoggerRefute(g.log, g.noteRefuted)
	l.Printf("[DEBUG] memberlist: Initiating push/pull sync with: %s", "b")
	select {
	case <-g.MaybeDeclaredDead():
		t.Fatal("an unrelated line signalled Refuted")
	default:
	}
	for _, format := range []string{
		"[WARN] memberlist: Refuting a suspect message (from: %s)",
		"[WARN] memberlist: Refuting a dead message (from: %s)",
	} {
		l.Printf(format, "b")
		l.Printf(format, "c")
		select {
		case <-g.MaybeDeclaredDead():
		default:
			t.Fatalf("%q did not signal Refuted", format)
		}
		select {
		case <-g.MaybeDeclaredDead():
			t.Fatal("Refuted did not coalesce")
		default:
		}
	}
}

func namedConfig(name string) GossipConfig {
	c := DefaultGossipConfig()
	c.Name = name
	return c
}
