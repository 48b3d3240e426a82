package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/internal/devcluster"
)

// startOpsACLCluster starts a 3-member group with aclEnable (and the
// cluster account it needs), member m loading the ACL file file(m).
func startOpsACLCluster(t *testing.T, file func(m int) string) *devcluster.Cluster {
	t.Helper()
	dir := t.TempDir()
	return devcluster.MustStart(t, devcluster.Options{SegmentBytes: 8 << 20, ConsumeQueueEntries: 10_000, InMemory: true,
		Configure: func(_, m int, cfg *broker.BrokerConfig) {
			path := filepath.Join(dir, cfg.Raft.DLegerSelfID+".yml")
			if err := os.WriteFile(path, []byte(file(m)), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg.AclEnable, cfg.AclFile, cfg.AclReloadInterval = true, path, 20*time.Millisecond
			cfg.ClusterAuthAccessKey, cfg.ClusterAuthSecretKey = "clusterKey1", "clusterSecret1"
		}})
}

// TestOpsRaftStatusRefused: with aclEnable, raftStatus without an admin
// account is refused by every member. The command used to print every
// member as "Unreachable" and exit 0; it now fails (exit 1) with the
// broker's code and remark, and a member that refuses while another
// answers is a "Refused" row, not an unreachable one.
func TestOpsRaftStatusRefused(t *testing.T) {
	c := startOpsACLCluster(t, func(m int) string {
		if m == 1 { // a member whose file was edited by hand: opsAdmin1 is no admin there
			return strings.Replace(adminACLFile, "admin: true", "admin: false", 1)
		}
		return adminACLFile
	})
	ns := c.NamesrvAddr()

	out, err := runAdmin(t, "raftStatus", "-n", ns, "-b", "broker-a")
	if err == nil {
		t.Fatalf("unsigned raftStatus succeeded:\n%s", out)
	}
	if !strings.Contains(err.Error(), "code 16") || !strings.Contains(err.Error(), "has no AccessKey") {
		t.Fatalf("unsigned raftStatus: %v; want NO_PERMISSION (16) with the broker's remark", err)
	}
	if strings.Contains(err.Error(), "broker  (") {
		t.Fatalf("the error names no broker: %v", err)
	}

	// Signed by an account only two members take as admin: their rows, the
	// third member's refusal as a row, and exit 1.
	out, err = runAdmin(t, "raftStatus", "-n", ns, "-b", "broker-a", "--aclAccessKey", "opsAdmin1", "--aclSecretKey", "opsSecret1")
	if err == nil || !strings.Contains(err.Error(), "1 member(s) refused") || !strings.Contains(err.Error(), "needs an admin account") {
		t.Fatalf("raftStatus refused by one member: %v; want exit 1 naming the refusal\n%s", err, out)
	}
	if strings.Count(out, " Leader ")+strings.Count(out, " Follower ") != 2 || strings.Count(out, " Refused ") != 1 || strings.Contains(out, "Unreachable") {
		t.Fatalf("raftStatus refused by one member: want two answering rows and one Refused row:\n%s", out)
	}
}

// TestOpsPlaintextAgainstTLSHints: an operator who turned on
// tlsServerMode=enforcing as README says and runs `raftmq admin` without
// --tls sees the server close the connection. The error used to say only
// "check -n and that raftmq namesrv is running there" (it is running); it
// now says to add --tls.
func TestOpsPlaintextAgainstTLSHints(t *testing.T) {
	ns, _ := startEnforcingNameServer(t)
	out, err := runAdmin(t, "clusterList", "-n", ns.Addr().String(), "--timeout", "2s")
	if err == nil {
		t.Fatalf("plaintext admin against enforcing succeeded: %s", out)
	}
	if !strings.Contains(err.Error(), "--tls") {
		t.Fatalf("plaintext admin against an enforcing name server: %v; want a hint to add --tls", err)
	}
}

// TestOpsBenchPlaintextAgainstTLSHints: `raftmq bench produce` without
// --tls against a name server in tlsServerMode=enforcing fails every send
// with "connection closed: EOF"; like admin, its first failure says to add
// --tls.
func TestOpsBenchPlaintextAgainstTLSHints(t *testing.T) {
	ns, _ := startEnforcingNameServer(t)
	sum := runBenchCmd(t, "produce", "-n", ns.Addr().String(), "-t", "OpsTLS", "-w", "1", "-m", "2")
	if sum.Messages != 0 || sum.Failed != 2 {
		t.Fatalf("plaintext bench produce against enforcing: %+v; want 2 failed", sum)
	}
	if !strings.Contains(sum.FirstError, "add --tls") {
		t.Fatalf("first failure %q; want a hint to add --tls", sum.FirstError)
	}
}

// TestOpsBenchConsumePlaintextAgainstTLSHints: `raftmq bench consume`
// without --tls against a name server in tlsServerMode=enforcing cannot
// start its consumer ("connection closed: EOF"); like produce and admin,
// its error says to add --tls.
func TestOpsBenchConsumePlaintextAgainstTLSHints(t *testing.T) {
	ns, _ := startEnforcingNameServer(t)
	root := newRootCmd()
	root.SetOut(io.Discard)
	root.SetArgs([]string{"--log-level", "error", "bench", "consume", "-n", ns.Addr().String(), "-t", "OpsTLS",
		"-d", "5s", "--json", "--interval", "1h"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "add --tls") {
		t.Fatalf("plaintext bench consume against enforcing: %v; want a hint to add --tls", err)
	}
}

// TestOpsBenchProduceSaysWhy: `raftmq bench produce` against brokers that
// refuse every send (an unsigned client under ACL) used to report
// "0 ok, 5 failed" and nothing else; the summary now carries the first
// failure, with the broker's code and remark.
func TestOpsBenchProduceSaysWhy(t *testing.T) {
	c := startOpsACLCluster(t, func(int) string { return adminACLFile })
	sum := runBenchCmd(t, "produce", "-n", c.NamesrvAddr(), "-t", "OpsBench", "-w", "1", "-m", "5")
	if sum.Messages != 0 || sum.Failed != 5 {
		t.Fatalf("unsigned bench produce under ACL: %+v; want 5 failed", sum)
	}
	if !strings.Contains(sum.FirstError, "code 16") || !strings.Contains(sum.FirstError, "has no AccessKey") {
		t.Fatalf("first failure %q; want the broker's NO_PERMISSION (16) and remark", sum.FirstError)
	}
	if txt := sum.text(); !strings.Contains(txt, "first failure: ") {
		t.Fatalf("summary line lacks the first failure:\n%s", txt)
	}

	// Signed, bench produces and consumes on the ACL cluster (it had no way
	// to sign), and the broker CPU probe is answered.
	signed := []string{"-n", c.NamesrvAddr(), "-t", "OpsBench", "--aclAccessKey", "opsAdmin1", "--aclSecretKey", "opsSecret1"}
	sum = runBenchCmd(t, append([]string{"produce", "-w", "1", "-m", "5"}, signed...)...)
	if sum.Messages != 5 || sum.Failed != 0 || len(sum.Brokers) == 0 {
		t.Fatalf("signed bench produce under ACL: %+v; want 5 sent and the brokers' CPU", sum)
	}
	sum = runBenchCmd(t, append([]string{"consume", "-g", "OpsBenchGroup", "-m", "5", "-d", "30s"}, signed...)...)
	if sum.Messages != 5 {
		t.Fatalf("signed bench consume under ACL: %+v; want the 5 messages", sum)
	}
}

// TestOpsSendMessageSigned: `raftmq admin sendMessage` with an account
// under ACL. Its producer used to be built without the session's
// credentials (and without --tls), so the send was refused as unsigned
// (NO_PERMISSION, "has no AccessKey") whatever --aclAccessKey said.
func TestOpsSendMessageSigned(t *testing.T) {
	c := startOpsACLCluster(t, func(int) string { return adminACLFile })
	ns := c.NamesrvAddr()
	mustAdmin(t, "updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", "OpsSend", "--aclAccessKey", "opsAdmin1", "--aclSecretKey", "opsSecret1")
	out, err := runAdmin(t, "sendMessage", "-n", ns, "-t", "OpsSend", "-p", "hello", "--aclAccessKey", "appKey001", "--aclSecretKey", "appSecret01")
	if err != nil || !strings.Contains(out, "SEND_OK") {
		t.Fatalf("signed sendMessage by an account with PUB: %v\n%s", err, out)
	}
	if _, err := runAdmin(t, "sendMessage", "-n", ns, "-t", "OpsSend", "-p", "hello"); err == nil || !strings.Contains(err.Error(), "has no AccessKey") {
		t.Fatalf("unsigned sendMessage under ACL: %v; want the broker's refusal", err)
	}
}
