package jepsen

import (
	"context"
	"testing"

	"go.uber.org/zap/zaptest"
)

func TestSmokeCluster(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bin, err := BuildBinary(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(ClusterConfig{Dir: dir, Binary: bin, SegmentBytes: 8 << 20, ElectionMillis: 300, Queues: 8}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Log("leader", c.Leader(ctx))
}
