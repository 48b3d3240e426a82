package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/raftmq/raftmq"

// layers gives every package of the module its layer. A package imports
// only packages of lower layers; a new package must be added here, so
// where it sits is a decision someone makes, not an accident.
var layers = map[string]int{
	"remoting":          0,
	"remoting/golden":   0,
	"internal/config":   0,
	"internal/logging":  0,
	"internal/freeport": 0,

	"wire":                 1,
	"storage":              1,
	"internal/testutil":    1,
	"internal/httpmon":     1,
	"internal/proccluster": 1,

	"broker/store":        2,
	"broker/filter":       1,
	"broker/acl":          2,
	"broker/timerindex":   2,
	"raftlog":             2,
	"raftlog/raftlogtest": 2,
	"ha":                  2,

	"broker":  3,
	"namesrv": 3,
	"client":  3,

	"internal/devcluster":      4,
	"console":                  4,
	"jepsen":                   4,
	"examples/internal/exutil": 4,

	"cmd/raftmq":               5,
	"abuse":                    5,
	"jepsen/cmd/raftmq-jepsen": 5,
	"examples/batch":           5,
	"examples/broadcast":       5,
	"examples/idempotent":      5,
	"examples/ordered":         5,
	"examples/requestreply":    5,
	"examples/simple":          5,
	"examples/timer":           5,
	"examples/transaction":     5,
}

// sdkForbidden are import paths (or prefixes ending in "/") that must not
// appear anywhere in the SDK's dependency closure: server packages, and
// libraries only servers need (their init functions and binary size would
// land in every application that sends a message).
var sdkForbidden = []string{
	module + "/broker",
	module + "/namesrv",
	module + "/ha",
	module + "/raftlog",
	module + "/internal/httpmon",
	module + "/internal/devcluster",
	module + "/internal/proccluster",
	"github.com/hashicorp/raft",
	"github.com/hashicorp/memberlist",
	"github.com/prometheus/",
	"net/http/pprof",
	"gopkg.in/yaml.v3",
}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
	Standard   bool
	Error      *struct{ Err string }
}

// goList runs `go list -json` over args and decodes the package stream.
func goList(t *testing.T, args ...string) []listedPackage {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool not on PATH")
	}
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// TestLayers checks every non-test import between the module's packages
// against the layer table.
func TestLayers(t *testing.T) {
	pkgs := goList(t, module+"/...")
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages of %s; expected the whole module", len(pkgs), module)
	}
	for _, p := range pkgs {
		from, _ := rel(p.ImportPath)
		if from == "internal/archtest" {
			continue
		}
		fromLayer, ok := layers[from]
		if !ok {
			t.Errorf("package %s has no layer: add it to the layers table in %s (and to DESIGN.md's dependency rules)", from, "internal/archtest/deps_test.go")
			continue
		}
		for _, imp := range p.Imports {
			to, ours := rel(imp)
			if !ours {
				continue
			}
			toLayer, ok := layers[to]
			if !ok {
				continue // reported when the imported package itself is visited
			}
			if toLayer >= fromLayer {
				t.Errorf("%s (layer %d) imports %s (layer %d): a package imports only lower layers", from, fromLayer, to, toLayer)
			}
		}
	}
}

// TestWireImportsOnlyRemoting keeps the wire vocabulary a leaf that every
// side can import: the standard library and remoting, nothing else.
func TestWireImportsOnlyRemoting(t *testing.T) {
	for _, p := range goList(t, module+"/wire") {
		for _, imp := range p.Imports {
			if imp == module+"/remoting" || !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
				continue
			}
			t.Errorf("wire imports %s; it may import only remoting and the standard library", imp)
		}
	}
}

// TestSDKClosure checks the SDK's whole dependency closure, not just its
// direct imports: a server library reached through any path counts.
func TestSDKClosure(t *testing.T) {
	pkgs := goList(t, module+"/client")
	if len(pkgs) != 1 {
		t.Fatalf("go list client: %d packages", len(pkgs))
	}
	var bad []string
	for _, dep := range pkgs[0].Deps {
		for _, f := range sdkForbidden {
			if dep == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) || strings.HasPrefix(dep, f+"/") {
				bad = append(bad, dep)
				break
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Errorf("the SDK (client) depends on server-side packages: %s", strings.Join(bad, ", "))
	}
	t.Logf("client depends on %d packages", len(pkgs[0].Deps))
}
