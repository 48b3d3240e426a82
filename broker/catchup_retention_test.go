package broker

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker/store"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/raftlog/raftlogtest"
	"github.com/raftmq/raftmq/storage"
)

// logOnlySource serves a leader's log to a catch-up; it has no queues.
type logOnlySource struct{ lead *raftlog.LogStore }

func (s logOnlySource) logStart(context.Context) (uint64, int64, error) {
	return s.lead.FirstPosition()
}

func (s logOnlySource) readLog(_ context.Context, pos int64, n int) ([]byte, error) {
	return s.lead.ReadRange(pos, n)
}

func (s logOnlySource) readUnits(context.Context, string, int32, int64, int) (int64, []store.CQUnit, error) {
	return 0, nil, errors.New("no queues")
}

func (s logOnlySource) pace(context.Context) (int64, error) { return 0, nil }

// TestCatchupEndsWhenRetentionPassedTheReset: retention on a member whose
// catch-up has not committed yet (forced by a full disk, which the
// catch-up itself fills) may delete segments past its snapshot reset.
// Nothing before the reset is then worth fetching: the member would not
// retain it. The catch-up must end, not retry a commit that can never
// succeed and keep the member from ever standing for election.
func TestCatchupEndsWhenRetentionPassedTheReset(t *testing.T) {
	opts := func(fs storage.FS) raftlog.Options {
		return raftlog.Options{FS: fs, SegmentSize: 16 << 10, IndexFileSize: 512, Sync: true}
	}
	lead, err := raftlog.Open("/lead", opts(storage.NewFaultFS(1)))
	if err != nil {
		t.Fatal(err)
	}
	defer lead.Close()
	if err := lead.StoreLogs(raftlogtest.Entries(1, 300, 1)); err != nil {
		t.Fatal(err)
	}
	p, err := lead.SnapshotPosition(200)
	if err != nil {
		t.Fatal(err)
	}
	fol, err := raftlog.Open("/fol", opts(storage.NewFaultFS(2)))
	if err != nil {
		t.Fatal(err)
	}
	defer fol.Close()
	if err := fol.RestoreFrom(p); err != nil {
		t.Fatal(err)
	}
	if err := fol.StoreLogs(raftlogtest.Entries(201, 300, 1)); err != nil { // resets at 201
		t.Fatal(err)
	}
	if !fol.BackfillPending() {
		t.Fatal("no backfill after the reset")
	}
	first, err := fol.DeleteSegmentsBefore(280)
	if err != nil || first <= 201 {
		t.Fatalf("retention: first index %d, %v; want past the reset at 201", first, err)
	}
	g := &Group{logs: fol, log: zap.NewNop()}
	err = g.catchupOnce(context.Background(), logOnlySource{lead: lead})
	if err != nil || fol.BackfillPending() {
		t.Fatalf("catch-up after retention passed the reset: %v, still pending %v", err, fol.BackfillPending())
	}
}
