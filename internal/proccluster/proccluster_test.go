package proccluster

import (
	"os"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/internal/freeport"
)

// TestPlaceAndConfs: every process gets its own slot of loopback ports,
// and each member's conf names its group's peers (and only them), the
// name server's gossip port as seed, and the extra lines asked for.
func TestPlaceAndConfs(t *testing.T) {
	dir := t.TempDir()
	c, err := New(Config{Dir: dir, Launch: Binary("/bin/false"), ClusterName: "C", Groups: 2,
		GroupName: func(g int) string { return []string{"ga", "gb"}[g] }, Metrics: true,
		BrokerConf: []string{"raftElectionTimeout=500"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 6 {
		t.Fatalf("%d nodes", len(c.Nodes))
	}
	slots := map[int]bool{}
	for _, n := range append([]*Node{c.NS}, c.Nodes...) {
		s := (n.ListenPort - freeport.Low) / freeport.Slot
		if n.ListenPort < freeport.Low || slots[s] {
			t.Fatalf("%s: port %d outside the band or in a slot already used", n.ID, n.ListenPort)
		}
		slots[s] = true
	}
	if err := c.WriteConfs(); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		b, err := os.ReadFile(n.ConfPath)
		if err != nil {
			t.Fatal(err)
		}
		conf := string(b)
		for _, m := range c.Nodes {
			has := strings.Contains(conf, m.ID+"-"+m.Host)
			if has != (m.Group == n.Group) {
				t.Errorf("%s's conf names peer %s: %v (groups %d, %d)", n.ID, m.ID, has, n.Group, m.Group)
			}
		}
		for _, want := range []string{"brokerName=" + []string{"ga", "gb"}[n.Group], "raftElectionTimeout=500",
			"gossipSeeds=" + c.NS.Host + ":", "metricsPort="} {
			if !strings.Contains(conf, want) {
				t.Errorf("%s's conf lacks %q:\n%s", n.ID, want, conf)
			}
		}
	}
}
