package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable time for the login limiter.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) add(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// Refused credentials could be tried at full speed: the console account's
// secret key could be guessed as fast as the port answered. After a few
// refusals in a row an address is now locked out, with a back-off that
// doubles, answered 429 with Retry-After, and its credentials are not
// compared meanwhile; other addresses are not affected.
func TestWrongCredentialsLockOut(t *testing.T) {
	ns := startNamesrv(t)
	c, err := New(ns, Options{AccessKey: "console-ak", SecretKey: "console-sk"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	clock := &fakeClock{t: time.Now()}
	c.logins.now = clock.now
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	call := func(sk string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/auth", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("console-ak", sk)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	for i := range loginFreeFailures + 1 {
		if code, _ := call(fmt.Sprintf("guess-%d", i)); code != http.StatusUnauthorized {
			t.Fatalf("refusal %d: %d, want 401", i+1, code)
		}
	}
	// Locked out: even the right key is not compared.
	code, ra := call("console-sk")
	if code != http.StatusTooManyRequests || ra != "1" {
		t.Fatalf("right key while locked out: %d Retry-After %q, want 429 and 1", code, ra)
	}
	// Another address signs in meanwhile.
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/api/auth", nil)
	req.RemoteAddr = "192.0.2.7:5000"
	req.SetBasicAuth("console-ak", "console-sk")
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("another address: %d %s", rec.Code, rec.Body)
	}
	// The next refusal doubles the lock-out.
	clock.add(time.Second)
	if code, _ := call("guess-again"); code != http.StatusUnauthorized {
		t.Fatalf("refusal after the lock-out: %d", code)
	}
	if code, ra := call("console-sk"); code != http.StatusTooManyRequests || ra != "2" {
		t.Fatalf("after another refusal: %d Retry-After %q, want 429 and 2", code, ra)
	}
	// Once it is over, the right key signs in and clears the address.
	clock.add(2 * time.Second)
	if code, _ := call("console-sk"); code != http.StatusOK {
		t.Fatalf("right key after the lock-out: %d", code)
	}
	for i := range loginFreeFailures {
		if code, _ := call(fmt.Sprintf("typo-%d", i)); code != http.StatusUnauthorized {
			t.Fatalf("typo %d after a sign-in: %d, want 401 (the count starts over)", i+1, code)
		}
	}
	if code, _ := call("console-sk"); code != http.StatusOK {
		t.Fatalf("right key after %d typos: %d", loginFreeFailures, code)
	}
	// Capped: many refusals lock out for at most loginMaxLockout.
	for range 40 {
		clock.add(loginMaxLockout)
		call("guess")
	}
	if code, ra := call("console-sk"); code != http.StatusTooManyRequests || ra != strconv.Itoa(int(loginMaxLockout/time.Second)) {
		t.Fatalf("after 40 lock-outs: %d Retry-After %q, want 429 and %d", code, ra, int(loginMaxLockout/time.Second))
	}
}

// The limiter remembers at most loginMaxAddrs addresses: refusals from
// more share one entry, which locks them out together.
func TestLoginLimiterBounded(t *testing.T) {
	l := newLoginLimiter()
	clock := &fakeClock{t: time.Now()}
	l.now = clock.now
	for i := range 3 * loginMaxAddrs {
		l.failed(loginKey(fmt.Sprintf("10.%d.%d.%d:1", i>>16, (i>>8)&255, i&255)))
	}
	if n := l.size(); n > loginMaxAddrs+1 {
		t.Fatalf("%d entries for %d addresses, want at most %d", n, 3*loginMaxAddrs, loginMaxAddrs+1)
	}
	if l.wait(loginKey("192.0.2.1:1")) == 0 {
		t.Error("an address past the bound is not locked out with the overflow")
	}
	// Forgotten entries make room again.
	clock.add(loginForget + loginMaxLockout + time.Second)
	l.failed(loginKey("192.0.2.1:1"))
	if n, w := l.size(), l.wait(loginKey("192.0.2.1:1")); n != 1 || w != 0 {
		t.Errorf("after the forget time: %d entries, wait %v; want 1 and 0", n, w)
	}
	// One IPv6 host's /64 is one entry.
	if a, b := loginKey("[2001:db8::1]:1"), loginKey("[2001:db8::ffff:2]:2"); a != b {
		t.Errorf("keys %s and %s of one /64 differ", a, b)
	}
}

// A console account with keys the brokers' ACL would not take (6
// characters or fewer) is refused: it guarded the actions with a
// guessable password.
func TestShortAccountRefused(t *testing.T) {
	ns := startNamesrv(t)
	for _, o := range []Options{{AccessKey: "admin", SecretKey: "admin"}, {AccessKey: "console-ak"}} {
		if c, err := New(ns, o); !errors.Is(err, ErrCredentials) {
			_ = c.Close()
			t.Errorf("account %q/%q: %v, want ErrCredentials", o.AccessKey, o.SecretKey, err)
		}
	}
}
