package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

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
	s2.Remove(q1)
	if _, err := s2.Read(context.Background(), q1, ReadFromMemory); !errors.Is(err, ErrOffsetNotFound) {
		t.Fatal(err)
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

// offsetBroker is a fake broker keeping offsets for 14/15.
type offsetBroker struct {
	mu      sync.Mutex
	offsets map[string]int64
	updates int
}

func startOffsetBroker(t *testing.T) (*offsetBroker, string) {
	ob := &offsetBroker{offsets: map[string]int64{}}
	srv := remoting.NewServer(remoting.ServerConfig{}, nil)
	key := func(req *remoting.RemotingCommand) string {
		return req.ExtFields["consumerGroup"] + "/" + req.ExtFields["topic"] + "/" + req.ExtFields["queueId"]
	}
	srv.Register(remoting.RequestQueryConsumerOffset, func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		ob.mu.Lock()
		defer ob.mu.Unlock()
		off, ok := ob.offsets[key(req)]
		if !ok {
			return remoting.NewResponse(remoting.ResponseQueryNotFound, "not found"), nil
		}
		resp := remoting.NewResponse(remoting.ResponseSuccess, "")
		resp.ExtFields = map[string]string{"offset": strconv.FormatInt(off, 10)}
		return resp, nil
	}, 1, 16)
	srv.Register(remoting.RequestUpdateConsumerOffset, func(_ context.Context, _ *remoting.Conn, req *remoting.RemotingCommand) (*remoting.RemotingCommand, error) {
		ob.mu.Lock()
		defer ob.mu.Unlock()
		off, err := strconv.ParseInt(req.ExtFields["commitOffset"], 10, 64)
		if err != nil {
			return nil, err
		}
		ob.offsets[key(req)] = off
		ob.updates++
		return remoting.NewResponse(remoting.ResponseSuccess, ""), nil
	}, 1, 16)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return ob, srv.Addr().String()
}

func TestRemoteOffsetStore(t *testing.T) {
	ob, addr := startOffsetBroker(t)
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
	if ob.updates != 1 || ob.offsets["G/T/0"] != 42 {
		t.Fatalf("broker has %v after %d updates", ob.offsets, ob.updates)
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
