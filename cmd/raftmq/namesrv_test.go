package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
	"github.com/raftmq/raftmq/wire"
)

func writeConf(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "namesrv.conf")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNamesrvPrintConfig(t *testing.T) {
	conf := writeConf(t, "listenPort=9877\nscanNotActiveBrokerInterval=2000\nkvConfigPath=/data/kv.json\n")
	var out bytes.Buffer
	root := newRootCmd()
	root.SetOut(&out)
	root.SetArgs([]string{"namesrv", "-c", conf, "-p", "--listen", "127.0.0.1:9999"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"listenAddr=127.0.0.1\n", "listenPort=9999\n", "kvConfigPath=/data/kv.json\n",
		"scanNotActiveBrokerInterval=2000\n", "brokerChannelExpiredTime=120000\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestNamesrvBadConfig(t *testing.T) {
	for _, tt := range []struct{ conf, args, want string }{
		{"listenPrt=1\n", "", "listenPrt"},
		{"listenPort=abc\n", "", "listenPort"},
		{"", "--listen=nohostport", "--listen"},
		{"listenPort=70000\n", "-p", "listenPort"},
	} {
		root := newRootCmd()
		root.SetOut(&bytes.Buffer{})
		args := []string{"namesrv", "-c", writeConf(t, tt.conf)}
		if tt.args != "" {
			args = append(args, tt.args)
		}
		root.SetArgs(args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q %s: want error naming %s, got %v", tt.conf, tt.args, tt.want, err)
		}
	}
}

// TestNamesrvRuns starts the real command, talks to it, then cancels the
// context as SIGTERM would.
func TestNamesrvRuns(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	port := testutil.FreePort(t)
	conf := writeConf(t, "kvConfigPath="+filepath.Join(t.TempDir(), "kv.json")+"\n")
	root := newRootCmd()
	root.SetArgs([]string{"--log-level", "error", "namesrv", "-c", conf, "--listen", "127.0.0.1:" + strconv.Itoa(port)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	c := remoting.NewClient(remoting.ClientConfig{DefaultTimeout: time.Second}, zap.NewNop())
	addr := "127.0.0.1:" + strconv.Itoa(port)
	testutil.WaitFor(t, 10*time.Second, "name server answering", func() bool {
		resp, err := c.InvokeSync(context.Background(), addr,
			remoting.NewRequest(remoting.RequestGetRouteInfoByTopic, &wire.GetRouteInfoRequestHeader{Topic: "T"}, nil))
		return err == nil && resp.Code == remoting.ResponseTopicNotExist
	})
	_ = c.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("namesrv command returned %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("namesrv command did not stop after cancel")
	}
}
