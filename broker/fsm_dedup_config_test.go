package broker

import (
	"context"
	"testing"

	"github.com/raftmq/raftmq/broker/store"
)

// TestGroupDedupWindowFromTheLog: the dedup window decides whether a retry
// is stored, so every replica must apply the same one whatever its own
// raftDedupWindow says. Member n0 is configured with a window of 4, the
// others with the default: a sequence more than 4 below its stream's
// newest, never sent before, must end up stored on all three members or
// on none, and a member restarted with another window keeps the group's.
func TestGroupDedupWindowFromTheLog(t *testing.T) {
	c := newTestCluster(t, clusterOpts{tune: func(g *GroupConfig) {
		if g.Raft.DLegerSelfID == "n0" {
			g.DedupWindow = 4
		}
	}})
	c.createTopic("T", 1)
	l := c.leader()
	ctx := context.Background()
	for seq := int64(1); seq <= 12; seq++ {
		if seq == 2 {
			continue
		}
		if _, err := l.g().PutMessages(ctx, []*store.Message{testMessage("T", 0, "k", "pid", seq, 64)}); err != nil {
			t.Fatal(err)
		}
	}
	// Sequence 2 is 10 below the newest: outside a window of 4, inside
	// one of 1024.
	if _, err := l.g().PutMessages(ctx, []*store.Message{testMessage("T", 0, "k2", "pid", 2, 64)}); err != nil {
		t.Fatal(err)
	}
	commit := c.waitCaughtUp()
	c.checkIdentical(0, commit, 1)
	if _, err := l.g().SnapshotAndTruncate(); err != nil {
		t.Fatal(err)
	}
	// A follower restarts from the snapshot configured with yet another
	// window: it keeps applying the group's.
	f := c.followerOf(l)
	c.stop(f)
	c.nodes[f].cfg.DedupWindow = 7
	c.start(f)
	c.waitCaughtUp()
	want := c.leader().g().st.dedupParams()
	for _, n := range c.nodes {
		if got := n.g().st.dedupParams(); got != want || got.Window == 7 {
			t.Fatalf("%s applies dedup window/TTL %+v, the leader %+v", n.id, got, want)
		}
	}
}

// TestDedupParamsInSnapshotImage: the replicated window and TTL travel in
// the snapshot image, an image without them (the defaults, or one written
// before CmdDedupParams) loads the base ones, and the decoder refuses
// parameters no leader writes.
func TestDedupParamsInSnapshotImage(t *testing.T) {
	s := newState(1024, 3_600_000)
	if img := s.imageLocked(); img.Dedup.Window != 0 || img.Dedup.TTLms != 0 {
		t.Fatalf("image of the base parameters carries %+v", img.Dedup)
	}
	s.applyLocked(&Command{Type: CmdDedupParams, Dedup: dedupParams{Window: 4, TTLms: 1000}}, 1)
	img := s.imageLocked()
	r := newState(1024, 3_600_000)
	r.loadLocked(img)
	if got := r.dedupParams(); got != (dedupParams{Window: 4, TTLms: 1000}) {
		t.Fatalf("restored parameters %+v", got)
	}
	r.loadLocked(newState(1024, 3_600_000).imageLocked())
	if got := r.dedupParams(); got != (dedupParams{Window: 1024, TTLms: 3_600_000}) {
		t.Fatalf("parameters after loading an image without them: %+v", got)
	}
	for _, p := range []dedupParams{{Window: 0, TTLms: 1}, {Window: 1, TTLms: 0}, {Window: maxDedupWindow + 1, TTLms: 1}, {Window: -1, TTLms: 1}} {
		ext, data, err := EncodeCommand(&Command{Type: CmdDedupParams, Dedup: p}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeCommand(ext, data); err == nil {
			t.Fatalf("decoded dedup parameters %+v", p)
		}
	}
}
