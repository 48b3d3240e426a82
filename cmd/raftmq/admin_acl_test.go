package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/internal/devcluster"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/spf13/pflag"
)

const adminACLFile = `accounts:
  - accessKey: opsAdmin1
    secretKey: opsSecret1
    admin: true
  - accessKey: appKey001
    secretKey: appSecret01
    defaultTopicPerm: PUB
`

// TestAdminACLCommands: the ACL commands change every member's file,
// need an admin account, and clusterAclConfigVersion reports (and fails
// on) members that disagree.
func TestAdminACLCommands(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	c := devcluster.MustStart(t, devcluster.Options{SegmentBytes: 8 << 20, ConsumeQueueEntries: 10_000, InMemory: true,
		Configure: func(_, m int, cfg *broker.BrokerConfig) {
			path := filepath.Join(dir, cfg.Raft.DLegerSelfID+".yml")
			if err := os.WriteFile(path, []byte(adminACLFile), 0o600); err != nil {
				t.Fatal(err)
			}
			files[cfg.Raft.DLegerSelfID] = path
			cfg.AclEnable, cfg.AclFile, cfg.AclReloadInterval = true, path, 20*time.Millisecond
			cfg.ClusterAuthAccessKey, cfg.ClusterAuthSecretKey = "clusterKey1", "clusterSecret1"
		}})
	ns := c.NamesrvAddr()
	admin := []string{"-n", ns, "--aclAccessKey", "opsAdmin1", "--aclSecretKey", "opsSecret1"}
	app := []string{"-n", ns, "--aclAccessKey", "appKey001", "--aclSecretKey", "appSecret01"}

	_, err := runAdmin(t, "updateAclConfig", "-n", ns, "-c", "DefaultCluster", "-a", "newAccount", "-s", "newSecret1")
	if err == nil || !strings.Contains(err.Error(), "has no AccessKey") {
		t.Fatalf("unsigned updateAclConfig: %v", err)
	}
	_, err = runAdmin(t, append([]string{"updateAclConfig", "-c", "DefaultCluster", "-a", "newAccount", "-s", "newSecret1"}, app...)...)
	if err == nil || !strings.Contains(err.Error(), "needs an admin account") {
		t.Fatalf("updateAclConfig by a non-admin: %v", err)
	}
	out := mustAdmin(t, append([]string{"updateAclConfig", "-c", "DefaultCluster", "-a", "newAccount", "-s", "newSecret1",
		"-i", "SUB", "-t", "Orders=PUB|SUB", "-m", "false"}, admin...)...)
	if n := strings.Count(out, "create or update plain access config to"); n != 3 {
		t.Fatalf("updateAclConfig reached %d members, want 3:\n%s", n, out)
	}
	for id, path := range files {
		data, _ := os.ReadFile(path)
		if !strings.Contains(string(data), "newAccount") || !strings.Contains(string(data), "Orders=PUB|SUB") {
			t.Fatalf("member %s's file lacks the account:\n%s", id, data)
		}
	}
	// -w and -t given empty clear the white address and the topic list,
	// as mqadmin's do; a flag left out (-g) keeps its list.
	mustAdmin(t, append([]string{"updateAclConfig", "-c", "DefaultCluster", "-a", "newAccount", "-w", "10.1.1.*", "-g", "G1=SUB"}, admin...)...)
	mustAdmin(t, append([]string{"updateAclConfig", "-c", "DefaultCluster", "-a", "newAccount", "-w", "", "-t", ""}, admin...)...)
	for id, path := range files {
		data, _ := os.ReadFile(path)
		if f := string(data); strings.Contains(f, "10.1.1.*") || strings.Contains(f, "Orders=PUB|SUB") || !strings.Contains(f, "G1=SUB") {
			t.Fatalf("member %s's file after -w '' -t '':\n%s", id, data)
		}
	}
	mustAdmin(t, append([]string{"updateGlobalWhiteAddr", "-c", "DefaultCluster", "-g", "10.10.103.*,192.168.0.*"}, admin...)...)
	out = mustAdmin(t, append([]string{"deleteAclConfig", "-b", c.RoutedLeader(0), "-a", "newAccount"}, admin...)...)
	if n := strings.Count(out, "delete plain access config account from"); n != 3 {
		t.Fatalf("deleteAclConfig -b reached %d members of the group, want 3:\n%s", n, out)
	}

	var versions []aclVersion
	adminJSON(t, &versions, append([]string{"clusterAclConfigVersion", "-c", "DefaultCluster"}, admin...)...)
	if len(versions) != 3 {
		t.Fatalf("%d members: %+v", len(versions), versions)
	}
	for _, v := range versions {
		if !v.AclEnable || !v.Agree || v.Counter != 5 || v.Hash != versions[0].Hash || v.LastUpdate == "-" {
			t.Fatalf("member %+v", v)
		}
	}

	// mqadmin's $ROCKETMQ_HOME/conf/tools.yml signs when no flag does.
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "conf"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "conf", "tools.yml"), []byte("accessKey: opsAdmin1\nsecretKey: opsSecret1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("ROCKETMQ_HOME", home)
	mustAdmin(t, "updateGlobalWhiteAddr", "-n", ns, "-c", "DefaultCluster", "-g", "10.10.103.*")

	// One member's file edited by hand: the group disagrees, and the
	// command says so and fails.
	var one string
	for _, p := range files {
		one = p
		break
	}
	data, _ := os.ReadFile(one)
	if err := os.WriteFile(one, []byte(strings.Replace(string(data), "defaultTopicPerm: PUB", "defaultTopicPerm: SUB", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "the edited member reported as disagreeing", func() bool {
		out, err := runAdmin(t, append([]string{"clusterAclConfigVersion", "-c", "DefaultCluster"}, admin...)...)
		return err != nil && strings.Contains(err.Error(), "different ACL rules") && strings.Contains(out, "false")
	})
}

// TestACLFlagsKeepEnvSecretOutOfHelp: the signing keys from
// RAFTMQ_ACCESS_KEY/RAFTMQ_SECRET_KEY sign requests, yet no help or usage
// text of admin or bench prints the secret key.
func TestACLFlagsKeepEnvSecretOutOfHelp(t *testing.T) {
	const secret = "envSecretKey-7f3a9c"
	t.Setenv("RAFTMQ_ACCESS_KEY", "envAccessKey1")
	t.Setenv("RAFTMQ_SECRET_KEY", secret)
	t.Setenv("ROCKETMQ_HOME", "")
	for _, args := range [][]string{{"admin"}, {"admin", "--help"}, {"admin", "topicList", "--help"}, {"bench", "produce", "--help"}} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args)
		_ = root.Execute()
		if !strings.Contains(out.String(), "aclSecretKey") {
			t.Fatalf("raftmq %s: no --aclSecretKey in the help text:\n%s", strings.Join(args, " "), out.String())
		}
		if strings.Contains(out.String(), secret) {
			t.Fatalf("raftmq %s prints $RAFTMQ_SECRET_KEY:\n%s", strings.Join(args, " "), out.String())
		}
	}

	var f aclFlags
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f.register(fs)
	cr, err := f.credentials()
	if err != nil || cr.AccessKey != "envAccessKey1" || cr.SecretKey != secret {
		t.Fatalf("credentials from the environment: %+v, %v", cr, err)
	}
	if err := fs.Parse([]string{"--aclAccessKey", "flagAccess1", "--aclSecretKey", "flagSecret1"}); err != nil {
		t.Fatal(err)
	}
	cr, err = f.credentials()
	if err != nil || cr.AccessKey != "flagAccess1" || cr.SecretKey != "flagSecret1" {
		t.Fatalf("flags over the environment: %+v, %v", cr, err)
	}
}
