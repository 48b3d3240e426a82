package ha

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/raftmq/raftmq/internal/testutil"
)

// startKeyed starts a gossip node with secretKey on a fresh port and
// returns it with the error of its first join of seeds (nil without seeds).
func startKeyed(t *testing.T, name, secretKey string, seeds ...*testNode) *testNode {
	t.Helper()
	for attempt := 0; ; attempt++ {
		cfg := testConfig(name, testutil.FreePort(t), seeds...)
		cfg.SecretKey = secretKey
		g, err := NewGossip(cfg, brokerMeta("bk", name, 10911), zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if err = g.Start(context.Background()); err == nil {
			t.Cleanup(func() { _ = g.Close() })
			return &testNode{g: g, port: cfg.BindPort}
		}
		_ = g.Close()
		if !errors.Is(err, ErrBind) || attempt == 4 {
			t.Fatalf("start %s: %v", name, err)
		}
	}
}

func key(b byte, n int) string {
	return base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(rune(b)), n)))
}

// TestGossipSecretKey: members sharing gossipSecretKey form a pool; a
// process with another key or none cannot join it (its join fails) and
// no member ever lists it.
func TestGossipSecretKey(t *testing.T) {
	t.Parallel()
	k := key('k', 32)
	a := startKeyed(t, "a", k)
	b := startKeyed(t, "b", k, a)
	waitAlive(t, []*testNode{a, b}, "a", "b")

	for name, secret := range map[string]string{"wrong": key('w', 32), "none": "", "rotated-out": key('x', 16)} {
		n := startKeyed(t, name, secret)
		if got, err := n.g.Join([]string{a.addr(), b.addr()}); err == nil || got != 0 {
			t.Fatalf("%s key: joined %d members (err %v)", name, got, err)
		}
		for _, m := range append(a.g.LiveMembers(), b.g.LiveMembers()...) {
			if m.Name == name {
				t.Fatalf("%s key: member listed by the pool", name)
			}
		}
	}

	// Rotation, first step: a node that already knows the next key (listed
	// second: it decrypts with it but still encrypts with the pool's key)
	// joins the pool.
	c := startKeyed(t, "c", k+","+key('n', 24), a)
	waitAlive(t, []*testNode{a, b, c}, "a", "b", "c")
}

func TestGossipSecretKeyValidate(t *testing.T) {
	for _, s := range []string{"not base64!", key('k', 15), key('k', 32) + ",", base64.StdEncoding.EncodeToString(make([]byte, 33))} {
		c := testConfig("a", 1)
		c.SecretKey = s
		err := c.Validate()
		if !errors.Is(err, ErrInvalidGossipConfig) || !strings.Contains(err.Error(), "gossipSecretKey") {
			t.Errorf("%q: %v", s, err)
		}
		if err != nil && strings.Contains(err.Error(), s) && s != "" {
			t.Errorf("%q: the error repeats the key", s)
		}
	}
}

// TestGossipRefusalsWarned: the pool warns, at most once a minute per
// kind, of a process it refuses — another key, none, another label, a
// member's name from another address — which memberlist logs only at
// debug: such a process is never a member, so no name server would hear
// of its death, and the pool's logs would not say why.
func TestGossipRefusalsWarned(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.InfoLevel)
	k := key('k', 32)
	a := startNodeWith(t, "a", 0, brokerMeta("bk", "a", 10911), func(c *GossipConfig) { c.SecretKey = k }, zap.New(core))
	warnings := func(why string) int {
		n := 0
		for _, e := range logs.All() {
			if e.Level == zapcore.WarnLevel && strings.Contains(e.Message, why) {
				n++
			}
		}
		return n
	}
	for _, c := range []struct {
		name, why string
		mutate    func(*GossipConfig)
	}{
		{"wrong", "another gossipSecretKey", func(c *GossipConfig) { c.SecretKey = key('w', 32) }},
		{"none", "no gossipSecretKey", func(*GossipConfig) {}},
		{"label", "another gossipLabel", func(c *GossipConfig) { c.SecretKey, c.Label = k, "other" }},
		{"a", "a member's gossipNodeName", func(c *GossipConfig) { c.SecretKey = k }},
	} {
		n := startNodeWith(t, c.name, 0, brokerMeta("bk", c.name, 10921), c.mutate, nil)
		for range 3 {
			_, _ = n.g.Join([]string{a.addr()})
		}
		testutil.WaitFor(t, 5*time.Second, "a warning of "+c.why, func() bool { return warnings(c.why) > 0 })
		if got := warnings(c.why); got != 1 {
			t.Errorf("%s: %d warnings of %q for three joins, want one", c.name, got, c.why)
		}
	}
	for _, m := range a.g.LiveMembers() {
		if !m.Local {
			t.Errorf("refused process listed as a member: %+v", m)
		}
	}
}
