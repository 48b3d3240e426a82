package jepsen

import (
	"context"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWipeDirEmptiesButKeepsDir checks that replace-member's wipe leaves
// the data directory itself (it may be a tmpfs mount point) and nothing in
// it, and counts the bytes it removed.
func TestWipeDirEmptiesButKeepsDir(t *testing.T) {
	dir := t.TempDir()
	for p, n := range map[string]int{"commitlog/00000000000000000000": 3000, "raft/stable": 100, "config/topics.json": 10} {
		path := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n, err := wipeDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3110 {
		t.Fatalf("wiped %d bytes, want 3110", n)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("data directory gone: %v", err)
	}
	if len(ents) != 0 {
		t.Fatalf("left %d entries", len(ents))
	}
}

// TestEnsureConfLineAppendsOnce checks the raftJoin line is added once,
// after a last line without a newline too.
func TestEnsureConfLineAppendsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.conf")
	if err := os.WriteFile(path, []byte("brokerName=broker-j\nlistenPort=10911"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := ensureConfLine(path, "raftJoin=true"); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	if want := "brokerName=broker-j\nlistenPort=10911\nraftJoin=true\n"; string(b) != want {
		t.Fatalf("conf %q, want %q", b, want)
	}
}

// TestReplaceMemberNeedsNetns: in proxy mode the nemesis injects nothing
// and says why (the schedule notes it as not injected).
func TestReplaceMemberNeedsNetns(t *testing.T) {
	n, err := NewNemesis("replace-member")
	if err != nil {
		t.Fatal(err)
	}
	_, err = n.Inject(context.Background(), &Env{Cluster: &Cluster{}, Rand: rand.New(rand.NewSource(1))})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "netns") {
		t.Fatalf("proxy-mode inject: %v", err)
	}
}

// TestRemoveConfKeyDropsRaftJoin: rebuild-member restarts a member from
// its conf without the raftJoin line a replace-member window appended,
// leaving every other line as it was.
func TestRemoveConfKeyDropsRaftJoin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.conf")
	conf := "brokerName=broker-j\nraftJoin=true\nlistenPort=10911\n raftJoin = false\nraftJoinX=1"
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := removeConfKey(path, "raftJoin"); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	if want := "brokerName=broker-j\nlistenPort=10911\nraftJoinX=1"; string(b) != want {
		t.Fatalf("conf %q, want %q", b, want)
	}
}

// TestRebuildMemberNeedsNetns: in proxy mode rebuild-member injects
// nothing and says why.
func TestRebuildMemberNeedsNetns(t *testing.T) {
	n, err := NewNemesis("rebuild-member")
	if err != nil {
		t.Fatal(err)
	}
	_, err = n.Inject(context.Background(), &Env{Cluster: &Cluster{}, Rand: rand.New(rand.NewSource(1))})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "netns") {
		t.Fatalf("proxy-mode inject: %v", err)
	}
}

// TestAwaitJoinNeedsTheNewJoinLine: only a join line the restarted member
// logged counts (one from an earlier rebuild, before from, does not); without
// it the detail says rebuildBootstrapped, whether the wait ran out or the
// member exited.
func TestAwaitJoinNeedsTheNewJoinLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.log")
	join := `{"level":"warn","msg":"no Raft state: group broker-j's follower n2 at 10.201.3.12:10911 holds a Raft log up to index 812 (term 3); ` +
		"not bootstrapping from dLegerPeers, joining as with raftJoin=true: the leader replicates to this member while its id is a member, " +
		"otherwise add it with `raftmq admin addMember`\"}\n"
	old := join + `{"level":"warn","msg":"raft: heartbeat timeout reached"}` + "\n"
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	from := int64(len(old))
	running := func() bool { return false }
	past := time.Now().Add(-time.Second)
	if got := awaitJoin(context.Background(), path, from, running, past); !strings.HasPrefix(got, rebuildBootstrapped+":") {
		t.Fatalf("old line only: %q", got)
	}
	if got := awaitJoin(context.Background(), path, from, func() bool { return true }, time.Now().Add(time.Minute)); !strings.HasPrefix(got, rebuildBootstrapped+"? exited") {
		t.Fatalf("exited: %q", got)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(join); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	got := awaitJoin(context.Background(), path, from, running, past)
	if strings.Contains(got, rebuildBootstrapped) || !strings.Contains(got, "n2 at 10.201.3.12:10911 holds a Raft log up to index 812 (term 3)") {
		t.Fatalf("joined: %q", got)
	}
}

// TestAwaitJoinOverRaft: the join line of a member whose check found the
// group over Raft (no route) counts too.
func TestAwaitJoinOverRaft(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n1.log")
	join := `{"level":"warn","msg":"no Raft state: group member n0 at 10.201.3.11:40911 is at Raft term 7 (the group elected a leader); ` +
		"not bootstrapping from dLegerPeers, joining as with raftJoin=true: the leader replicates to this member while its id is a member, " +
		"otherwise add it with `raftmq admin addMember`\"}\n"
	if err := os.WriteFile(path, []byte(join), 0o644); err != nil {
		t.Fatal(err)
	}
	got := awaitJoin(context.Background(), path, 0, func() bool { return false }, time.Now().Add(-time.Second))
	if strings.Contains(got, rebuildBootstrapped) || !strings.Contains(got, "n0 at 10.201.3.11:40911 is at Raft term 7") {
		t.Fatalf("joined: %q", got)
	}
}

// TestKeepQueuesBeforeWipe: before a wipe the member's ConsumeQueues of
// the suite's topics are copied byte for byte into the cluster's
// KeepQueuesDir, one numbered directory per wipe; other topics and the
// rest of the data directory are not, a topic that would take the copy
// past the limit is skipped and named, and the wipe still removes
// everything.
func TestKeepQueuesBeforeWipe(t *testing.T) {
	data, keep := t.TempDir(), filepath.Join(t.TempDir(), "wiped")
	files := map[string][]byte{
		"consumequeue/%RETRY%JepsenRetryConsumers/0/00000000000000000000": []byte("retry units"),
		"consumequeue/%DLQ%JepsenRetryConsumers/0/00000000000000000000":   []byte("dlq units"),
		"consumequeue/JepsenOrderTopic/1/00000000000000000000":            []byte("order q1"),
		"consumequeue/JepsenOrderTopic/3/00000000000000600000":            []byte("order q3, second file"),
		"consumequeue/JepsenTopic/0/00000000000000000000":                 make([]byte, 300),
		"consumequeue/OtherTopic/0/00000000000000000000":                  []byte("not the suite's"),
		"commitlog/00000000000000000000":                                  make([]byte, 1000),
	}
	for p, b := range files {
		path := filepath.Join(data, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kept, skipped, bytes, err := keepQueues(data, filepath.Join(keep, "01-n1"), keptQueueTopics, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 3 || len(skipped) != 1 || !strings.HasPrefix(skipped[0], Topic+" ") || bytes != 11+9+8+21 {
		t.Fatalf("kept %v, skipped %v, %d bytes", kept, skipped, bytes)
	}
	for p, b := range files {
		got, err := os.ReadFile(filepath.Join(keep, "01-n1", p))
		want := strings.HasPrefix(p, "consumequeue/%") || strings.HasPrefix(p, "consumequeue/JepsenOrderTopic/")
		switch {
		case want && (err != nil || string(got) != string(b)):
			t.Errorf("%s: copy %q, %v; want %q", p, got, err, b)
		case !want && err == nil:
			t.Errorf("%s copied", p)
		}
	}

	// Through the cluster: numbered per wipe, described for the window's
	// detail, with a limit the main topic's index fits.
	c := &Cluster{cfg: ClusterConfig{KeepQueuesDir: keep}}
	n := &Node{ID: "n2", DataDir: data}
	c.wipes.Store(1)
	if s := c.keepQueuesOf(n); s != "ConsumeQueues kept in wiped/02-n2 (4 topics, 0 KiB)" {
		t.Fatalf("detail %q", s)
	}
	if got, err := os.ReadFile(filepath.Join(keep, "02-n2", "consumequeue", Topic, "0", "00000000000000000000")); err != nil || len(got) != 300 {
		t.Fatalf("main topic's index not kept: %d bytes, %v", len(got), err)
	}
	if _, err := wipeDir(data); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(data); len(ents) != 0 {
		t.Fatalf("wipe left %d entries", len(ents))
	}
	if (&Cluster{}).keepQueuesOf(n) != "" {
		t.Fatal("a cluster without KeepQueuesDir kept queues")
	}
}
