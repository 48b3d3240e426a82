package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/raftmq/raftmq/console"
	"github.com/raftmq/raftmq/internal/testutil"
	"github.com/raftmq/raftmq/namesrv"
)

// TestBrowserFailures loads the real page in headless Chromium against an
// API that answers what a troubled cluster answers, which a live test
// group cannot be made to answer on demand: a broker group missing from
// the consumer-group collection, a selected topic deleted since, balance
// moves the brokers refused, and names carrying markup.
//
//   - The missing group's name and error are shown above the lag table:
//     before, its queues were left out of every lag without a word.
//   - A selected topic whose detail fails says so in its own panel, and
//     the selected consumer group's lag per queue keeps refreshing: before,
//     the failure stopped the group detail's refresh (its stale lag stayed
//     on screen) and marked the whole page as failing.
//   - A topic last written years ago shows the date of its last write:
//     before, only a time of day, which reads as today.
//   - A looked-up message whose producer set a born timestamp out of
//     JavaScript's Date range is shown: before, formatting it threw and
//     the whole lookup said "lookup failed: Invalid time value".
//   - A balance whose moves failed (an error status with the moves) shows
//     each move's result as a failure.
func TestBrowserFailures(t *testing.T) {
	bin := needChromium(t)
	cfg := namesrv.DefaultConfig()
	cfg.ListenAddr, cfg.ListenPort, cfg.MetricsPort = "127.0.0.1", testutil.FreePort(t), -1
	cfg.KVConfigPath = filepath.Join(t.TempDir(), "kv.json")
	ns, err := namesrv.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(ns, console.Options{AccessKey: adminAK, SecretKey: adminSK})
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close()

	const markup = `<img src=x onerror="window.__xss=1">`
	var groupPolls atomic.Int64
	api := http.NewServeMux()
	api.HandleFunc("GET /api/cluster", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"time": 1764608042000, "namesrv": "127.0.0.1:9876", "clusters": [{"name": "C", "groups": [{"cluster": "C",
			"brokerName": "broker-a", "leaderId": "n0", "term": 2, "routedLeader": "127.0.0.1:10911", "members": [{"id": "n0",
			"remotingAddr": "127.0.0.1:10911", "brokerId": 0, "suffrage": "Voter", "state": "Leader", "term": 2, "lag": 0,
			"lastContactMillis": 0}]}]}], "gossip": {"enabled": false, "members": []},
			"actions": {"enabled": true, "reason": "actions need the console's admin account"}}`)
	})
	api.HandleFunc("GET /api/topics", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("topic") != "" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"error": "no topic %s in the name server's routes"}`, r.URL.Query().Get("topic"))
			return
		}
		fmt.Fprintf(w, `{"time": 1, "topics": [{"topic": "Gone", "system": false, "brokers": ["broker-a"], "queues": 1, "messages": 3,
			"maxOffset": 3, "rate": -1, "lastUpdate": 1578000000000}, {"topic": %q, "system": false, "brokers": [], "queues": 0, "messages": 0,
			"maxOffset": 0, "rate": -1, "lastUpdate": 0}]}`, markup)
	})
	api.HandleFunc("GET /api/groups", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("group") != "" {
			// The lag grows with every request: a refreshed panel shows it.
			fmt.Fprintf(w, `{"time": 1, "group": "G1", "system": false, "topics": ["T"], "lag": %[1]d, "consumeTps": 0, "rate": -1,
				"lastTimestamp": 0, "queueList": [{"topic": "T", "brokerName": "broker-a", "queueId": 0, "brokerOffset": %[1]d,
				"consumerOffset": 0, "lag": %[1]d, "rate": -1, "lastTimestamp": 0}]}`, groupPolls.Add(1))
			return
		}
		fmt.Fprint(w, `{"time": 1, "groups": [{"group": "G1", "system": false, "topics": ["T"], "lag": 1, "consumeTps": 0, "rate": -1,
			"lastTimestamp": 0}], "errors": {"broker-b": "no leader routed for broker-b (an election?): its queues are not counted"}}`)
	})
	api.HandleFunc("POST /api/raft/balance", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, `{"error": "some moves failed: broker: NO_PERMISSION (16): no permission", "moves": [{"brokerName": "broker-a", "from": "n0", "to": "n1", "reason": "preferredLeaderId",
			"result": "failed: broker: NO_PERMISSION (16): no permission"}]}`)
	})
	api.HandleFunc("GET /api/message", func(w http.ResponseWriter, _ *http.Request) {
		// A producer that sent nanoseconds as its born timestamp.
		fmt.Fprint(w, `{"messages": [{"topic": "T", "msgId": "M1", "offsetMsgId": "O1", "queueId": 0, "queueOffset": 5,
			"bornTimestamp": 1764608042000000000, "storeTimestamp": 1764608042000, "bornHost": "127.0.0.1:5000",
			"storeHost": "127.0.0.1:10911", "reconsumeTimes": 0, "body": "payload", "bodyEncoding": "text", "bodySize": 7}]}`)
	})
	mux := http.NewServeMux()
	mux.Handle("/api/", api)
	mux.Handle("/", con.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	b := newBrowser(t, bin)
	b.do("open the console", chromedp.Navigate(srv.URL+"/console/?refresh=250"))

	b.waitJS("the missing broker group above the lag table", `!document.getElementById("groups-errors").hidden &&
		document.getElementById("groups-errors").textContent.includes("broker-b")`)

	b.waitJS("the topic row", `!!document.querySelector('#topics tr[data-topic="Gone"]')`)
	if w := b.eval(`document.querySelector('#topics tr[data-topic="Gone"] td:last-child').textContent`); !strings.Contains(w, "2020") {
		t.Errorf("last write in January 2020 shown as %q, without its date", w)
	}
	b.click("select the deleted topic", `#topics tr[data-topic="Gone"]`)
	b.waitJS("the topic detail's error", `!document.getElementById("topic-detail-error").hidden &&
		document.getElementById("topic-detail-error").textContent.includes("no topic Gone")`)
	b.click("select the group", `#groups tr[data-consumer-group="G1"]`)
	b.waitJS("the group's queue", `document.querySelectorAll('#group-queues tbody tr').length === 1`)
	seen := b.eval(`document.querySelector('#group-queues td[data-field=lag]').textContent`)
	b.waitJS("the group's lag refreshed while the topic detail fails", fmt.Sprintf(
		`Number(document.querySelector('#group-queues td[data-field=lag]').textContent) > %s + 2`, seen))
	if s := b.eval(`document.getElementById("status").textContent`); s != "live" {
		t.Errorf("page status %q with fresh data and one failing detail, want live", s)
	}

	// Rows are kept across polls and changed in place: rebuilt on every
	// poll, a row lost a click pressed before a refresh and released
	// after it, and any text selected in it.
	const kept = `['#topics tr[data-topic="Gone"]', '#cluster tr[data-member="n0"]', '#cluster button[data-action=transfer]',
		'#groups tr[data-consumer-group="G1"]', '#group-queues tr[data-queue="T/broker-a/0"]']`
	b.do("mark the rows", chromedp.Evaluate[chromedp.Void](`for (const s of `+kept+`) document.querySelector(s).__kept = true;
		window.__polls0 = Number(document.body.dataset.polls);
		window.__lag0 = document.querySelector('#group-queues td[data-field=lag]').textContent`))
	b.waitJS("three more polls", `Number(document.body.dataset.polls) >= window.__polls0 + 3`)
	if k := b.eval(`[...` + kept + `].filter((s) => !document.querySelector(s).__kept).join(" ")`); k != "" {
		t.Errorf("rows replaced by a poll although they show the same thing: %s", k)
	}
	if now, before := b.eval(`document.querySelector('#group-queues td[data-field=lag]').textContent`), b.eval(`window.__lag0`); now == before {
		t.Errorf("the kept row's lag stayed %s over three polls", now)
	}
	b.shot("failures-01-details.png")

	b.click("balance leaders", `#balance`)
	b.waitJS("the balance outcome", `!document.getElementById("action-result").textContent.startsWith("balancing")`)
	if o, text := b.eval(`document.getElementById("action-result").dataset.outcome`), b.eval(`document.getElementById("action-result").textContent`); o != "failed" || !strings.Contains(text, "NO_PERMISSION") {
		t.Errorf("balance with a refused move shown as outcome %q: %q", o, text)
	}
	b.shot("failures-02-balance.png")

	b.do("look a message up", chromedp.SendKeys(`#lookup-topic`, "T"), chromedp.SendKeys(`#lookup-key`, "k"), chromedp.Click(`#lookup button`))
	b.waitJS("the lookup's outcome", `!document.getElementById("lookup-result").textContent.startsWith("looking up")`)
	if body := b.eval(`String(document.querySelector('#lookup-result dd[data-field=body]')?.textContent) + " / " + document.getElementById("lookup-result").textContent.slice(0, 200)`); !strings.HasPrefix(body, "payload / ") {
		t.Errorf("a message whose born timestamp is out of Date's range: %q, want it shown", body)
	}

	// Names are text, never markup.
	if n := b.eval(`String(document.querySelectorAll("img").length) + "/" + String(window.__xss) + "/" +
		String([...document.querySelectorAll("#topics tr[data-topic]")].some((r) => r.dataset.topic === ` + strconv.Quote(markup) + `))`); n != "0/undefined/true" {
		t.Errorf("a topic named with markup: images/__xss/row = %s, want 0/undefined/true", n)
	}
}
