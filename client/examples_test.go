package client_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestExamples builds every program under examples/ and runs each one
// against an in-process 3-node group (its name server passed with -n),
// checking that it exits 0, prints what it should and writes nothing to
// stderr: examples log only failures there, so a line on a successful run
// is an error a user would see and wonder about.
func TestExamples(t *testing.T) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		t.Skipf("no go toolchain at %s: %v", gobin, err)
	}
	bin := t.TempDir()
	// Without a symbol table or DWARF (-s -w) the eight links take a
	// fraction of the time; a panic's stack trace is unchanged.
	build := exec.Command(gobin, "build", "-ldflags=-s -w", "-o", bin+string(filepath.Separator), "../examples/...")
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ../examples/...: %v\n%s", err, out)
	}
	ec := sharedE2ECluster(t)
	ns := ec.NamesrvAddr()
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"simple", []string{"-m", "10"}, []string{"sent 10\n", "received 10\n"}},
		{"ordered", []string{"-m", "4"}, []string{"sent 16\n", "received 16 in order\n"}},
		{"broadcast", []string{"-m", "8"}, []string{"sent 8\n", "instance-a received 8\n", "instance-b received 8\n", "every instance received all 8\n"}},
		{"batch", []string{"-m", "25", "-size", "10"}, []string{"sent a batch of 5 ", "sent 25\n", "received 25\n"}},
		{"idempotent", []string{"-m", "30"}, []string{"producer id ", "sent 30\n", "received 30 distinct, 0 duplicates\n"}},
		{"timer", []string{"-m", "4"}, []string{"sent 4\n", "received 4, 0 before their time\n"}},
		{"requestreply", []string{"-m", "5"}, []string{`"request 4" -> "REQUEST 4"`, "replied 5\n"}},
		{"transaction", []string{"-m", "10"}, []string{"sent 10: 5 committed, 5 rolled back\n", "received 5 committed, 0 rolled back\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each example has topics and groups of its own: they share
			// the cluster side by side (-parallel at a time, TestMain).
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, tc.name), append([]string{"-n", ns, "-timeout", "45s"}, tc.args...)...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v\n%s%s", tc.name, err, out, stderr.String())
			}
			t.Logf("%s", out)
			if stderr.Len() > 0 {
				t.Errorf("%s succeeded but wrote to stderr:\n%s", tc.name, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("%s output lacks %q:\n%s", tc.name, w, out)
				}
			}
		})
	}
	// Nothing to send is a usage error at once, not a wait for nothing.
	t.Run("nothing to send", func(t *testing.T) {
		cmd := exec.Command(filepath.Join(bin, "simple"), "-n", ns, "-m", "0")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "-m must be at least 1, got 0") {
			t.Fatalf("simple -m 0: %v\n%s", err, out)
		}
	})
}
