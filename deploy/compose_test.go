package deploy

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/raftlog"
)

// composeFile is the part of the Compose specification compose.yaml uses;
// it is decoded strictly, so a key outside it (or misspelt) fails the test.
type composeFile struct {
	Name     string                    `json:"name"`
	Services map[string]composeService `json:"services"`
	Networks map[string]struct {
		IPAM struct {
			Config []struct {
				Subnet string `json:"subnet"`
			} `json:"config"`
		} `json:"ipam"`
	} `json:"networks"`
	Volumes map[string]struct{} `json:"volumes"`
}

type composeService struct {
	Image string `json:"image"`
	Build struct {
		Context    string `json:"context"`
		Dockerfile string `json:"dockerfile"`
	} `json:"build"`
	Command         []string `json:"command"`
	Hostname        string   `json:"hostname"`
	User            string   `json:"user"`
	ReadOnly        bool     `json:"read_only"`
	Restart         string   `json:"restart"`
	DependsOn       []string `json:"depends_on"`
	StopGracePeriod string   `json:"stop_grace_period"`
	Networks        map[string]struct {
		IPv4Address string `json:"ipv4_address"`
	} `json:"networks"`
	Ports   []string `json:"ports"`
	Volumes []string `json:"volumes"`
}

// composeNode is one service with its loaded conf.
type composeNode struct {
	name  string
	svc   composeService
	ip    netip.Addr
	ports []port // what its conf listens on
	data  string // where its conf writes (store root or KV file)
	b     *broker.BrokerConfig
	ns    *namesrv.Config
}

// TestCompose decodes compose.yaml and checks each service against the conf
// it mounts: the conf loads, brokerIP1 is the service's fixed address,
// namesrvAddr and dLegerPeers name services of the file on ports their confs
// listen on, published ports are ports the conf listens on, every node keeps
// its data in a volume of its own, and it runs as the image's user.
func TestCompose(t *testing.T) {
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.UnmarshalStrict(b, &cf); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	img := readDockerfile(t)
	if len(cf.Networks) != 1 {
		t.Fatalf("want one network, have %d", len(cf.Networks))
	}
	var subnet netip.Prefix
	for _, n := range cf.Networks {
		if len(n.IPAM.Config) != 1 {
			t.Fatal("network needs one ipam subnet (the brokers' fixed addresses)")
		}
		if subnet, err = netip.ParsePrefix(n.IPAM.Config[0].Subnet); err != nil {
			t.Fatal(err)
		}
	}

	nodes := map[string]*composeNode{}
	ips, hostPorts, volumes := map[netip.Addr]string{}, map[string]string{}, map[string]string{}
	for name, svc := range cf.Services {
		n := &composeNode{name: name, svc: svc}
		nodes[name] = n
		if svc.User != fmt.Sprintf("%d:%d", img.UID, img.GID) || !svc.ReadOnly {
			t.Errorf("%s: user %q read_only %v, want the image's %d:%d and a read-only root", name, svc.User, svc.ReadOnly, img.UID, img.GID)
		}
		if df := filepath.Join(svc.Build.Context, svc.Build.Dockerfile); df != filepath.Join("..", "Dockerfile") {
			t.Errorf("%s: builds %s, want the root Dockerfile", name, df)
		}
		for _, d := range svc.DependsOn {
			if _, ok := cf.Services[d]; !ok {
				t.Errorf("%s: depends on unknown service %s", name, d)
			}
		}
		for _, nw := range svc.Networks {
			n.ip, err = netip.ParseAddr(nw.IPv4Address)
			if err != nil || !subnet.Contains(n.ip) {
				t.Errorf("%s: ipv4_address %q not in %s", name, nw.IPv4Address, subnet)
			}
			if other, dup := ips[n.ip]; dup {
				t.Errorf("%s and %s share %s", name, other, n.ip)
			}
			ips[n.ip] = name
		}
		if len(svc.Command) != 3 || svc.Command[1] != "-c" {
			t.Fatalf("%s: command %v, want [namesrv|broker -c FILE]", name, svc.Command)
		}
		confFile, dataVolume := "", ""
		for _, v := range svc.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Fatalf("%s: volume %q", name, v)
			}
			switch {
			case parts[1] == svc.Command[2]:
				if len(parts) != 3 || parts[2] != "ro" {
					t.Errorf("%s: conf mount %q is not read-only", name, v)
				}
				confFile = parts[0]
			case parts[1] == "/var/lib/raftmq":
				dataVolume = parts[0]
			}
		}
		if _, ok := cf.Volumes[dataVolume]; !ok {
			t.Errorf("%s: no named volume (declared under volumes:) on /var/lib/raftmq", name)
		} else if other, dup := volumes[dataVolume]; dup {
			t.Errorf("%s and %s share volume %s", name, other, dataVolume)
		} else {
			volumes[dataVolume] = name
		}
		if confFile == "" {
			t.Fatalf("%s: %s is not mounted from deploy/", name, svc.Command[2])
		}
		switch svc.Command[0] {
		case "broker":
			cfg := loadBroker(t, confFile)
			n.b, n.ports, n.data = &cfg, brokerPorts(t, cfg), cfg.Store.StorePathRootDir
			monitorReachable(t, name, cfg.MetricsPort, cfg.MetricsBindAddr)
			if cfg.BrokerIP1 != n.ip.String() {
				t.Errorf("%s: brokerIP1 %s, but the service's address is %s", name, cfg.BrokerIP1, n.ip)
			}
		case "namesrv":
			cfg := loadNamesrv(t, confFile)
			n.ns, n.ports, n.data = &cfg, namesrvPorts(cfg), cfg.KVConfigPath
			monitorReachable(t, name, cfg.MetricsPort, cfg.MetricsBindAddr)
		default:
			t.Fatalf("%s: command %v", name, svc.Command)
		}
		if !underDir(n.data, "/var/lib/raftmq") {
			t.Errorf("%s: conf writes %s, outside the volume", name, n.data)
		}
		for _, p := range svc.Ports {
			host, cont, ok := strings.Cut(p, ":")
			num, err := strconv.Atoi(cont)
			if !ok || err != nil || !slices.Contains(n.ports, port{num, "TCP"}) {
				t.Errorf("%s: publishes %q; its conf listens on %v", name, p, n.ports)
			}
			if other, dup := hostPorts[host]; dup {
				t.Errorf("%s and %s both publish host port %s", name, other, host)
			}
			hostPorts[host] = name
		}
	}

	// listensOn reports whether host:port is a service of the file whose
	// conf listens on that port.
	listensOn := func(addr string) (*composeNode, bool) {
		h, p, err := net.SplitHostPort(addr)
		num, _ := strconv.Atoi(p)
		n, ok := nodes[h]
		return n, err == nil && ok && slices.Contains(n.ports, port{num, "TCP"})
	}
	groups := map[string][]*composeNode{}
	for _, n := range nodes {
		if n.b == nil {
			continue
		}
		groups[n.b.BrokerName] = append(groups[n.b.BrokerName], n)
		for _, a := range n.b.NameServers() {
			if ns, ok := listensOn(a); !ok || ns.ns == nil || a != net.JoinHostPort(ns.name, strconv.Itoa(ns.ns.ListenPort)) {
				t.Errorf("%s: namesrvAddr entry %s is not a name server service's listenPort", n.name, a)
			}
		}
		peers, err := raftlog.ParsePeers(n.b.Raft.DLegerPeers)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range peers {
			m, ok := listensOn(p.Addr)
			if !ok || m.b == nil || m.b.Raft.DLegerSelfID != p.ID {
				t.Errorf("%s: dLegerPeers entry %s-%s is not that member's service and Raft port", n.name, p.ID, p.Addr)
			}
		}
	}
	if len(groups) == 0 {
		t.Fatal("no broker services")
	}
	for g, members := range groups {
		if len(members) != 3 {
			t.Errorf("group %s has %d members, want 3", g, len(members))
		}
		first := members[0].b
		for _, m := range members[1:] {
			if m.b.Raft.DLegerPeers != first.Raft.DLegerPeers || m.b.Raft.DLegerGroup != first.Raft.DLegerGroup ||
				m.b.Store.MappedFileSizeCommitLog != first.Store.MappedFileSizeCommitLog {
				t.Errorf("group %s: %s and %s differ in dLegerPeers, dLegerGroup or mappedFileSizeCommitLog", g, members[0].name, m.name)
			}
		}
	}
}
