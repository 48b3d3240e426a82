//go:build crashfs

package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/storage"
)

// TestCrashFSStoreKeepsSyncFlushAcks runs the store (SYNC_FLUSH) on a
// CrashFS, crashes it while it runs and reopens: every acknowledged
// message is served, nothing else; under ASYNC_FLUSH with a long flush
// interval, the crash loses messages and recovery still opens cleanly.
func TestCrashFSStoreKeepsSyncFlushAcks(t *testing.T) {
	for _, mode := range []FlushDiskType{SyncFlush, AsyncFlush} {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			c := storage.NewCrashFS()
			cfg := coreConfig(c, dir, mode)
			cfg.FlushIntervalCommitLog = time.Hour
			cfg.FlushIntervalConsumeQueue = time.Hour
			s := openCore(t, cfg)
			const n = 400
			for i := 0; i < n; i++ {
				body := fmt.Sprintf("m-%d-%s", i, strings.Repeat("x", i%200))
				if r, err := s.PutMessage(coreMsg("T", int32(i%2), body)); err != nil || r.Status != PutOK {
					t.Fatalf("put %d: %v %v", i, r.Status, err)
				}
			}
			c.Crash()
			_ = s.Close() // its syncs fail: the disk is gone

			cfg.FS = storage.NewCrashFS()
			s2 := openCore(t, cfg)
			defer s2.Close()
			if !s2.Recovery().Abnormal {
				t.Fatal("crash not detected")
			}
			waitDispatched(t, s2)
			served := len(pullAll(t, s2, "T", 0)) + len(pullAll(t, s2, "T", 1))
			switch {
			case mode == SyncFlush && served != n:
				t.Fatalf("SYNC_FLUSH: %d of %d acknowledged messages served after the crash", served, n)
			case mode == AsyncFlush && served >= n:
				t.Fatalf("ASYNC_FLUSH, flush interval 1 h: all %d messages survived: unsynced data reached the disk", served)
			}
			t.Logf("%s: %d of %d served after the crash", mode, served, n)
		})
	}
}
