package main

import (
	"encoding/json"
	"testing"
)

// TestAdminDeleteSubGroupByBrokerKeepsDLQ: mqadmin deleteSubGroup -b
// deletes the group's config on that broker only; only with -c does it
// also delete the group's retry and DLQ topics, from that cluster. A -b
// run must not delete %DLQ%group (the dead-lettered messages' topic an
// operator may still need to resend from) from every cluster. Each form
// prints mqadmin's success line (DeleteSubscriptionGroupCommand's
// printf), which scripts written for mqadmin match.
func TestAdminDeleteSubGroupByBrokerKeepsDLQ(t *testing.T) {
	f := startParity(t)
	f.run(t, "updateSubGroup", "-c", "DefaultCluster", "-g", "ParDLQ")
	f.run(t, "updateTopic", "-c", "DefaultCluster", "-t", "%DLQ%ParDLQ", "-r", "1", "-w", "1")
	f.run(t, "topicRoute", "-t", "%DLQ%ParDLQ")
	out := f.run(t, "deleteSubGroup", "-b", f.leader, "-g", "ParDLQ")
	if want := "delete subscription group [ParDLQ] from broker [" + f.leader + "] success.\n"; out != want {
		t.Errorf("deleteSubGroup -b printed %q; want mqadmin's %q", out, want)
	}
	if out, err := runAdmin(t, append(f.n, "topicRoute", "-t", "%DLQ%ParDLQ")...); err != nil {
		t.Fatalf("deleteSubGroup -b deleted the group's DLQ topic: %v\n%s", err, out)
	}
	out = f.run(t, "deleteSubGroup", "-c", "DefaultCluster", "-g", "ParDLQ")
	if want := "delete subscription group [ParDLQ] from broker [" + f.leader + "] in cluster [DefaultCluster] success.\n"; out != want {
		t.Errorf("deleteSubGroup -c printed %q; want mqadmin's %q", out, want)
	}
	var addrs []string
	f.js(t, &addrs, "deleteSubGroup", "-b", f.leader, "-g", "ParDLQ")
	if len(addrs) != 1 || addrs[0] != f.leader {
		t.Errorf("deleteSubGroup -b --json: %v; want [%s]", addrs, f.leader)
	}
	if _, err := runAdmin(t, append(f.n, "topicRoute", "-t", "%DLQ%ParDLQ")...); err == nil {
		t.Fatalf("deleteSubGroup -c kept the group's DLQ topic")
	}
}

// TestAdminDeleteSubGroupRemoveOffset: as mqadmin, deleteSubGroup keeps
// the group's consumer offsets unless -r true is given (the request's
// cleanOffset); a group deleted without -r keeps its consume progress.
func TestAdminDeleteSubGroupRemoveOffset(t *testing.T) {
	f := startParity(t)
	f.run(t, "updateSubGroup", "-c", "DefaultCluster", "-g", "ParKeep")
	f.run(t, "cloneGroupOffset", "-s", "ParCG", "-d", "ParKeep", "-t", "ParT")
	progress := func() (consumerProgress, error) {
		var cp consumerProgress
		out, err := runAdmin(t, append(f.n, "consumerProgress", "-g", "ParKeep", "-t", "ParT", "--json")...)
		if err == nil {
			err = json.Unmarshal([]byte(out), &cp)
		}
		return cp, err
	}
	if cp, err := progress(); err != nil || len(cp.Queues) != 4 || cp.DiffTotal != 0 {
		t.Fatalf("ParKeep's progress after the clone: %+v %v", cp, err)
	}
	f.run(t, "deleteSubGroup", "-b", f.leader, "-g", "ParKeep")
	if cp, err := progress(); err != nil || len(cp.Queues) != 4 || cp.DiffTotal != 0 {
		t.Fatalf("deleteSubGroup without -r dropped ParKeep's offsets: %+v %v", cp, err)
	}
	f.run(t, "deleteSubGroup", "-b", f.leader, "-g", "ParKeep", "-r", "false")
	if cp, err := progress(); err != nil || len(cp.Queues) != 4 {
		t.Fatalf("deleteSubGroup -r false dropped ParKeep's offsets: %+v %v", cp, err)
	}
	f.run(t, "deleteSubGroup", "-b", f.leader, "-g", "ParKeep", "-r", "true")
	// Without offsets every queue reads as unconsumed.
	if cp, err := progress(); err != nil || cp.DiffTotal != parityMsgs {
		t.Fatalf("deleteSubGroup -r true kept ParKeep's offsets: %+v %v", cp, err)
	}
}
