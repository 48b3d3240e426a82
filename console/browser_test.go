package console_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/raftmq/raftmq/console"
)

// chromiumPath finds a Chromium: $CHROMIUM_PATH, else the Debian
// package's binary or another Chrome on PATH.
func chromiumPath() string {
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artifactDir is where screenshots go: $CONSOLE_ARTIFACTS (CI sets
// ./artifacts/console), else the test's temporary directory.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("CONSOLE_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// needChromium finds a Chromium or skips the test (fails it under CI).
func needChromium(t *testing.T) string {
	t.Helper()
	bin := chromiumPath()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no Chromium found (install the Debian package chromium, or set CHROMIUM_PATH); CI must run the browser test")
		}
		t.Skip("no Chromium found (apt-get install chromium, or set CHROMIUM_PATH): browser test skipped outside CI")
	}
	return bin
}

// browser is one headless Chromium tab and the steps the tests take in it.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string
}

// newBrowser starts Chromium; the test's cleanup stops it.
func newBrowser(t *testing.T, bin string) *browser {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1400, 1100))...)
	ctx, cancelTab := chromedp.NewContext(alloc)
	ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx)
		cancel()
		cancelTab()
		cancelAlloc()
	})
	return &browser{t: t, ctx: ctx, shots: artifactDir(t)}
}

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// waitJS polls a JavaScript predicate in the page.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		b.t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, expr, err, text)
	}
}

func (b *browser) eval(expr string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

// click clicks like a user (mouse events at the element's box). A poll
// may replace the node found before its box is read (a row whose key
// changed); then no event was sent, and the click is tried again on the
// new node.
func (b *browser) click(what, sel string) {
	b.t.Helper()
	var err error
	for range 20 {
		if err = chromedp.Do(b.ctx, chromedp.Click(sel)); err == nil {
			return
		}
		if !strings.Contains(err.Error(), "node") {
			break
		}
	}
	b.t.Fatalf("%s: %v", what, err)
}

func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(b.shots, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", p)
}

// TestBrowser loads the console in a real headless Chromium against a
// live 3-member group and reads the rendered DOM: the group's members and
// leader, a topic's queues, a consumer group's lag per queue, messages
// arriving without a reload, a message lookup, and a leadership transfer
// refused before signing in and performed after. Screenshots of each step
// are saved.
func TestBrowser(t *testing.T) {
	bin := needChromium(t)
	e := startEnv(t, adminAK, adminSK)
	e.send(t, 10, "order-42")
	for q := range int32(4) {
		e.commit(t, q, 1)
	}
	b := newBrowser(t, bin)
	do, waitJS, eval, click, shot := b.do, b.waitJS, b.eval, b.click, b.shot

	do("open the console", chromedp.Navigate(e.url+"/console/?refresh=300"))
	// A marker that a reload would wipe: live updates must keep it.
	do("set the no-reload marker", chromedp.Evaluate[chromedp.Void](`window.__noReload = "still here"`))

	// Cluster map: three members, one leader, its id in the group header.
	waitJS("the group's three members", `document.querySelectorAll('#cluster .group[data-group="broker-a"] tr[data-member]').length === 3`)
	waitJS("one leader and two followers answering", `(() => {
		const s = [...document.querySelectorAll('#cluster .group[data-group="broker-a"] tr[data-member]')].map(r => r.dataset.state);
		return s.filter(x => x === "Leader").length === 1 && s.filter(x => x === "Follower").length === 2;
	})()`)
	leader := eval(`document.querySelector('#cluster .group[data-group="broker-a"]').dataset.leader`)
	states := eval(`[...document.querySelectorAll('#cluster tr[data-member]')].map(r => r.dataset.member + "=" + r.dataset.state).sort().join(",")`)
	if strings.Count(states, "=Leader") != 1 || strings.Count(states, "=Follower") != 2 || !strings.Contains(states, leader+"=Leader") {
		t.Fatalf("member states %q, leader %q", states, leader)
	}
	if h := eval(`document.querySelector('#cluster .group[data-group="broker-a"] [data-field=leader]').textContent`); h != "leader "+leader {
		t.Errorf("group header shows %q, want leader %s", h, leader)
	}
	shot("01-cluster.png")

	// A topic with its queues.
	waitJS("the topic row", `!!document.querySelector('#topics tr[data-topic="ConsoleTopic"]')`)
	click("select the topic", `#topics tr[data-topic="ConsoleTopic"]`)
	waitJS("the topic's four queues", `document.querySelectorAll('#topic-queues tbody tr').length === 4`)
	if sum := eval(`String([...document.querySelectorAll('#topic-queues td[data-field=maxOffset]')].reduce((s, td) => s + Number(td.textContent.replace(/,/g, "")), 0))`); sum != "10" {
		t.Errorf("queue max offsets sum to %s, want 10", sum)
	}

	// A consumer group's lag, in total and per queue.
	waitJS("the consumer group row", `!!document.querySelector('#groups tr[data-consumer-group="ConsoleGroup"]')`)
	if lag := eval(`document.querySelector('#groups tr[data-consumer-group="ConsoleGroup"] td[data-field=lag]').textContent`); lag != "6" {
		t.Errorf("group lag %q, want 6 (10 messages, 4 queues committed at 1)", lag)
	}
	click("select the group", `#groups tr[data-consumer-group="ConsoleGroup"]`)
	waitJS("the group's four queues", `document.querySelectorAll('#group-queues tbody tr').length === 4`)

	// Live update: messages sent now appear without a reload.
	e.send(t, 5, "order-43")
	waitJS("the new messages in the topic row", `document.querySelector('#topics tr[data-topic="ConsoleTopic"] td:nth-child(4)').textContent === "15"`)
	waitJS("the new lag", `document.querySelector('#groups tr[data-consumer-group="ConsoleGroup"] td[data-field=lag]').textContent === "11"`)
	if m := eval(`String(window.__noReload)`); m != "still here" {
		t.Fatalf("the page reloaded (marker %q)", m)
	}
	shot("02-topics-groups.png")

	// A Raft action before signing in is refused, and the page says why.
	click("transfer without credentials", `#cluster button[data-action=transfer][data-group="broker-a"][data-target=""]`)
	waitJS("the refusal", `document.getElementById("action-result").dataset.outcome === "refused"`)
	if r := eval(`document.getElementById("action-result").textContent`); !strings.Contains(r, "authenticate") {
		t.Errorf("refusal text %q", r)
	}
	if now := eval(`document.querySelector('#cluster .group[data-group="broker-a"]').dataset.leader`); now != leader {
		t.Fatalf("leader moved from %s to %s without credentials", leader, now)
	}
	shot("03-action-refused.png")

	// Sign in, then look a message up by key.
	do("sign in", chromedp.SendKeys(`#ak`, adminAK), chromedp.SendKeys(`#sk`, adminSK), chromedp.Click(`#login button`))
	waitJS("signed in", `document.getElementById("login-state").textContent === "signed in as `+adminAK+`"`)
	do("look up by key", chromedp.SendKeys(`#lookup-topic`, testTopic), chromedp.SendKeys(`#lookup-key`, "order-43"), chromedp.Click(`#lookup button`))
	waitJS("five messages found", `document.querySelectorAll('#lookup-result dl.message').length === 5`)
	bodies := eval(`[...document.querySelectorAll('#lookup-result dd[data-field=body]')].map(d => d.textContent).sort().join("|")`)
	if bodies != "hello console 0|hello console 1|hello console 2|hello console 3|hello console 4" {
		t.Errorf("looked-up bodies %q", bodies)
	}
	shot("04-lookup.png")

	// Signed in, the transfer is performed and the map follows.
	click("transfer with credentials", `#cluster button[data-action=transfer][data-group="broker-a"][data-target=""]`)
	waitJS("the transfer result", `document.getElementById("action-result").dataset.outcome === "ok" && document.getElementById("action-result").textContent.includes("→")`)
	waitJS("a new leader on the map", fmt.Sprintf(`(() => { const g = document.querySelector('#cluster .group[data-group="broker-a"]'); return g && g.dataset.leader !== "" && g.dataset.leader !== %q })()`, leader))
	t.Logf("action: %s", eval(`document.getElementById("action-result").textContent`))
	shot("05-transferred.png")
	if m := eval(`String(window.__noReload)`); m != "still here" {
		t.Fatalf("the page reloaded (marker %q)", m)
	}

	// A console without an admin account says actions are off and offers
	// no action button.
	ro, err := console.New(e.c.Namesrv(), console.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	roSrv := httptest.NewServer(ro.Handler())
	defer roSrv.Close()
	do("open a console without an account", chromedp.Navigate(roSrv.URL+"/console/?refresh=300"))
	waitJS("the disabled-actions note", `document.getElementById("actions-note").textContent.includes("actions are disabled")`)
	waitJS("the group on the map", `!!document.querySelector('#cluster .group[data-group="broker-a"]')`)
	if n := eval(`String(document.querySelectorAll('#cluster button:not([disabled])').length) + "/" + String(document.getElementById("balance").disabled) + "/" + getComputedStyle(document.getElementById("login")).display`); n != "0/true/none" {
		t.Errorf("read-only console: enabled action buttons/balance disabled/login form display = %s, want 0/true/none", n)
	}
	shot("06-read-only.png")
}
