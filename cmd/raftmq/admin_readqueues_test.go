package main

import (
	"testing"
)

// TestPrintMsgReadQueuesOnly: a topic whose readQueueNums is below its
// writeQueueNums (queues being retired) still prints: as mqadmin's pull
// consumer, printMsg reads the read queues, and pulls of the others are
// refused by the brokers.
func TestPrintMsgReadQueuesOnly(t *testing.T) {
	c := startAdminCluster(t)
	n := []string{"-n", c.nsAddr}
	mustAdmin(t, append(n, "updateTopic", "-c", "DefaultCluster", "-t", "RqT", "-r", "1", "-w", "2")...)
	for _, q := range []string{"0", "1"} {
		mustAdmin(t, append(n, "sendMessage", "-t", "RqT", "-p", "m"+q, "-b", "broker-a", "-i", q)...)
	}
	if out, err := runAdmin(t, append(n, "printMsg", "-t", "RqT")...); err != nil {
		t.Fatalf("printMsg of a topic with 1 read queue of 2: %v\n%s", err, out)
	}
}
