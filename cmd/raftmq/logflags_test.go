package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestNamesrvLogFileReopensOnSIGHUP runs the real binary (the test binary
// re-executed as main) as a name server logging text to a file named in
// its config, with one ignored RocketMQ key: the warning and the start
// line land in the file in text form; after the file is moved away a
// SIGHUP makes the process log to a new file at the same path; SIGTERM
// still stops it cleanly.
func TestNamesrvLogFileReopensOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "namesrv.log")
	conf := writeConf(t, "kvConfigPath="+filepath.Join(dir, "kv.json")+"\nmetricsPort=-1\nrocketmqHome=/opt/rocketmq\n"+
		"logFile="+logPath+"\nlogFormat=text\n")
	port := testutil.FreePort(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = mainEnv("namesrv", "-c", conf, "--listen", "127.0.0.1:"+strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	read := func(p string) string { b, _ := os.ReadFile(p); return string(b) }
	testutil.WaitFor(t, 10*time.Second, "the start line in the log file", func() bool {
		return strings.Contains(read(logPath), "name server started")
	})
	first := read(logPath)
	if !strings.Contains(first, "\tWARN\t") || !strings.Contains(first, "rocketmqHome (raftmq has no ROCKETMQ_HOME") ||
		!strings.Contains(first, "\tINFO\t") || strings.HasPrefix(first, "{") {
		t.Fatalf("want text lines with the ignored-key warning:\n%s", first)
	}
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "a new log file after SIGHUP", func() bool {
		return strings.Contains(read(logPath), "log file reopened on SIGHUP")
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("name server exited with %v after SIGHUP and SIGTERM", err)
	}
	if !strings.Contains(read(logPath), "name server stopped") || strings.Contains(read(logPath+".1"), "reopened") {
		t.Fatalf("after the reopen, lines go to the new file only:\nnew:\n%s\nold:\n%s", read(logPath), read(logPath+".1"))
	}
}
