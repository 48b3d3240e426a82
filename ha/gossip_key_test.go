package ha

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap"

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
