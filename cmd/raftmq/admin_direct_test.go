package main

import (
	"strings"
	"testing"
)

// TestAdminQueryMsgDirectConsume: mqadmin queryMsgById and
// queryMsgByUniqueKey given -g group and -d clientId do not print the
// message: they have that client consume it now (CONSUME_MESSAGE_DIRECTLY
// through the broker holding it) and print the consumer's verdict, the
// tool operators re-push a message with. The listener must run once per
// command, and a client that is not online fails the command with the
// broker's remark.
func TestAdminQueryMsgDirectConsume(t *testing.T) {
	f := startParity(t)
	for _, args := range [][]string{
		{"queryMsgById", "-i", f.offsetID, "-g", "ParCG", "-d", f.consumer},
		{"queryMsgById", "-i", f.uniq, "-t", "ParT", "-g", "ParCG", "-d", f.consumer},
		{"queryMsgByUniqueKey", "-i", f.uniq, "-t", "ParT", "-g", "ParCG", "-d", f.consumer},
	} {
		before := f.consumed.Load()
		out := f.run(t, args...)
		if !strings.Contains(out, "consumeResult=CR_SUCCESS") {
			t.Errorf("%s: output lacks the consumer's verdict:\n%s", strings.Join(args, " "), out)
		}
		if got := f.consumed.Load() - before; got != 1 {
			t.Errorf("%s: the listener ran %d times, want 1", strings.Join(args, " "), got)
		}
		js := f.run(t, append(args, "--json")...)
		if !strings.Contains(js, `"consumeMessageDirectlyResult"`) || !strings.Contains(js, `"CR_SUCCESS"`) {
			t.Errorf("%s --json: no verdict:\n%s", strings.Join(args, " "), js)
		}
	}
	out, err := runAdmin(t, append(f.n, "queryMsgById", "-i", f.offsetID, "-g", "ParCG", "-d", "10.9.9.9@nobody")...)
	if err == nil || !strings.Contains(err.Error(), "not online") {
		t.Fatalf("direct consume by a client not online: %v\n%s; want a failure naming it not online", err, out)
	}
}
