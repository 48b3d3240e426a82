package main

import "testing"

// TestAdminClusterWideReads: mqadmin's getBrokerConfig and brokerStatus
// take -c clusterName as well as -b brokerAddr, and scripts use it to
// read every broker of a cluster at once; each member is printed under
// mqadmin's headings (getBrokerConfig) or with its address on every line
// (brokerStatus), and --json maps each address to its table.
func TestAdminClusterWideReads(t *testing.T) {
	c := startAdminCluster(t)
	n := []string{"-n", c.nsAddr}
	leader := c.routedLeader()
	out := mustAdmin(t, append(n, "getBrokerConfig", "-c", "DefaultCluster")...)
	wantLines(t, out, "============Master: "+leader+"============")
	for _, m := range c.Members(0) {
		if m.Addr() != leader {
			wantLines(t, out, "============My Master: "+leader+"=====Slave: "+m.Addr()+"============")
		}
	}
	var cfgs map[string]map[string]string
	adminJSON(t, &cfgs, append(n, "getBrokerConfig", "-c", "DefaultCluster")...)
	for _, m := range c.Members(0) {
		if cfgs[m.Addr()]["brokerName"] != "broker-a" {
			t.Errorf("getBrokerConfig -c --json: member %s: %v", m.Addr(), cfgs[m.Addr()])
		}
	}
	out = mustAdmin(t, append(n, "brokerStatus", "-c", "DefaultCluster")...)
	var stats map[string]map[string]string
	adminJSON(t, &stats, append(n, "brokerStatus", "-c", "DefaultCluster")...)
	for _, m := range c.Members(0) {
		wantLines(t, out, m.Addr()+" ")
		if stats[m.Addr()]["brokerName"] != "broker-a" {
			t.Errorf("brokerStatus -c --json: member %s: %v", m.Addr(), stats[m.Addr()])
		}
	}
	if _, err := runAdmin(t, append(n, "getBrokerConfig", "-c", "NoSuchCluster")...); err == nil {
		t.Error("getBrokerConfig -c of an unknown cluster succeeded")
	}
}
