package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/raftmq/raftmq/remoting"
)

func TestLocalOffsetStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g", "offsets.json")
	s := NewLocalOffsetStore(path)
	if err := s.Load(); err != nil {
		t.Fatalf("missing file: %v", err)
	}
	q0, q1 := MessageQueue{"T", "b", 0}, MessageQueue{"T", "b", 1}
	if _, err := s.Read(context.Background(), q0, MemoryFirstThenStore); !errors.Is(err, ErrOffsetNotFound) {
		t.Fatal(err)
	}
	s.Update(q0, 10, false)
	s.Update(q0, 5, true) // ignored: increase only
	s.Update(q1, 3, false)
	s.Update(q1, 2, false) // allowed: a reset
	if err := s.Persist(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	s2 := NewLocalOffsetStore(path)
	if err := s2.Load(); err != nil {
		t.Fatal(err)
	}
	for mq, want := range map[MessageQueue]int64{q0: 10, q1: 2} {
		if got, err := s2.Read(context.Background(), mq, ReadFromMemory); err != nil || got != want {
			t.Fatalf("%v: %d %v, want %d", mq, got, err, want)
		}
	}
	s2.Remove(q1) // kept: a broadcasting consumer's queue that comes back resumes there
	if got, err := s2.Read(context.Background(), q1, ReadFromMemory); err != nil || got != 2 {
		t.Fatalf("after Remove: %d %v", got, err)
	}
	if got, err := s2.Read(context.Background(), q1, ReadFromStore); err != nil || got != 2 {
		t.Fatalf("from store: %d %v", got, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	if err := os.WriteFile(path, []byte("{torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := NewLocalOffsetStore(path).Load(); err == nil {
		t.Fatal("corrupt file loaded")
	}
}

// TestLocalOffsetStoreReadOneQueue: reading a queue's offset from the file
// stores that queue's alone in memory; another's there, newer than the
// file, stays. MemoryFirstThenStore falls back to the file.
func TestLocalOffsetStoreReadOneQueue(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "offsets.json")
	q0, q1 := MessageQueue{"T", "b", 0}, MessageQueue{"T", "b", 1}
	s := NewLocalOffsetStore(path)
	s.Update(q0, 10, false)
	s.Update(q1, 2, false)
	if err := s.Persist(ctx, nil); err != nil {
		t.Fatal(err)
	}
	s.Update(q0, 12, false)
	s.Update(q1, 4, false)
	if got, err := s.Read(ctx, q1, ReadFromStore); err != nil || got != 2 {
		t.Fatalf("q1 from store: %d %v, want 2", got, err)
	}
	if got, _ := s.Read(ctx, q0, ReadFromMemory); got != 12 {
		t.Fatalf("q0 in memory after reading q1 from the file: %d, want 12", got)
	}
	if got, _ := s.Read(ctx, q1, ReadFromMemory); got != 2 {
		t.Fatalf("q1 in memory after reading it from the file: %d, want 2", got)
	}
	fresh := NewLocalOffsetStore(path)
	if got, err := fresh.Read(ctx, q0, MemoryFirstThenStore); err != nil || got != 10 {
		t.Fatalf("memory first then store, nothing in memory: %d %v, want 10", got, err)
	}
	if _, err := fresh.Read(ctx, MessageQueue{"T", "b", 2}, MemoryFirstThenStore); !errors.Is(err, ErrOffsetNotFound) {
		t.Fatalf("queue the file lacks: %v", err)
	}
}

func TestRemoteOffsetStore(t *testing.T) {
	qb := startQBroker(t, "b")
	addr := qb.addr
	rc := remoting.NewClient(remoting.ClientConfig{}, nil)
	defer rc.Close()
	resolve := func(name string) string {
		if name == "b" {
			return addr
		}
		return ""
	}
	s := NewRemoteOffsetStore("G", rc, resolve)
	ctx := context.Background()
	q0 := MessageQueue{"T", "b", 0}
	if _, err := s.Read(ctx, q0, MemoryFirstThenStore); !errors.Is(err, ErrOffsetNotFound) {
		t.Fatalf("new group: %v", err)
	}
	s.Update(q0, 42, true)
	if err := s.Persist(ctx, []MessageQueue{q0, {"T", "b", 9}}); err != nil { // q9 has no offset: skipped
		t.Fatal(err)
	}
	if off, ok := qb.offset("G", "T", 0); len(qb.requests(remoting.RequestUpdateConsumerOffset)) != 1 || !ok || off != 42 {
		t.Fatalf("broker has offset %d (%v) after %d updates", off, ok, len(qb.requests(remoting.RequestUpdateConsumerOffset)))
	}
	s2 := NewRemoteOffsetStore("G", rc, resolve)
	if _, err := s2.Read(ctx, q0, ReadFromMemory); !errors.Is(err, ErrOffsetNotFound) {
		t.Fatal(err)
	}
	if off, err := s2.Read(ctx, q0, MemoryFirstThenStore); err != nil || off != 42 {
		t.Fatalf("from broker: %d %v", off, err)
	}
	if off, err := s2.Read(ctx, q0, ReadFromMemory); err != nil || off != 42 {
		t.Fatalf("cached: %d %v", off, err)
	}
	s2.Update(MessageQueue{"T", "gone", 0}, 1, false)
	if err := s2.Persist(ctx, []MessageQueue{{"T", "gone", 0}}); !errors.Is(err, ErrNoQueue) {
		t.Fatalf("unknown group: %v", err)
	}
}
