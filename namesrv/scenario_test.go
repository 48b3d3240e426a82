package namesrv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/wire"
)

// TestRouteScenarios drives RouteInfoManager from testdata/*.txt scripts in
// the etcd-io/raft datadriven style: a command line, "----", the expected
// output, a blank line. RAFTMQ_UPDATE_GOLDEN=1 rewrites the expectations.
//
// Commands:
//
//	register cluster= name= id= addr= [version=] [state=] [expiry=] topics=T:r:w:perm,...
//	                               (ok [master=], ignored, or refused: error)
//	unregister cluster= name= id= addr=
//	remove cluster= name= id=      (RemoveBroker, as gossip would)
//	heartbeat cluster= addr=
//	advance d=<duration>           (moves the injected clock)
//	scan                           (ScanNotActiveBrokers)
//	wipe name= | addperm name=
//	delete topic= [cluster=]
//	route topic=                   (PickupTopicRouteData)
//	clusters                       (ClusterInfo)
//	topics [cluster=]
func TestRouteScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScenario(t, f) })
	}
}

type scenarioCase struct {
	cmd, want string
}

func parseScenario(t *testing.T, path string) []scenarioCase {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []scenarioCase
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "----" {
			t.Fatalf("%s:%d: command %q not followed by ----", path, i+1, l)
		}
		c := scenarioCase{cmd: l}
		j := i + 2
		var want []string
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != ""; j++ {
			want = append(want, lines[j])
		}
		c.want = strings.Join(want, "\n")
		out = append(out, c)
		i = j
	}
	return out
}

func runScenario(t *testing.T, path string) {
	cases := parseScenario(t, path)
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	r := NewRouteInfoManager(120*time.Second, nil, WithClock(clk.now))
	channels := map[string]*fakeChannel{}
	var rewritten strings.Builder
	failed := false
	for _, c := range cases {
		got := execScenario(t, r, clk, channels, c.cmd)
		fmt.Fprintf(&rewritten, "%s\n----\n%s\n\n", c.cmd, got)
		if got != c.want {
			failed = true
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", path, c.cmd, got, c.want)
		}
	}
	if failed && os.Getenv("RAFTMQ_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(path, []byte(rewritten.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s", path)
	}
}

func scenarioArgs(t *testing.T, fields []string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			t.Fatalf("argument %q is not key=value", f)
		}
		m[k] = v
	}
	return m
}

func atoi64(t *testing.T, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	return n
}

func execScenario(t *testing.T, r *RouteInfoManager, clk *fakeClock, chans map[string]*fakeChannel, line string) string {
	fields := strings.Fields(line)
	a := scenarioArgs(t, fields[1:])
	switch fields[0] {
	case "register":
		w := topics(atoi64(t, orDefault(a["version"], "1")))
		w.DataVersion.StateVersion = atoi64(t, orDefault(a["state"], "0"))
		if a["topics"] != "" {
			for _, spec := range strings.Split(a["topics"], ",") {
				p := strings.Split(spec, ":")
				if len(p) != 4 {
					t.Fatalf("topic spec %q: want name:read:write:perm", spec)
				}
				w.TopicConfigTable[p[0]] = tc(p[0], int(atoi64(t, p[1])), int(atoi64(t, p[2])), int(atoi64(t, p[3])))
			}
		}
		ch := &fakeChannel{name: a["addr"]}
		chans[a["addr"]] = ch
		args := RegisterBrokerArgs{Cluster: a["cluster"], BrokerName: a["name"], BrokerID: atoi64(t, a["id"]),
			BrokerAddr: a["addr"], HAServerAddr: a["addr"], Topics: w, Channel: ch}
		if e := a["expiry"]; e != "" {
			d, err := time.ParseDuration(e)
			if err != nil {
				t.Fatal(err)
			}
			args.HeartbeatTimeout = d
		}
		res, err := r.RegisterBroker(args)
		if errors.Is(err, ErrRegistrationIgnored) {
			return "ignored"
		}
		if err != nil {
			return "refused: " + err.Error()
		}
		if res.MasterAddr != "" {
			return "ok master=" + res.MasterAddr
		}
		return "ok"
	case "unregister":
		r.UnregisterBrokers([]wire.UnregisterBrokerRequestHeader{{Cluster: a["cluster"], BrokerName: a["name"], BrokerID: atoi64(t, a["id"]), BrokerAddr: a["addr"]}})
		return "ok"
	case "remove":
		return strconv.FormatBool(r.RemoveBroker(a["cluster"], a["name"], atoi64(t, a["id"])))
	case "heartbeat":
		return strconv.FormatBool(r.UpdateBrokerInfoUpdateTimestamp(a["cluster"], a["addr"]))
	case "advance":
		d, err := time.ParseDuration(a["d"])
		if err != nil {
			t.Fatal(err)
		}
		clk.advance(d)
		return "ok"
	case "scan":
		var closed []string
		for _, ch := range r.ScanNotActiveBrokers() {
			_ = ch.Close()
			closed = append(closed, ch.(*fakeChannel).name)
		}
		sort.Strings(closed)
		return "expired: " + orDefault(strings.Join(closed, " "), "none")
	case "wipe":
		return strconv.Itoa(r.WipeWritePermOfBroker(a["name"]))
	case "addperm":
		return strconv.Itoa(r.AddWritePermOfBroker(a["name"]))
	case "delete":
		r.DeleteTopic(a["topic"], a["cluster"])
		return "ok"
	case "route":
		rd := r.PickupTopicRouteData(a["topic"])
		if rd == nil {
			return "TOPIC_NOT_EXIST"
		}
		var b strings.Builder
		for _, q := range rd.QueueDatas {
			fmt.Fprintf(&b, "queue %s r=%d w=%d perm=%d\n", q.BrokerName, q.ReadQueueNums, q.WriteQueueNums, q.Perm)
		}
		for _, bd := range rd.BrokerDatas {
			fmt.Fprintf(&b, "broker %s cluster=%s %s\n", bd.BrokerName, bd.Cluster, addrsString(bd.BrokerAddrs))
		}
		return strings.TrimSuffix(b.String(), "\n")
	case "clusters":
		ci := r.ClusterInfo()
		var b strings.Builder
		for _, cl := range sortedKeys(ci.ClusterAddrTable) {
			fmt.Fprintf(&b, "cluster %s: %s\n", cl, strings.Join(ci.ClusterAddrTable[cl], " "))
		}
		for _, name := range sortedKeys(ci.BrokerAddrTable) {
			fmt.Fprintf(&b, "broker %s %s\n", name, addrsString(ci.BrokerAddrTable[name].BrokerAddrs))
		}
		return orDefault(strings.TrimSuffix(b.String(), "\n"), "empty")
	case "topics":
		var ts []string
		if cl, ok := a["cluster"]; ok {
			ts = r.TopicsByCluster(cl)
		} else {
			ts = r.AllTopics()
		}
		return orDefault(strings.Join(ts, " "), "none")
	}
	t.Fatalf("unknown command %q", fields[0])
	return ""
}

func addrsString(m map[int64]string) string {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%d=%s", id, m[id])
	}
	return strings.Join(parts, " ")
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
