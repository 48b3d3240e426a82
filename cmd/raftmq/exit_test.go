package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/raftlog"
)

// TestExitCodeRefused: a server that cannot start for a reason a restart
// does not change exits exitRefused, so a supervisor configured not to
// restart on it (deploy's systemd unit) leaves it down; anything else
// exits 1 and may be restarted.
func TestExitCodeRefused(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{refused(errors.New("bad key")), exitRefused},
		{fmt.Errorf("open node: %w", broker.ErrRemovedMember), exitRefused},
		{fmt.Errorf("open node: %w", raftlog.ErrDamagedLog), exitRefused},
		{errors.New("listen tcp 127.0.0.1:10911: address already in use"), 1},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	if refused(nil) != nil {
		t.Fatal("refused(nil) is not nil")
	}

	// The process: a broker.conf with a misspelled key, a name server
	// conf with a bad value.
	dir := t.TempDir()
	for _, c := range []struct{ cmd, conf string }{
		{"broker", "brokerClusterName=C\nbrokerNme=b\n"},
		{"namesrv", "listenPort=-1\n"},
	} {
		path := filepath.Join(dir, c.cmd+".conf")
		if err := os.WriteFile(path, []byte(c.conf), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = mainEnv(c.cmd, "-c", path)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitRefused {
			t.Fatalf("raftmq %s with a bad conf: %v (stderr %q), want exit status %d", c.cmd, err, stderr.String(), exitRefused)
		}
		if !strings.Contains(stderr.String(), "raftmq:") {
			t.Fatalf("raftmq %s: stderr does not say why:\n%s", c.cmd, stderr.String())
		}
	}
}
