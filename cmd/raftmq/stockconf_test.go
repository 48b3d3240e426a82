package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

// The files under testdata/rocketmq-4.9.8 are RocketMQ's own, copied
// unchanged (see testdata/rocketmq-4.9.8/NOTICE).
const stockDir = "testdata/rocketmq-4.9.8"

// confKeys returns the keys a properties file sets.
func confKeys(t *testing.T, body string) []string {
	t.Helper()
	var keys []string
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, _, _ := strings.Cut(line, "=")
		keys = append(keys, strings.TrimSpace(k))
	}
	return keys
}

// TestStockConfsHaveNoUnknownKeys: every stock RocketMQ 4.9 broker file
// loads without an unknown or malformed key (what remains is the
// settings Validate asks to change).
func TestStockConfsHaveNoUnknownKeys(t *testing.T) {
	files, _ := filepath.Glob(stockDir + "/*.conf")
	more, _ := filepath.Glob(stockDir + "/*/*.*")
	files = append(files, more...)
	if len(files) < 9 {
		t.Fatalf("found %d stock files", len(files))
	}
	for _, f := range files {
		_, err := loadBrokerConf(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// runCmd runs the raftmq command with args until ctx ends, capturing its
// stderr; the returned channel yields its error.
func runCmd(ctx context.Context, stderr *bytes.Buffer, args ...string) chan error {
	root := newRootCmd()
	root.SetArgs(args)
	if stderr != nil {
		root.SetErr(stderr)
	}
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	return done
}

// TestStockDLedgerConfsStartAGroup runs `raftmq broker -c` on RocketMQ
// 4.9's conf/dledger/broker-n0.conf, n1 and n2 and waits until the name
// server routes the elected leader of RaftNode00. Only values that name
// this machine's resources change (ports, /tmp paths, the name server's
// address; the key set is checked to be the same), gossip is turned off
// because the test's name server runs without it, and so is the stop
// hand-off (shutdownTransferTimeout=0): the members stop together at the
// end, and the leader would wait out its 5 s for a follower stopping too.
func TestStockDLedgerConfsStartAGroup(t *testing.T) {
	dir := t.TempDir()
	nsPort := testutil.FreePort(t)
	nsAddr := "127.0.0.1:" + strconv.Itoa(nsPort)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nsConf := writeConf(t, "kvConfigPath="+filepath.Join(dir, "kv.json")+"\nmetricsPort=-1\n")
	var running []chan error
	running = append(running, runCmd(ctx, nil, "--log-level", "error", "namesrv", "-c", nsConf, "--listen", nsAddr))

	raftPorts := map[string]int{}
	for _, p := range []string{"40911", "40912", "40913"} {
		raftPorts[p] = testutil.FreePort(t)
	}
	for i := range 3 {
		stock, err := os.ReadFile(fmt.Sprintf("%s/dledger/broker-n%d.conf", stockDir, i))
		if err != nil {
			t.Fatal(err)
		}
		body := string(stock)
		listen := regexp.MustCompile(`listenPort=(\d+)`).FindStringSubmatch(body)[1]
		body = strings.ReplaceAll(body, "listenPort="+listen, "listenPort="+strconv.Itoa(testutil.FreePort(t)))
		for stockPort, p := range raftPorts {
			body = strings.ReplaceAll(body, "127.0.0.1:"+stockPort, "127.0.0.1:"+strconv.Itoa(p))
		}
		body = strings.ReplaceAll(body, "/tmp/rmqstore", filepath.Join(dir, "rmqstore"))
		body = strings.ReplaceAll(body, "namesrvAddr=127.0.0.1:9876", "namesrvAddr="+nsAddr)
		if got, want := strings.Join(confKeys(t, body), ","), strings.Join(confKeys(t, string(stock)), ","); got != want {
			t.Fatalf("rewriting changed the keys:\n%s\n%s", got, want)
		}
		body += "\ngossipEnable=false\nmetricsPort=-1\nshutdownTransferTimeout=0\n"
		path := filepath.Join(dir, fmt.Sprintf("broker-n%d.conf", i))
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		running = append(running, runCmd(ctx, nil, "--log-level", "error", "broker", "-c", path))
	}

	c := remoting.NewClient(remoting.ClientConfig{DefaultTimeout: time.Second}, zap.NewNop())
	defer c.Close()
	testutil.WaitFor(t, 30*time.Second, "RaftNode00's leader routed as brokerId 0", func() bool {
		for i, done := range running {
			select {
			case err := <-done:
				t.Fatalf("process %d stopped: %v", i, err)
			default:
			}
		}
		resp, err := c.InvokeSync(ctx, nsAddr, remoting.NewRequest(remoting.RequestGetBrokerClusterInfo, nil, nil))
		if err != nil || resp.Code != remoting.ResponseSuccess {
			return false
		}
		ci, err := wire.DecodeClusterInfo(resp.Body)
		return err == nil && ci.BrokerAddrTable["RaftNode00"].BrokerAddrs[0] != "" &&
			slicesContain(ci.ClusterAddrTable["RaftCluster"], "RaftNode00")
	})
	cancel()
	for i, done := range running {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("process %d: %v", i, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("process %d did not stop", i)
		}
	}
}

func slicesContain(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// TestStockBrokerConfFailsWithOneMessage: RocketMQ's plain conf/broker.conf
// (no DLedger keys, ASYNC_FLUSH, brokerRole) is refused in one run with one
// message naming every setting to change and why, and the one warning for
// brokerId and brokerRole; with those two settings changed it passes
// validation as a one-member group.
func TestStockBrokerConfFailsWithOneMessage(t *testing.T) {
	var stderr bytes.Buffer
	err := <-runCmd(context.Background(), &stderr, "broker", "-c", stockDir+"/broker.conf")
	if err == nil {
		t.Fatal("the stock broker.conf must not start a broker as it is")
	}
	msg := err.Error()
	for _, want := range []string{
		stockDir + "/broker.conf: 2 settings to change:\n  - ",
		"flushDiskType: ASYNC_FLUSH under Raft acknowledges messages and votes before they are on disk",
		"set raftAcksBeforeFsync=true to accept that",
		"dLegerPeers is empty",
		"dLegerPeers=n0-127.0.0.1:40911 with dLegerSelfId=n0",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if w := stderr.String(); strings.Count(w, "\n") != 1 || !strings.Contains(w, "warning:") ||
		!strings.Contains(w, "brokerId (roles come from Raft") || !strings.Contains(w, "brokerRole (replication is Raft") {
		t.Errorf("want one warning line naming brokerId and brokerRole, got %q", w)
	}

	stock, _ := os.ReadFile(stockDir + "/broker.conf")
	fixed := strings.Replace(string(stock), "flushDiskType = ASYNC_FLUSH", "flushDiskType = SYNC_FLUSH", 1) +
		"dLegerPeers=n0-127.0.0.1:40911\ndLegerSelfId=n0\n"
	path := writeConf(t, fixed)
	var out bytes.Buffer
	root := newRootCmd()
	root.SetArgs([]string{"broker", "-c", path, "-p"})
	root.SetOut(&out)
	root.SetErr(&out)
	if err := root.Execute(); err != nil {
		t.Fatalf("with flushDiskType and dLegerPeers changed: %v", err)
	}
	if !strings.Contains(out.String(), "warning: "+path+": 2 RocketMQ key(s) accepted but ignored: brokerId (") {
		t.Fatalf("print mode shows the warning too:\n%s", out.String())
	}
}

// TestBrokerConfEveryErrorInOneRun: misspelt keys get suggestions, and
// key errors and invalid settings come together in one message.
func TestBrokerConfEveryErrorInOneRun(t *testing.T) {
	path := writeConf(t, "brokerRol=SLAVE\nlistenport=10911\nflushDiskType=ASYNC_FLUSH\ndLegerPeers=n0-127.0.0.1:40911\ndLegerSelfId=n0\nlogFormat=xml\n")
	err := <-runCmd(context.Background(), nil, "broker", "-c", path)
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range []string{": 4 settings to change:", `"brokerRol": did you mean "brokerRole"?`,
		`"listenport": did you mean "listenPort"?`, "flushDiskType: ASYNC_FLUSH", `logFormat "xml"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// loadBrokerConf loads a file the way `raftmq broker` does, returning the
// key errors only.
func loadBrokerConf(path string) (config.Report, error) {
	cfg := broker.DefaultConfig()
	return config.Load(path, &cfg)
}
