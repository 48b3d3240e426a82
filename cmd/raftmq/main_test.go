package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestGCPercentChoice(t *testing.T) {
	for _, tt := range []struct {
		name    string
		flagSet bool
		flag    int
		env     string
		want    int
		wantSet bool
	}{
		{"default", false, defaultGCPercent, "", defaultGCPercent, true},
		{"GOGC env wins over the default", false, defaultGCPercent, "150", 0, false},
		{"flag wins over GOGC", true, 250, "150", 250, true},
		{"flag may turn the GC off", true, -1, "", -1, true},
	} {
		got, set := gcPercent(tt.flagSet, tt.flag, tt.env)
		if got != tt.want || set != tt.wantSet {
			t.Errorf("%s: gcPercent(%v, %d, %q) = %d, %v; want %d, %v", tt.name, tt.flagSet, tt.flag, tt.env, got, set, tt.want, tt.wantSet)
		}
	}
}

// TestGCPercentFlagApplied runs a subcommand that returns at once and checks
// the process's GC target afterwards.
func TestGCPercentFlagApplied(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	t.Setenv("GOGC", "")
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"--gc-percent", "321", "namesrv", "-p"}, 321},
		{[]string{"namesrv", "-p"}, defaultGCPercent},
	} {
		debug.SetGCPercent(100)
		root := newRootCmd()
		root.SetOut(io.Discard)
		root.SetArgs(tt.args)
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if got := debug.SetGCPercent(100); got != tt.want {
			t.Errorf("%v: GC percent %d, want %d", tt.args, got, tt.want)
		}
	}
}

// TestBrokerPrintShowsEffectiveACLReload: `broker -p` prints the ACL file
// poll interval in force (1000 ms unless broker.conf says otherwise), not 0.
func TestBrokerPrintShowsEffectiveACLReload(t *testing.T) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	conf := filepath.Join(t.TempDir(), "broker.conf")
	if err := os.WriteFile(conf, []byte("dLegerPeers=n0-127.0.0.1:40911\ndLegerSelfId=n0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	root.SetArgs([]string{"broker", "-c", conf, "-p"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "aclReloadInterval=1000\n") {
		t.Errorf("broker -p: no aclReloadInterval=1000 line in\n%s", out.String())
	}
}
