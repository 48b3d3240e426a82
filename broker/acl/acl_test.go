package acl

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/testutil"
)

// stockFile is RocketMQ 4.9's distribution plain_acl.yml layout: numeric
// secret keys, an empty whiteRemoteAddress, comments.
const stockFile = `
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
`

func mustCompile(t testing.TB, s string) *Rules {
	t.Helper()
	r, err := Compile([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// signedBy is a Verify that accepts exactly one secret.
func signedBy(secret string) func(string) bool {
	return func(s string) bool { return s == secret }
}

func TestCheck(t *testing.T) {
	r := mustCompile(t, stockFile)
	if r.Accounts != 2 {
		t.Fatalf("%d accounts", r.Accounts)
	}
	client := netip.MustParseAddr("10.0.0.9")
	req := func(ak, secret string, admin bool, res ...Resource) Request {
		return Request{Code: 10, Addr: client, AccessKey: ak, Verify: signedBy(secret), Admin: admin, Resources: res}
	}
	cases := []struct {
		name string
		q    Request
		deny string // substring of the remark; "" = allowed
	}{
		{"listed PUB|SUB", req("RocketMQ", "12345678", false, Resource{"topicB", Pub}), ""},
		{"listed SUB needs PUB", req("RocketMQ", "12345678", false, Resource{"topicC", Pub}), "no PUB permission on topic:topicC (listed permission SUB)"},
		{"listed DENY", req("RocketMQ", "12345678", false, Resource{"topicA", Sub}), "no SUB permission on topic:topicA"},
		{"default topic DENY", req("RocketMQ", "12345678", false, Resource{"other", Pub}), "no PUB permission on topic:other (default permission DENY)"},
		{"default group SUB", req("RocketMQ", "12345678", false, GroupResource("anyGroup", Sub)), ""},
		{"listed group DENY", req("RocketMQ", "12345678", false, GroupResource("groupA", Sub)), "no SUB permission on group:groupA"},
		{"wrong secret", req("RocketMQ", "bad-secret", false, Resource{"topicB", Pub}), "signature check failed for accessKey=RocketMQ"},
		{"unknown account", req("nobody99", "x", false), "no account for accessKey=nobody99"},
		{"no access key", req("", "", false), "has no AccessKey"},
		{"admin code, plain account", req("RocketMQ", "12345678", true), "needs an admin account; accessKey=RocketMQ is not admin"},
		{"admin code, admin account", req("rocketmq2", "12345678", true, Resource{"anything", Pub}), ""},
		{"trace topic PUB", req("RocketMQ", "12345678", false, Resource{traceTopic, Pub}), ""},
		// The trace topic's exemption is for a send of traces: it must not
		// carry the other resources of a request that names the trace
		// topic too (an END_TRANSACTION's header topic beside the half's
		// real topic), nor an admin-only request.
		{"trace topic PUB beside another topic", req("RocketMQ", "12345678", false, Resource{traceTopic, Pub}, Resource{"topicA", Pub}),
			"no PUB permission on topic:topicA"},
		{"trace topic PUB on an admin code", req("RocketMQ", "12345678", true, Resource{traceTopic, Pub}),
			"needs an admin account; accessKey=RocketMQ is not admin"},
	}
	for _, c := range cases {
		err := r.Check(c.q)
		if c.deny == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		var d *Denied
		if !errors.As(err, &d) || !strings.Contains(d.Reason, c.deny) {
			t.Errorf("%s: got %v, want a refusal containing %q", c.name, err, c.deny)
		}
	}
	// White addresses pass without a signature: the global ones for any
	// account (or none), an account's own for that account.
	q := req("", "", true)
	q.Addr = netip.MustParseAddr("192.168.0.77")
	if err := r.Check(q); err != nil {
		t.Errorf("global white address refused: %v", err)
	}
	q = req("rocketmq2", "not-signed", true)
	q.Addr = netip.MustParseAddr("192.168.1.5")
	if err := r.Check(q); err != nil {
		t.Errorf("account white address refused: %v", err)
	}
	q.Addr = netip.MustParseAddr("192.168.2.5")
	if err := r.Check(q); err == nil {
		t.Error("outside the account's white address, an unsigned request passed")
	}
}

func TestCompileRefusals(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"accounts:\n  - accessKey: short\n    secretKey: 12345678\n", "at least 7 characters"},
		{"accounts:\n  - accessKey: account1\n    secretKey: 12345678\n    defaultTopicPerm: READ\n", `defaultTopicPerm: permission "READ"`},
		{"accounts:\n  - accessKey: account1\n    secretKey: 12345678\n    topicPerms: [topicA]\n", `topicPerms entry "topicA": want NAME=PERM`},
		{"accounts:\n  - accessKey: account1\n    secretKey: 12345678\n    topicPerms: [topicA=ALL]\n", `topicPerms entry "topicA=ALL"`},
		{"accounts:\n  - accessKey: account1\n    secretKey: 12345678\n  - accessKey: account1\n    secretKey: 12345678\n", "listed twice"},
		{"accounts:\n  - accessKey: account1\n    secretKey: 12345678\n    whiteRemoteAddress: 300.1.1.1\n", "whiteRemoteAddress"},
		{"accounts:\n  - accessKey: account1\n    secretKey: 12345678\n    topicPerm: [a=SUB]\n", "topicPerm"},
		{"globalWhiteRemoteAddresses: [10.1.*.5]\n", "after a range must be *"},
		{"accounts: [\n", "invalid plain_acl.yml"},
		// A second document would be ignored: the file holds one.
		{"accounts:\n  - accessKey: account1\n    secretKey: 12345678\n---\nglobalWhiteRemoteAddresses: [10.1.1.1]\n", "more than one YAML document"},
		{"---\n---\naccounts:\n  - accessKey: account1\n    secretKey: 12345678\n", "more than one YAML document"},
	} {
		_, err := Compile([]byte(c.file))
		if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want ErrInvalidConfig naming %q", c.file, err, c.want)
		}
	}
	for _, empty := range []string{"", "\n  \n", "# only a comment\n", "---\n", "~\n", "null\n"} {
		if _, err := Compile([]byte(empty)); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "holds no rules") {
			t.Errorf("%q: got %v, want ErrInvalidConfig saying the file holds no rules", empty, err)
		}
	}
	if r, err := Compile([]byte("accounts: []\n")); err != nil || r.Accounts != 0 {
		t.Errorf("a file listing no account: %v, %+v", err, r)
	}
}

func TestAddrPatterns(t *testing.T) {
	for _, c := range []struct {
		pat  string
		in   []string
		out  []string
		fail bool
	}{
		{pat: "", out: []string{"1.2.3.4"}},
		{pat: "*", in: []string{"1.2.3.4", "::1"}},
		{pat: "192.168.1.7", in: []string{"192.168.1.7", "::ffff:192.168.1.7"}, out: []string{"192.168.1.8"}},
		{pat: "192.168.1.*", in: []string{"192.168.1.0", "192.168.1.255"}, out: []string{"192.168.2.1"}},
		{pat: "192.168.*.*", in: []string{"192.168.9.9"}, out: []string{"192.169.0.1"}},
		{pat: "192.168.1.10-20", in: []string{"192.168.1.10", "192.168.1.20"}, out: []string{"192.168.1.21", "192.168.1.9"}},
		{pat: "10.1-2.*.*", in: []string{"10.2.200.1"}, out: []string{"10.3.0.0"}},
		{pat: "192.168.0.{1,2}", in: []string{"192.168.0.1", "192.168.0.2"}, out: []string{"192.168.0.3"}},
		{pat: "10.0.0.1,10.0.0.2", in: []string{"10.0.0.2"}, out: []string{"10.0.0.3"}},
		{pat: "::1", in: []string{"::1"}, out: []string{"127.0.0.1"}},
		{pat: "1.2.3", fail: true},
		{pat: "1.2.3.4-2", fail: true},
		{pat: "fe80::*", fail: true},
		{pat: "1.2.3.{x}", fail: true},
	} {
		m, err := compileAddr(c.pat)
		if c.fail {
			if err == nil {
				t.Errorf("%q: compiled", c.pat)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.pat, err)
			continue
		}
		for _, a := range c.in {
			if !m.match(netip.MustParseAddr(a)) {
				t.Errorf("%q does not match %s", c.pat, a)
			}
		}
		for _, a := range c.out {
			if m.match(netip.MustParseAddr(a)) {
				t.Errorf("%q matches %s", c.pat, a)
			}
		}
	}
}

func TestStoreReloadAndRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	if _, err := Open(path, nil); err == nil {
		t.Fatal("a missing file opened")
	}
	if err := os.WriteFile(path, []byte(stockFile), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := s.Rules().Hash

	// An edit to the file is picked up by the poller.
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); s.Watch(quit, 5*time.Millisecond) }()
	defer func() { close(quit); <-done }()
	edited := strings.Replace(stockFile, "topicC=SUB", "topicC=PUB", 1)
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	want := mustCompile(t, edited).Hash
	if want == first {
		t.Fatal("the edit does not change the hash")
	}
	testutil.WaitFor(t, 5*time.Second, "edited rules loaded", func() bool { return s.Rules().Hash == want })
	q := Request{AccessKey: "RocketMQ", Verify: signedBy("12345678"), Resources: []Resource{{"topicC", Pub}}}
	if err := s.Rules().Check(q); err != nil {
		t.Fatalf("edited permission not in force: %v", err)
	}

	// A broken file keeps the last good rules.
	good := s.Rules()
	if err := os.WriteFile(path, []byte("accounts: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reload(true); err == nil {
		t.Fatal("broken file reloaded")
	}
	if s.Rules() != good {
		t.Fatal("broken file replaced the rules")
	}
	// So does an empty one (a file caught truncated while rewritten).
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reload(true); err == nil {
		t.Fatal("empty file reloaded")
	}
	if s.Rules() != good {
		t.Fatal("empty file replaced the rules")
	}
	if _, err := Open(path, nil); err == nil {
		t.Fatal("an empty file opened")
	}
	if err := os.WriteFile(path, []byte(stockFile), 0o600); err != nil {
		t.Fatal(err)
	}

	// The admin commands' rewrites: each bumps dataVersion.
	if err := s.Update(Account{AccessKey: "newAccount", SecretKey: "newSecret1", DefaultTopicPerm: "PUB", TopicPerms: []string{"x=SUB"}}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(Account{AccessKey: "RocketMQ", TopicPerms: []string{"topicA=PUB"}}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.SetGlobalWhite([]string{"10.9.9.9"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("rocketmq2"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("rocketmq2"); !errors.Is(err, ErrNoAccount) {
		t.Fatalf("second delete: %v", err)
	}
	if err := s.Update(Account{AccessKey: "badAccount", SecretKey: "x"}, false); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("short secret: %v", err)
	}
	r := s.Rules()
	if r.Version.Counter != 4 || r.Accounts != 2 {
		t.Fatalf("after 4 rewrites: version %+v, %d accounts", r.Version, r.Accounts)
	}
	data, _ := os.ReadFile(path)
	f, err := ParseFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if f.GlobalWhiteRemoteAddresses[0] != "10.9.9.9" || f.Accounts[0].SecretKey != "12345678" || f.Accounts[0].TopicPerms[0] != "topicA=PUB" {
		t.Fatalf("rewritten file: %+v", f)
	}
	q = Request{AccessKey: "newAccount", Verify: signedBy("newSecret1"), Resources: []Resource{{"y", Pub}}}
	if err := r.Check(q); err != nil {
		t.Fatalf("new account: %v", err)
	}
}

// FuzzCompile: any input either compiles or fails with ErrInvalidConfig,
// never panics; what compiles survives a rewrite unchanged in meaning.
func FuzzCompile(f *testing.F) {
	f.Add([]byte(stockFile))
	f.Add([]byte(""))
	f.Add([]byte("accounts:\n  - accessKey: account1\n    secretKey: 12345678\n    whiteRemoteAddress: 192.168.{1,2}\n"))
	f.Add([]byte("globalWhiteRemoteAddresses: ['*', '1.2.3.4-5', '10.0.0.1,10.0.0.2']\ndataVersion:\n  - counter: 3\n    timestamp: 1700000000000\n"))
	f.Add([]byte("accounts: {a: 1}\n"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Compile(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error without ErrInvalidConfig: %v", err)
			}
			return
		}
		pf, err := ParseFile(data)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pf.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		r2, err := Compile(out)
		if err != nil {
			t.Fatalf("rewritten file does not compile: %v\n%s", err, out)
		}
		if r2.Accounts != r.Accounts || r2.Version != r.Version || len(r2.global) != len(r.global) {
			t.Fatalf("rewrite changed the rules: %d/%d accounts", r.Accounts, r2.Accounts)
		}
	})
}

// The example shipped in deploy/ compiles.
func TestDeployExampleCompiles(t *testing.T) {
	data, err := os.ReadFile("../../deploy/plain_acl.yml")
	if err != nil {
		t.Fatal(err)
	}
	if r := mustCompile(t, string(data)); r.Accounts != 2 {
		t.Fatalf("%d accounts", r.Accounts)
	}
}

// TestStoreReloadSeesSameSizeSameMtimeEdit: an edit that keeps the file's
// size and modification time (cp -p, rsync -t, touch -r) is still a new
// version: its change time moved.
func TestStoreReloadSeesSameSizeSameMtimeEdit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plain_acl.yml")
	if err := os.WriteFile(path, []byte(stockFile), 0o600); err != nil {
		t.Fatal(err)
	}
	old, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(stockFile, "topicC=SUB", "topicC=PUB", 1)
	if len(edited) != len(stockFile) {
		t.Fatal("the edit changes the size")
	}
	// The change time has a clock tick's resolution: let one pass first.
	testutil.WaitFor(t, 5*time.Second, "the clock moves past the file's change time", func() bool {
		return time.Now().After(old.ModTime().Add(10 * time.Millisecond))
	})
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, old.ModTime(), old.ModTime()); err != nil {
		t.Fatal(err)
	}
	if now, err := os.Stat(path); err != nil || now.Size() != old.Size() || !now.ModTime().Equal(old.ModTime()) {
		t.Fatalf("the edited file's size and mtime differ from the old: %v", err)
	}
	if changed, err := s.Reload(false); err != nil || !changed {
		t.Fatalf("Reload(false) after a same-size, same-mtime edit: changed %v, %v; want the edit loaded", changed, err)
	}
	if s.Rules().Hash != mustCompile(t, edited).Hash {
		t.Fatal("the edited rules are not in force")
	}
}
