package main

import (
	"strings"
	"testing"
)

// TestBrokerCPUPerMsg checks the per-process arithmetic: separate processes
// get a line each (leader first, a role change shown), members of one
// process are counted once, and a member that restarted or did not answer
// before the run is left out.
func TestBrokerCPUPerMsg(t *testing.T) {
	s := func(addr string, leader bool, cpu int64, inst string) cpuSample {
		return cpuSample{name: "g", addr: addr, leader: leader, cpuUs: cpu, instance: inst}
	}
	before := map[string]cpuSample{
		"a:1": s("a:1", false, 1000, "p1"), "a:2": s("a:2", true, 5000, "p2"), "a:3": s("a:3", false, 0, "p3"),
	}
	after := map[string]cpuSample{
		"a:1": s("a:1", true, 3000, "p1"), "a:2": s("a:2", false, 9000, "p2"), "a:3": s("a:3", false, 100, "p3-restarted"),
		"a:4": s("a:4", false, 50, "p4"),
	}
	got := brokerCPUPerMsg(before, after, 100)
	if len(got) != 2 {
		t.Fatalf("lines: %+v", got)
	}
	if got[0].Role != "FOLLOWER→LEADER" || got[0].CPUus != 20 || got[0].Members[0] != "g/FOLLOWER→LEADER@a:1" {
		t.Errorf("first line: %+v", got[0])
	}
	if got[1].Role != "LEADER→FOLLOWER" || got[1].CPUus != 40 {
		t.Errorf("second line: %+v", got[1])
	}

	shared := map[string]cpuSample{"a:1": s("a:1", false, 0, "dev"), "a:2": s("a:2", true, 0, "dev"), "a:3": s("a:3", false, 0, "dev")}
	shared2 := map[string]cpuSample{"a:1": s("a:1", false, 6000, "dev"), "a:2": s("a:2", true, 6000, "dev"), "a:3": s("a:3", false, 6000, "dev")}
	got = brokerCPUPerMsg(shared, shared2, 200)
	if len(got) != 1 || !got[0].Shared || got[0].CPUus != 30 || len(got[0].Members) != 3 {
		t.Fatalf("one shared process: %+v", got)
	}
	if txt := brokersCPUText(got, 10); !strings.Contains(txt, "counted once) 30.0") || !strings.Contains(txt, "= 40.0 µs/msg") {
		t.Errorf("text: %s", txt)
	}
	if brokerCPUPerMsg(before, after, 0) != nil || brokersCPUText(nil, 1) != "" {
		t.Error("no messages or no members: no broker CPU")
	}
}
