package client

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Scenario scripts in the etcd-io/raft datadriven style: a command line,
// "----", the expected output, a blank line; '#' lines are comments.
// RAFTMQ_UPDATE_GOLDEN=1 rewrites the expectations of failing cases.

type scenarioCase struct {
	cmd, want string
}

func parseScenario(t *testing.T, path string) []scenarioCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []scenarioCase
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "----" {
			t.Fatalf("%s:%d: command %q not followed by ----", path, i+1, l)
		}
		j := i + 2
		var want []string
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != ""; j++ {
			want = append(want, lines[j])
		}
		out = append(out, scenarioCase{cmd: l, want: strings.Join(want, "\n")})
		i = j
	}
	return out
}

// runScenarioFile runs every case of path through exec and compares.
// With RAFTMQ_UPDATE_GOLDEN=1 a failing file is rewritten with the actual
// output, keeping its comments.
func runScenarioFile(t *testing.T, path string, exec func(cmd string) string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cases := parseScenario(t, path)
	var out strings.Builder
	failed := false
	next := 0
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			out.WriteString(lines[i] + "\n")
			continue
		}
		c := cases[next]
		next++
		got := exec(c.cmd)
		if got != c.want {
			failed = true
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", path, c.cmd, got, c.want)
		}
		out.WriteString(c.cmd + "\n----\n")
		if got != "" {
			out.WriteString(got + "\n")
		}
		// Skip the old expectation up to its terminating blank line.
		for i += 2; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
		}
		i--
	}
	if failed && os.Getenv("RAFTMQ_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", path)
	}
}

func scenarioArgs(t *testing.T, fields []string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("argument %q is not key=value", f)
		}
		m[k] = v
	}
	return m
}

func globScenarios(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files in testdata/%s: %v", dir, err)
	}
	return files
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	return n
}
