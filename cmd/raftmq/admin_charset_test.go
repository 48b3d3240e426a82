package main

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/testutil"
)

// TestAdminBodyCharsetRefused: mqadmin prints message bodies decoded
// with printMsg's / printMsgByQueue's -c charsetName and
// queryMsgByOffset's / queryMsgById's -f bodyFormat. raftmq prints bodies as UTF-8 only,
// so another charset is a usage error before anything is sent, not a
// flag taken and ignored (the bodies would print garbled as if decoded).
func TestAdminBodyCharsetRefused(t *testing.T) {
	dead := "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))
	for _, args := range [][]string{
		{"printMsg", "-t", "T", "-c", "GBK"},
		{"printMsgByQueue", "-t", "T", "-a", "broker-a", "-i", "0", "-c", "GBK"},
		{"queryMsgByOffset", "-t", "T", "-b", "broker-a", "-i", "0", "-o", "0", "-f", "GBK"},
		{"queryMsgById", "-i", "0A000001000078BF0000000000000000", "-f", "GBK"},
	} {
		_, err := runAdmin(t, append([]string{"-n", dead, "--timeout", "500ms"}, args...)...)
		if !errors.Is(err, errAdminUsage) || !strings.Contains(err.Error(), "GBK") {
			t.Errorf("%s: %v; want a usage error naming the charset", strings.Join(args, " "), err)
		}
	}
	// UTF-8, however spelled, is what raftmq prints: it gets as far as
	// the (dead) name server.
	for _, cs := range []string{"UTF-8", "utf8"} {
		if _, err := runAdmin(t, "-n", dead, "--timeout", "500ms", "printMsg", "-t", "T", "-c", cs); errors.Is(err, errAdminUsage) {
			t.Errorf("printMsg -c %s: %v", cs, err)
		}
	}
}
