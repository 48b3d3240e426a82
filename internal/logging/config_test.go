package logging

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
)

func fileConfig(t *testing.T, format string) Config {
	t.Helper()
	c := DefaultConfig()
	c.Format = format
	c.File = filepath.Join(t.TempDir(), "raftmq.log")
	return c
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFormats: json writes one JSON object a line with the fields; text
// writes the console layout (level word, message, fields as JSON).
func TestFormats(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		c := fileConfig(t, format)
		l, err := Open(c)
		if err != nil {
			t.Fatal(err)
		}
		l.Named("store").Info("segment opened", zap.String("path", "/x/0000"), zap.Int("n", 3))
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		got := readFile(t, c.File)
		if info, err := os.Stat(c.File); err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("%s: log file mode %v, %v; want 0600", format, info.Mode(), err)
		}
		switch format {
		case "json":
			var line map[string]any
			if err := json.Unmarshal([]byte(strings.TrimSpace(got)), &line); err != nil {
				t.Fatalf("json line %q: %v", got, err)
			}
			if line["msg"] != "segment opened" || line["logger"] != "store" || line["path"] != "/x/0000" || line["n"] != 3.0 || line["ts"] == nil {
				t.Fatalf("json line %v", line)
			}
		case "text":
			if strings.HasPrefix(got, "{") || !strings.Contains(got, "\tINFO\tstore\t") ||
				!strings.Contains(got, "segment opened") || !strings.Contains(got, `{"path": "/x/0000", "n": 3}`) {
				t.Fatalf("text line %q", got)
			}
		}
	}
}

func TestValidate(t *testing.T) {
	c := DefaultConfig()
	c.Level, c.Format, c.FileMaxBackups = "loud", "xml", -1
	err := c.Validate()
	for _, key := range []string{"logLevel", "logFormat", "logFileMaxBackups"} {
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), key) {
			t.Errorf("want every bad key in one error, %s missing: %v", key, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenFailsOnUnwritablePath: a log file that cannot be created fails at
// Open, naming it, not at the first line.
func TestOpenFailsOnUnwritablePath(t *testing.T) {
	c := DefaultConfig()
	c.File = filepath.Join(t.TempDir(), "missing-dir-is-a-file")
	if err := os.WriteFile(c.File, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c.File = filepath.Join(c.File, "raftmq.log")
	if _, err := Open(c); err == nil || !strings.Contains(err.Error(), "logFile") {
		t.Fatalf("want an error naming logFile, got %v", err)
	}
}

// TestRotatesBySize: past logFileMaxSizeMB the file is renamed with a
// timestamp and a new one started; backups beyond logFileMaxBackups go.
func TestRotatesBySize(t *testing.T) {
	c := fileConfig(t, "json")
	c.FileMaxSizeMB, c.FileMaxBackups = 1, 1
	l, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 1000)
	for range 3000 { // ~3 MiB: two rotations
		l.Info("fill", zap.String("pad", pad))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(c.File)
	testutil.WaitFor(t, 5*time.Second, "one backup kept (the other removed)", func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, "raftmq-*.log"))
		return len(m) == 1
	})
	info, err := os.Stat(c.File)
	if err != nil || info.Size() > 1<<20 {
		t.Fatalf("current file %v, %v: want at most 1 MiB", info, err)
	}
}

// TestReopen: after logrotate moves the file away, Reopen makes the next
// line create a new file at the configured path.
func TestReopen(t *testing.T) {
	c := fileConfig(t, "json")
	l, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Info("before")
	moved := c.File + ".1"
	if err := os.Rename(c.File, moved); err != nil {
		t.Fatal(err)
	}
	l.Info("still to the moved file")
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Info("after")
	old, cur := readFile(t, moved), readFile(t, c.File)
	if !strings.Contains(old, "before") || !strings.Contains(old, "still to the moved file") || strings.Contains(old, "after") {
		t.Fatalf("moved file: %q", old)
	}
	if !strings.Contains(cur, "after") || strings.Contains(cur, "before") {
		t.Fatalf("reopened file: %q", cur)
	}
}

// sighupChildEnv makes the test binary run sighupChild instead of tests.
const sighupChildEnv = "RAFTMQ_LOGGING_SIGHUP_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(sighupChildEnv); path != "" {
		os.Exit(sighupChild(path))
	}
	// lumberjack starts one mill goroutine per file logger that its Close
	// does not stop (v2.2.1); every goroutine of this package's own must end.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("gopkg.in/natefinch/lumberjack%2ev2.(*Logger).millRun"))
}

// sighupChild logs to path with the SIGHUP handler on, says "ready", logs
// each stdin line and exits at EOF.
func sighupChild(path string) int {
	c := DefaultConfig()
	c.File = path
	l, err := Open(c)
	if err != nil {
		return 2
	}
	l.ReopenOnSIGHUP()
	l.Info("before")
	os.Stdout.WriteString("ready\n")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		l.Info(sc.Text())
	}
	if l.Close() != nil {
		return 3
	}
	return 0
}

// TestSIGHUPReopensInChild sends a real SIGHUP to a child process after
// moving its log file away, as logrotate's postrotate would: the child
// keeps running and writes on to a new file at the configured path.
func TestSIGHUPReopensInChild(t *testing.T) {
	path := filepath.Join(t.TempDir(), "child.log")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), sighupChildEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	moved := path + ".1"
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the child to reopen its log file", func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(b), "log file reopened on SIGHUP")
	})
	if _, err := stdin.Write([]byte("after the signal\n")); err != nil {
		t.Fatal(err)
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child exited with %v (SIGHUP must not kill it)", err)
	}
	old, cur := readFile(t, moved), readFile(t, path)
	if !strings.Contains(old, `"before"`) || strings.Contains(old, "after the signal") {
		t.Fatalf("moved file: %q", old)
	}
	if !strings.Contains(cur, "after the signal") {
		t.Fatalf("new file: %q", cur)
	}
}
