package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/broker"
)

// dashboard is the part of a Grafana dashboard JSON the test reads.
type dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	Description   string  `json:"description"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// metricName matches raftmq series names in a PromQL expression.
var metricName = regexp.MustCompile(`\braftmq_[a-z0-9_]+`)

// knownMetric reports whether name is a family the broker exports, or a
// histogram's _bucket/_sum/_count series of one.
func knownMetric(name string) bool {
	if slices.Contains(broker.MetricNames, name) {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(broker.MetricNames, base) {
			return true
		}
	}
	return false
}

// TestGrafanaDashboard decodes deploy/grafana/raftmq-brokers.json strictly
// and checks every query: each names at least one raftmq metric, and each
// raftmq metric it names is one the broker exports (broker.MetricNames,
// checked against a live /metrics scrape by the broker's own test).
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("grafana/raftmq-brokers.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	var generic map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&generic); err != nil || dec.More() {
		t.Fatalf("trailing data after the dashboard object: %v", err)
	}
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 30 || !strings.Contains(d.Description, "docs/metrics.md") {
		t.Fatalf("title %q uid %q schemaVersion %d description %q", d.Title, d.UID, d.SchemaVersion, d.Description)
	}
	var exprs []string
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d repeats", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W < 1 || p.GridPos.W > 24 || p.GridPos.H < 1 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: bad gridPos %+v", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: want the ${datasource} variable and at least one query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			exprs = append(exprs, v.Definition)
		}
	}
	if len(exprs) < 15 {
		t.Fatalf("only %d queries", len(exprs))
	}
	used := map[string]bool{}
	for _, e := range exprs {
		names := metricName.FindAllString(e, -1)
		if len(names) == 0 {
			t.Errorf("query %q names no raftmq metric", e)
		}
		for _, n := range names {
			used[n] = true
			if !knownMetric(n) {
				t.Errorf("query %q: %s is not a metric the broker exports (broker.MetricNames)", e, n)
			}
		}
	}
	for _, want := range []string{"raftmq_broker_topic_put_messages_total", "raftmq_broker_group_get_messages_total",
		"raftmq_broker_consumer_lag_messages", "raftmq_broker_topic_put_bytes_total", "raftmq_broker_group_get_bytes_total"} {
		if !used[want] {
			t.Errorf("the dashboard does not chart %s", want)
		}
	}
}
