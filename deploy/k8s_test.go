// Package deploy holds no code: example confs, systemd units and
// Kubernetes manifests. Its test checks that the manifests are well formed
// and that the confs they carry load and validate as raftmq configs.
package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/raftlog"
)

// The module has no YAML parser and this check is not worth adding one:
// documents are split on "---" lines and inspected line by line, which is
// enough for the shapes used here (block mappings, one literal block per
// conf). A full parse was done once by hand (python3 yaml.safe_load_all).

// k8sDocs returns every YAML document under k8s/, keyed "file#n".
func k8sDocs(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests under k8s/ (%v)", err)
	}
	docs := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "\t") {
			t.Errorf("%s: tab character (YAML indentation must be spaces)", f)
		}
		for i, d := range strings.Split("\n"+string(b), "\n---\n") {
			docs[f+"#"+string(rune('0'+i))] = d
		}
	}
	return docs
}

// topKey returns the value of a top-level "key: value" line, and whether
// the key is there.
func topKey(doc, key string) (string, bool) {
	for _, l := range strings.Split(doc, "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// literalBlock returns the literal block scalar "key: |" (de-indented).
func literalBlock(doc, key string) (string, bool) {
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != key+": |" {
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		var out []string
		prefix := ""
		for _, b := range lines[i+1:] {
			if strings.TrimSpace(b) == "" {
				out = append(out, "")
				continue
			}
			n := len(b) - len(strings.TrimLeft(b, " "))
			if n <= indent {
				break
			}
			if prefix == "" {
				prefix = b[:n]
			}
			out = append(out, strings.TrimPrefix(b, prefix))
		}
		return strings.Join(out, "\n") + "\n", true
	}
	return "", false
}

func TestK8sDocumentsWellFormed(t *testing.T) {
	kinds := map[string]int{}
	for name, d := range k8sDocs(t) {
		if strings.TrimSpace(stripComments(d)) == "" {
			continue
		}
		for _, k := range []string{"apiVersion", "kind", "metadata"} {
			if _, ok := topKey(d, k); !ok {
				t.Errorf("%s: no top-level %s", name, k)
			}
		}
		kind, _ := topKey(d, "kind")
		kinds[kind]++
	}
	for _, k := range []string{"Namespace", "ConfigMap", "Deployment", "Service", "StatefulSet", "PodDisruptionBudget"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the manifests", k)
		}
	}
}

func stripComments(d string) string {
	var out []string
	for _, l := range strings.Split(d, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestK8sBrokerConfRendersPerOrdinal renders the StatefulSet's conf
// template as the init container does for ordinals 0..2 and checks that
// each loads and validates, names its own member, and that dLegerPeers
// names exactly the StatefulSet's pods behind its headless Service.
func TestK8sBrokerConfRendersPerOrdinal(t *testing.T) {
	docs := k8sDocs(t)
	var tmpl, sts string
	for _, d := range docs {
		if b, ok := literalBlock(d, "broker.conf.tmpl"); ok {
			tmpl = b
		}
		if k, _ := topKey(d, "kind"); k == "StatefulSet" {
			sts = d
		}
	}
	if tmpl == "" || sts == "" {
		t.Fatal("no broker.conf.tmpl ConfigMap or no StatefulSet")
	}
	for _, want := range []string{"replicas: 3", "serviceName: broker-a", "podManagementPolicy: Parallel", "volumeClaimTemplates:"} {
		if !strings.Contains(sts, want) {
			t.Errorf("StatefulSet lacks %q", want)
		}
	}
	for ord := 0; ord < 3; ord++ {
		self := "n" + string(rune('0'+ord))
		conf := strings.NewReplacer("@SELF_ID@", self, "@POD_IP@", "10.0.0.1"+string(rune('0'+ord))).Replace(tmpl)
		path := filepath.Join(t.TempDir(), "broker.conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := broker.DefaultConfig()
		if err := config.LoadFile(path, &cfg); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Derive(); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("ordinal %d: %v", ord, err)
		}
		if cfg.Raft.DLegerSelfID != self {
			t.Errorf("ordinal %d: dLegerSelfId %q", ord, cfg.Raft.DLegerSelfID)
		}
		peers, err := raftlog.ParsePeers(cfg.Raft.DLegerPeers)
		if err != nil {
			t.Fatal(err)
		}
		if len(peers) != 3 {
			t.Fatalf("dLegerPeers has %d members, want 3", len(peers))
		}
		for i, p := range peers {
			wantHost := "broker-a-" + string(rune('0'+i)) + ".broker-a.raftmq.svc.cluster.local:"
			if p.ID != "n"+string(rune('0'+i)) || !strings.HasPrefix(p.Addr, wantHost) {
				t.Errorf("peer %d is %s-%s, want n%d-%s…", i, p.ID, p.Addr, i, wantHost)
			}
		}
	}
}

func TestK8sNamesrvConfLoads(t *testing.T) {
	var conf string
	for _, d := range k8sDocs(t) {
		if b, ok := literalBlock(d, "namesrv.conf"); ok {
			conf = b
		}
	}
	if conf == "" {
		t.Fatal("no namesrv.conf ConfigMap")
	}
	path := filepath.Join(t.TempDir(), "namesrv.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := namesrv.DefaultConfig()
	if err := config.LoadFile(path, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if !cfg.GossipEnable {
		t.Error("name server conf does not enable gossip")
	}
}
