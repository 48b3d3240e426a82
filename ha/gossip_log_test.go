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
