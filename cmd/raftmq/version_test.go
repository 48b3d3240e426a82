package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/testutil"
)

func runVersion(t *testing.T, args ...string) string {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs(append([]string{"version"}, args...))
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestVersionFromBuildInfo runs `raftmq version --json` inside the test
// binary, which carries build info like any module build.
func TestVersionFromBuildInfo(t *testing.T) {
	var v versionInfo
	if err := json.Unmarshal([]byte(runVersion(t, "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.GoVersion != runtime.Version() {
		t.Errorf("goVersion %q, want runtime.Version() %q", v.GoVersion, runtime.Version())
	}
	if v.Module != "github.com/raftmq/raftmq" {
		t.Errorf("module %q", v.Module)
	}
	if v.Version == "" {
		t.Error("empty version")
	}
	if want := runtime.GOOS + "/" + runtime.GOARCH; v.Platform != want {
		t.Errorf("platform %q, want %q", v.Platform, want)
	}
	bi, _ := debug.ReadBuildInfo()
	if v.Version != bi.Main.Version && !(bi.Main.Version == "" && v.Version == "(devel)") {
		t.Errorf("version %q, build info says %q", v.Version, bi.Main.Version)
	}
	text := runVersion(t)
	for _, want := range []string{"module   github.com/raftmq/raftmq", "go       " + runtime.Version()} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}
}

func TestVersionVCSSettings(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/raftmq/raftmq", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"},
		},
	}
	v := readVersion(bi, true)
	want := versionInfo{Module: "github.com/raftmq/raftmq", Version: "v1.2.3", Commit: "0123456789abcdef",
		CommitTime: "2026-01-02T03:04:05Z", Dirty: true, GoVersion: "go1.99.1", Platform: "linux/arm64"}
	if v != want {
		t.Fatalf("got %+v\nwant %+v", v, want)
	}
	var out bytes.Buffer
	if err := v.write(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "commit   0123456789abcdef (dirty)\n") {
		t.Errorf("text output:\n%s", out.String())
	}
	bi.Settings = nil
	bi.Main.Version = ""
	v = readVersion(bi, true)
	if v.Commit != "" || v.Dirty || v.Version != "(devel)" {
		t.Errorf("no VCS settings: %+v", v)
	}
	out.Reset()
	_ = v.write(&out)
	if !strings.Contains(out.String(), "commit   unknown") {
		t.Errorf("text output without VCS info:\n%s", out.String())
	}
	if v := readVersion(nil, false); v.Version != "unknown" || v.GoVersion != "unknown" {
		t.Errorf("no build info: %+v", v)
	}
}

// TestVersionBinaryStampsCommit builds raftmq with -buildvcs in this
// checkout and checks that `raftmq version --json` names HEAD and says dirty
// exactly when git sees a change. It builds in place, not in a clone: the
// build cache keys the module's packages by their directory, so in place only
// the command itself compiles again. The go command stamps VCS information
// only when .git is a directory, which a linked worktree's is not. A clean
// checkout (CI's) checks dirty=false only; reading vcs.modified=true is
// TestVersionVCSSettings's.
func TestVersionBinaryStampsCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the raftmq binary")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	top, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	root := strings.TrimSpace(string(top))
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		t.Skip("the go command stamps VCS information only when .git is a directory")
	}
	head, err := exec.Command(git, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	// What the go command asks git to decide vcs.modified.
	status, err := exec.Command(git, "-C", root, "status", "--porcelain").Output()
	if err != nil {
		t.Fatal(err)
	}
	dirty := len(bytes.TrimSpace(status)) > 0
	bin := filepath.Join(t.TempDir(), "raftmq")
	// Built as this test binary was (-race or not), so that the build
	// reuses the packages the test run compiled; the stamping does not
	// depend on those flags.
	args := []string{"build", "-buildvcs=true", "-o", bin}
	if testutil.RaceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("raftmq version: %v\n%s", err, out)
	}
	t.Logf("raftmq version --json:\n%s", out)
	var v versionInfo
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := strings.TrimSpace(string(head)); v.Commit != want {
		t.Errorf("commit %q, want HEAD %q", v.Commit, want)
	}
	if v.Dirty != dirty {
		t.Errorf("dirty %v, want %v (git status --porcelain:\n%s)", v.Dirty, dirty, status)
	}
	if v.GoVersion != runtime.Version() || v.CommitTime == "" || v.Module != "github.com/raftmq/raftmq" {
		t.Errorf("version info %+v", v)
	}
	// Go 1.24+ derives a pseudo-version (or a tag) from the commit.
	if short := strings.TrimSpace(string(head))[:12]; !strings.Contains(v.Version, short) && !strings.HasPrefix(v.Version, "v") {
		t.Errorf("version %q names neither a tag nor commit %s", v.Version, short)
	}
}
