package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestAdminPartialWritesShowWhatTookEffect: a write sent to several
// targets (every -n name server, every group of -c) that some took and
// some did not fails the command, and still prints the lines of the
// targets that took it, as mqadmin prints one per target: in an incident
// the operator must know that wipeWritePerm already stopped writes on one
// name server before repeating it for the other.
func TestAdminPartialWritesShowWhatTookEffect(t *testing.T) {
	f := startParity(t)
	dead := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	n := []string{"-n", f.nsAddr + ";" + dead, "--timeout", "1s"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"wipeWritePerm", "-b", "broker-a"}, "wipe write perm of broker[broker-a] in name server[" + f.nsAddr + "] OK"},
		{[]string{"addWritePerm", "-b", "broker-a"}, "add write perm of broker[broker-a] in name server[" + f.nsAddr + "] OK"},
		{[]string{"updateKvConfig", "-s", "ParNS", "-k", "k", "-v", "v"}, f.nsAddr},
		{[]string{"deleteKvConfig", "-s", "ParNS", "-k", "k"}, f.nsAddr},
	} {
		out, err := runAdmin(t, append(append([]string{}, n...), c.args...)...)
		if err == nil || !strings.Contains(err.Error(), dead) {
			t.Errorf("%s with one name server down: %v; want a failure naming %s", c.args[0], err, dead)
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("%s with one name server down printed:\n%s\nwant the line of the one that took it: %q", c.args[0], out, c.want)
		}
	}
}
