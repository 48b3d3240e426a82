package storage

import (
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDiskUsageRatio: the disk guards' ratio is RocketMQ's, blocks in use
// over blocks in use plus those an unprivileged writer may still take;
// root's reserved blocks count as neither.
func TestDiskUsageRatio(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		blocks, free, avail    uint64
		wantUsed, wantCapacity uint64
	}{
		{"reserve excluded", 100, 40, 30, 60, 90},
		{"no reserve", 100, 40, 40, 60, 100},
		{"writer out of room", 100, 10, 0, 90, 90},
		{"empty", 100, 100, 95, 0, 95},
	} {
		st := unix.Statfs_t{Bsize: 4096, Blocks: tc.blocks, Bfree: tc.free, Bavail: tc.avail}
		used, total := StatfsUsage(&st)
		if used != tc.wantUsed*4096 || total != tc.wantCapacity*4096 {
			t.Errorf("%s: used %d total %d blocks, want %d and %d", tc.name, used/4096, total/4096, tc.wantUsed, tc.wantCapacity)
		}
	}
}

// TestDiskUsageMatchesDf: on the real file system the ratio is what df
// prints as Use% (rounded up), so an operator reading df sees the number
// the retention thresholds act on.
func TestDiskUsageMatchesDf(t *testing.T) {
	dir := t.TempDir()
	out, err := exec.Command("df", "--output=pcent", dir).Output()
	if err != nil {
		t.Skipf("no usable df: %v", err)
	}
	used, total, err := OSFS().DiskUsage(dir)
	if err != nil || total == 0 {
		t.Fatalf("DiskUsage: %d/%d %v", used, total, err)
	}
	lines := strings.Fields(string(out))
	dfPct, err := strconv.Atoi(strings.TrimSuffix(lines[len(lines)-1], "%"))
	if err != nil {
		t.Fatalf("df output %q: %v", out, err)
	}
	pct := math.Ceil(float64(used) * 100 / float64(total))
	// Other writers may move the count between the two reads by a point.
	if math.Abs(pct-float64(dfPct)) > 1 {
		t.Fatalf("DiskUsage says %.0f %% used, df says %d %%", pct, dfPct)
	}
	t.Logf("%s: %.0f %% used (df %d %%)", dir, pct, dfPct)
}
