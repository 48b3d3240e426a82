package raftlog

import (
	"testing"

	"github.com/hashicorp/raft"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestHCLoggerNoStacktrace: raftmq's logger adds a stack trace to Error
// lines. hashicorp/raft logs an ERROR line for every failed heartbeat and
// append to a member that is down (several a second, with backoff), and the
// stack of such a line is always this adapter's Write under hclog's own
// frames, never the caller's. The lines keep their level, without the
// trace (each carried about 1.5 KB of it).
func TestHCLoggerNoStacktrace(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core, zap.AddStacktrace(zapcore.ErrorLevel))
	h := HCLogger(log, "raft")
	h.Error("failed to heartbeat to", "peer", "127.0.0.1:40931")
	h.Warn("failed to contact", "server-id", "n2")
	got := logs.All()
	if len(got) != 2 {
		t.Fatalf("%d entries, want 2", len(got))
	}
	if got[0].Level != zapcore.ErrorLevel || got[1].Level != zapcore.WarnLevel {
		t.Fatalf("levels %v, %v; want error, warn", got[0].Level, got[1].Level)
	}
	for _, e := range got {
		if e.Stack != "" {
			t.Fatalf("%q carries a stack trace:\n%s", e.Message, e.Stack)
		}
	}
	// The logger the broker passes keeps its traces for its own errors.
	log.Error("broker error")
	if e := logs.All()[2]; e.Stack == "" {
		t.Fatal("the caller's logger lost its stack traces")
	}
}

// TestHCLoggerTransportShutdownIsNotAnError: raft logs "failed to decode
// incoming command: transport shutdown" at ERROR for every inbound
// connection when a member closes cleanly; it lands at info.
func TestHCLoggerTransportShutdownIsNotAnError(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	h := HCLogger(zap.New(core), "raft")
	h.Error("failed to decode incoming command", "error", raft.ErrTransportShutdown)
	h.Error("failed to decode incoming command", "error", "unexpected EOF")
	got := logs.All()
	if len(got) != 2 || got[0].Level != zapcore.InfoLevel || got[1].Level != zapcore.ErrorLevel {
		t.Fatalf("entries %+v; want the shutdown at info, the other error at error", got)
	}
}
