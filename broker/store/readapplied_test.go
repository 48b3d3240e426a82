package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/raftmq/raftmq/storage"
	"github.com/raftmq/raftmq/wire"
)

// TestReadAppliedMessageForgedStart: bytes inside a message body that name
// their own offset as PHYSICALOFFSET, as a stored message does, and fail
// the message checks are refused by ReadAppliedMessage (the offsets it
// reads come from clients) but not reported as damage: no log, no
// CorruptEntryError naming the file. ReadMessage, which reads offsets the
// store took from its own indexes, still reports such bytes as damage.
func TestReadAppliedMessageForgedStart(t *testing.T) {
	cfg := storeConfig(storage.OSFS(), t.TempDir())
	core, logs := observer.New(zap.WarnLevel)
	cfg.Log = zap.New(core)
	s := openTestStore(t, cfg, &segLog{})
	defer s.Close()

	prefix := strings.Repeat("f", 32) // KEYS holds the body's first 16 bytes
	body := []byte(prefix + strings.Repeat("\x00", 64))
	probe := s.put(coreMsg("T", 0, string(body)))[0]
	sl, err := s.ReadAppliedMessage(probe.CommitLogOffset)
	if err != nil {
		t.Fatal(err)
	}
	size, at := int64(len(sl.B)), bytes.Index(sl.B, body)
	sl.Release()
	if at < 0 {
		t.Fatal("probe body not found in its stored bytes")
	}
	// segLog stores messages back to back: the next one's body lands here.
	fake := probe.CommitLogOffset + size + int64(at) + int64(len(prefix))
	binary.BigEndian.PutUint32(body[len(prefix):], 60)
	binary.BigEndian.PutUint32(body[len(prefix)+wire.OffMagic:], 0xdeadbeef)
	binary.BigEndian.PutUint64(body[len(prefix)+wire.OffPhysicalOffset:], uint64(fake))
	if r := s.put(coreMsg("T", 0, string(body)))[0]; r.CommitLogOffset != probe.CommitLogOffset+size {
		t.Fatalf("message stored at %d, want %d", r.CommitLogOffset, probe.CommitLogOffset+size)
	}

	var ce *CorruptEntryError
	_, err = s.ReadAppliedMessage(fake)
	if !errors.Is(err, ErrCorruptMessage) || errors.As(err, &ce) || !strings.Contains(err.Error(), "no intact message starts at offset") {
		t.Fatalf("ReadAppliedMessage at a forged start: %v", err)
	}
	if _, err := s.LookMessageByOffset(fake); !errors.Is(err, ErrCorruptMessage) || errors.As(err, &ce) {
		t.Fatalf("LookMessageByOffset at a forged start: %v", err)
	}
	if n := logs.Len(); n != 0 {
		t.Fatalf("a forged start was logged: %v", logs.All())
	}
	if _, err := s.CommitLog().ReadMessage(fake); !errors.Is(err, ErrCorruptMessage) || logs.FilterMessage("corrupt CommitLog entry not served").Len() != 1 {
		t.Fatalf("ReadMessage at the same bytes: %v, %d damage logs", err, logs.Len())
	}
}
