package broker

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/raftmq/raftmq/internal/config"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/remoting"
)

// stripComments drops a properties file's comment lines, so a seed is
// small enough for the fuzzer to minimize what it derives from it.
func stripComments(b []byte) []byte {
	var out []byte
	for _, l := range bytes.SplitAfter(b, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' && t[0] != '!' {
			out = append(out, l...)
		}
	}
	return out
}

// FuzzBrokerConfigFile: a broker.conf of any bytes loads, derives and
// validates to a config or an error, never a panic; a config that passes
// prints (-p, GET_BROKER_CONFIG) as a file that loads back to the same
// settings.
func FuzzBrokerConfigFile(f *testing.F) {
	for _, p := range []string{"../deploy/broker-n0.conf", "../deploy/compose/broker-a-n1.conf",
		"../cmd/raftmq/testdata/rocketmq-4.9.8/dledger/broker-n0.conf", "../cmd/raftmq/testdata/rocketmq-4.9.8/2m-2s-async/broker-a.properties"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(stripComments(b))
	}
	f.Add([]byte("brokerName=b\nnamesrvAddr=h:1;[::1]:2\nmessageDelayLevel=1s 200ms 1d\ndeleteWhen=04;23\ndLegerPeers=n0-h:1\ndLegerSelfId=n0\n"))
	f.Add([]byte("brokerIP1=::1\nlistenPort=65535\ngossipEnable=true\ngossipSecretKey=AAAAAAAAAAAAAAAAAAAAAA==\ntlsServerMode=permissive\n"))
	f.Add([]byte("namesrvAddr=h\\\n  :9876\nbrokerName=a\\u0062\n=x\nbrokerRole=SYNC_MASTER\n"))
	// `raftmq broker -c`'s load: the file over the defaults, then Derive
	// and Validate.
	f.Fuzz(func(t *testing.T, data []byte) {
		testutil.CheckConfigFile(t, data, DefaultConfig, func(c *BrokerConfig) error { return errors.Join(c.Derive(), c.Validate()) })
	})
}

// FuzzRuntimeConfigBody: an UPDATE_BROKER_CONFIG body of any bytes is
// refused with a remark or applied, never a panic; an applied change
// leaves a config Validate finds no new fault in.
func FuzzRuntimeConfigBody(f *testing.F) {
	for _, s := range []string{"maxMessageSize=1024\n", "defaultTopicQueueNums=0", "defaultTopicQueueNums=1024\nautoCreateTopicEnable=false",
		"shortPollingTimeMills=-1", "maxReconsumeTimes=16\nlongPollingEnable=false", "listenPort=1", "autoCreateSubscriptionGroup=yes", ""} {
		f.Add([]byte(s))
	}
	c := newPathController(f, newPathReplica())
	start := c.live()
	problems := func(cfg *BrokerConfig) string {
		if err := cfg.Validate(); err != nil {
			return err.Error()
		}
		return ""
	}
	want := problems(start)
	f.Fuzz(func(t *testing.T, body []byte) {
		defer c.liveCfg.Store(start)
		kv, err := config.ParseProperties(body)
		if err != nil || len(kv) == 0 {
			return // refused before any key is looked at (processUpdateBrokerConfig)
		}
		for k := range kv {
			if !isRuntimeKey(k) {
				return
			}
		}
		if r := c.applyRuntimeConfig(kv, false); r != nil {
			if r.Code != remoting.ResponseInvalidParameter || r.Remark == "" {
				t.Fatalf("refusal %d %q", r.Code, r.Remark)
			}
			if c.live() != start {
				t.Fatal("a refused change was applied")
			}
			return
		}
		if got := problems(c.live()); got != want {
			t.Fatalf("%q applied; Validate now says %q, at start %q", body, got, want)
		}
	})
}
