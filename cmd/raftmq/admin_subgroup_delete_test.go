package main

import (
	"testing"
)

// TestAdminDeleteSubGroupByBrokerKeepsDLQ: mqadmin deleteSubGroup -b
// deletes the group's config on that broker only; only with -c does it
// also delete the group's retry and DLQ topics, from that cluster. A -b
// run must not delete %DLQ%group (the dead-lettered messages' topic an
// operator may still need to resend from) from every cluster.
func TestAdminDeleteSubGroupByBrokerKeepsDLQ(t *testing.T) {
	f := startParity(t)
	f.run(t, "updateSubGroup", "-c", "DefaultCluster", "-g", "ParDLQ")
	f.run(t, "updateTopic", "-c", "DefaultCluster", "-t", "%DLQ%ParDLQ", "-r", "1", "-w", "1")
	f.run(t, "topicRoute", "-t", "%DLQ%ParDLQ")
	f.run(t, "deleteSubGroup", "-b", f.leader, "-g", "ParDLQ")
	if out, err := runAdmin(t, append(f.n, "topicRoute", "-t", "%DLQ%ParDLQ")...); err != nil {
		t.Fatalf("deleteSubGroup -b deleted the group's DLQ topic: %v\n%s", err, out)
	}
	f.run(t, "deleteSubGroup", "-c", "DefaultCluster", "-g", "ParDLQ")
	if _, err := runAdmin(t, append(f.n, "topicRoute", "-t", "%DLQ%ParDLQ")...); err == nil {
		t.Fatalf("deleteSubGroup -c kept the group's DLQ topic")
	}
}
