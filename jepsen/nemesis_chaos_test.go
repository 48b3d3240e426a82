package jepsen

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/raftmq/raftmq/raftlog"
)

// TestFlipBitChangesOneBitInData checks that flipBit inverts exactly one
// bit, inside the file's data: not its preallocated zero tail, not a zero
// head (a caught-up member's oldest segment before its first entry).
func TestFlipBitChangesOneBitInData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000")
	orig := append(append(make([]byte, 2000), bytes.Repeat([]byte{0xA5}, 1000)...), make([]byte, 3000)...)
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	for r := int64(0); r < 50; r++ {
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		off, bit, err := flipBit(path, r*7919, int(r%8))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		if off <= 2000 || off >= 3000 {
			t.Fatalf("flip at %d, in a zero run", off)
		}
		var diff int
		for i := range got {
			if x := got[i] ^ orig[i]; x != 0 {
				diff++
				if int64(i) != off || x != 1<<bit {
					t.Fatalf("byte %d changed by %#x; reported byte %d bit %d", i, x, off, bit)
				}
			}
		}
		if diff != 1 {
			t.Fatalf("%d bytes changed", diff)
		}
	}
	if err := os.WriteFile(path, make([]byte, 100), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := flipBit(path, 1, 0); err == nil {
		t.Fatal("a file of zeros got a flip")
	}
}

// TestDefaultNemesesAndTags pins what the full profile runs and builds.
func TestDefaultNemesesAndTags(t *testing.T) {
	def := DefaultNemeses()
	for _, n := range []string{"kill-namesrv", "partition-clients", "net-loss-delay", "slow-disk", "kill-leader", "replace-member", "rebuild-member", "bitflip-segment"} {
		if !slices.Contains(def, n) {
			t.Fatalf("%s missing from the default set %v", n, def)
		}
		if _, err := NewNemesis(n); err != nil {
			t.Fatal(err)
		}
	}
	if got := BuildTags(def); got != "crashfs,slowfs" {
		t.Fatalf("tags %q", got)
	}
	if got := BuildTags([]string{"kill-leader"}); got != "" {
		t.Fatalf("tags %q", got)
	}
	if p := Profiles()["full"]; !slices.Equal(p.Nemeses, def) {
		t.Fatalf("full profile nemeses %v", p.Nemeses)
	}
	if p := Profiles()["saturation"]; p.Workload.OpsPerSecond != 0 || p.Workload.WorkersPerProducer < 8 {
		t.Fatalf("saturation workload %+v", p.Workload)
	}
}

// TestDamageLineMatchesBrokerErrors: bitflip-segment recognises the
// broker's own damage reports (raftlog's CorruptionError and DamageError
// as a start failure or inside a JSON log line) and nothing else.
func TestDamageLineMatchesBrokerErrors(t *testing.T) {
	seg := "/data/n1/commitlog/00000000000004194304"
	errs := []error{
		&raftlog.CorruptionError{Path: seg, FileOffset: 1234, Position: 4195538, Index: 9, ValidIndex: 90, Cause: raftlog.ErrCorruptFrame},
		&raftlog.DamageError{Path: seg, FileOffset: 1234, Position: 4195538, AfterIndex: 8, Cause: raftlog.ErrCorruptFrame},
	}
	for _, e := range errs {
		line := fmt.Sprintf(`{"level":"error","msg":"damaged Raft log","error":%q}`, e.Error())
		m := damageLine.FindStringSubmatch(line)
		if m == nil || filepath.Base(m[2]) != filepath.Base(seg) || m[3] != "1234" {
			t.Fatalf("%T: %v in %s", e, m, line)
		}
	}
	if damageLine.MatchString(`{"msg":"raftlog: torn or corrupt tail truncated","offset":12}`) {
		t.Fatal("a torn-tail line matched")
	}
}
