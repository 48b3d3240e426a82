// Package deploy holds no code: the example confs, systemd units, the
// compose file, the Kubernetes manifests and the Grafana dashboard. Its
// tests decode the compose file and the manifests (the manifests strictly,
// with the Kubernetes API types), load every conf they carry with raftmq's
// config loader, check that ports, users and volumes agree with the confs
// and with the root Dockerfile, and check every dashboard query against
// the metrics the broker exports (grafana_test.go).
package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/namesrv"
)

// port is a port and its protocol ("TCP" or "UDP").
type port struct {
	Num   int
	Proto string
}

func (p port) String() string { return fmt.Sprintf("%d/%s", p.Num, p.Proto) }

// image is what the tests need to know about the root Dockerfile's runtime
// stage.
type image struct {
	UID, GID int64
	Expose   []port
	Volumes  []string
}

// readDockerfile reads ../Dockerfile's USER, EXPOSE and VOLUME lines.
func readDockerfile(t *testing.T) image {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var img image
	var user string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "USER":
			user = f[1]
		case "EXPOSE":
			for _, e := range f[1:] {
				n, proto, _ := strings.Cut(e, "/")
				p, err := strconv.Atoi(n)
				if err != nil {
					t.Fatalf("Dockerfile: EXPOSE %s", e)
				}
				if proto == "" {
					proto = "tcp"
				}
				img.Expose = append(img.Expose, port{p, strings.ToUpper(proto)})
			}
		case "VOLUME":
			for _, v := range f[1:] {
				img.Volumes = append(img.Volumes, strings.Trim(v, `[]",`))
			}
		}
	}
	u, g, ok := strings.Cut(user, ":")
	uid, err1 := strconv.ParseInt(u, 10, 64)
	gid, err2 := strconv.ParseInt(g, 10, 64)
	if !ok || err1 != nil || err2 != nil || uid == 0 || gid == 0 {
		t.Fatalf("Dockerfile: USER %q, want a numeric non-root uid:gid (Kubernetes' runAsNonRoot can check only a numeric user)", user)
	}
	img.UID, img.GID = uid, gid
	return img
}

// writeTemp writes content to a file named name in a temporary directory.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadBroker loads a broker conf file as `raftmq broker -c` does (load,
// derive, validate).
func loadBroker(t *testing.T, path string) broker.BrokerConfig {
	t.Helper()
	cfg := broker.DefaultConfig()
	if err := config.LoadFile(path, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Derive(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cfg
}

// loadNamesrv loads a name server conf file as `raftmq namesrv -c` does.
func loadNamesrv(t *testing.T, path string) namesrv.Config {
	t.Helper()
	cfg := namesrv.DefaultConfig()
	if err := config.LoadFile(path, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cfg
}

// monitorReachable fails unless a container's monitor (probes, scrapes)
// listens on every interface: the default, 127.0.0.1, is unreachable from
// outside the container.
func monitorReachable(t *testing.T, name string, metricsPort int, bind string) {
	t.Helper()
	if metricsPort != -1 && bind != "0.0.0.0" {
		t.Errorf("%s: metricsBindAddr %q: probes and scrapers outside the container cannot reach the monitor; set 0.0.0.0", name, bind)
	}
}

// httpPort is the monitoring port a metricsPort setting gives (0 =
// listenPort+3, -1 = off).
func httpPort(metricsPort, listenPort int) (int, bool) {
	switch metricsPort {
	case -1:
		return 0, false
	case 0:
		return listenPort + 3, true
	}
	return metricsPort, true
}

// brokerPorts are the ports a broker node with this (derived) config
// listens on.
func brokerPorts(t *testing.T, cfg broker.BrokerConfig) []port {
	t.Helper()
	ps := []port{{cfg.ListenPort, "TCP"}}
	if cfg.VipChannelEnabled {
		ps = append(ps, port{cfg.ListenPort - 2, "TCP"})
	}
	if cfg.GossipEnable {
		ps = append(ps, port{cfg.Gossip.BindPort, "TCP"}, port{cfg.Gossip.BindPort, "UDP"})
	}
	if p, ok := httpPort(cfg.MetricsPort, cfg.ListenPort); ok {
		ps = append(ps, port{p, "TCP"})
	}
	self, err := cfg.Raft.SelfAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, rp, _ := strings.Cut(self, ":")
	n, err := strconv.Atoi(rp)
	if err != nil {
		t.Fatalf("dLegerPeers entry of %s: %q", cfg.Raft.DLegerSelfID, self)
	}
	return sortPorts(append(ps, port{n, "TCP"}))
}

// namesrvPorts are the ports a name server with this config listens on.
func namesrvPorts(cfg namesrv.Config) []port {
	ps := []port{{cfg.ListenPort, "TCP"}}
	if cfg.GossipEnable {
		g := cfg.Gossip.BindPort
		if g == 0 {
			g = cfg.ListenPort + 2
		}
		ps = append(ps, port{g, "TCP"}, port{g, "UDP"})
	}
	if p, ok := httpPort(cfg.MetricsPort, cfg.ListenPort); ok {
		ps = append(ps, port{p, "TCP"})
	}
	return sortPorts(ps)
}

func sortPorts(ps []port) []port {
	slices.SortFunc(ps, func(a, b port) int {
		if a.Num != b.Num {
			return a.Num - b.Num
		}
		return strings.Compare(a.Proto, b.Proto)
	})
	return slices.Compact(ps)
}

// underDir reports whether path is dir or inside it.
func underDir(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func TestDockerfile(t *testing.T) {
	img := readDockerfile(t)
	if !slices.Contains(img.Volumes, "/var/lib/raftmq") {
		t.Errorf("Dockerfile: VOLUME %v lacks /var/lib/raftmq", img.Volumes)
	}
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "--chown=" + strconv.FormatInt(img.UID, 10) + ":" + strconv.FormatInt(img.GID, 10)} {
		if !strings.Contains(string(b), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// Every port of the example confs (one host's and the containers')
	// is exposed.
	var confs []port
	for _, f := range []string{"namesrv.conf", "compose/namesrv.conf"} {
		confs = append(confs, namesrvPorts(loadNamesrv(t, f))...)
	}
	files, _ := filepath.Glob("compose/broker-*.conf")
	for _, f := range append(files, "broker-n0.conf") {
		confs = append(confs, brokerPorts(t, loadBroker(t, f))...)
	}
	for _, p := range sortPorts(confs) {
		if !slices.Contains(img.Expose, p) {
			t.Errorf("Dockerfile does not EXPOSE %s", p)
		}
	}
}

// TestHostConfsLoad loads the one-host example confs (deploy/*.conf).
func TestHostConfsLoad(t *testing.T) {
	loadNamesrv(t, "namesrv.conf")
	for i := 0; i < 3; i++ {
		cfg := loadBroker(t, fmt.Sprintf("broker-n%d.conf", i))
		if want := fmt.Sprintf("n%d", i); cfg.Raft.DLegerSelfID != want {
			t.Errorf("broker-n%d.conf: dLegerSelfId %s", i, cfg.Raft.DLegerSelfID)
		}
	}
}
