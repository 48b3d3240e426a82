package filter

import (
	"strconv"
	"testing"
	"time"
)

// benchExpr is a typical subscription: a property range and a tag exclusion.
const benchExpr = "a >= 5 AND TAGS <> 'TagB'"

// benchMessages mix matches, non-matches, missing properties and a
// non-number, so both implementations take every branch.
var benchMessages = []map[string]string{
	{"a": "7", "TAGS": "TagA", "KEYS": "k1", "UNIQ_KEY": "0A0B0C"},
	{"a": "3", "TAGS": "TagA", "KEYS": "k2", "UNIQ_KEY": "0A0B0D"},
	{"a": "9", "TAGS": "TagB", "KEYS": "k3", "UNIQ_KEY": "0A0B0E"},
	{"TAGS": "TagC", "KEYS": "k4", "UNIQ_KEY": "0A0B0F"},
	{"a": "12", "KEYS": "k5", "UNIQ_KEY": "0A0B10"},
	{"a": "x", "TAGS": "TagA", "KEYS": "k6", "UNIQ_KEY": "0A0B11"},
	{"a": "5", "TAGS": "TagD", "KEYS": "k7", "UNIQ_KEY": "0A0B12"},
	{"a": "40", "TAGS": "TagA", "KEYS": "k8", "UNIQ_KEY": "0A0B13"},
}

// handWritten is benchExpr as a Go programmer would write it: a read as
// an int32 (anything else filters the message out), a missing a or TAGS
// filters it out. On ASCII values that is RocketMQ's meaning too.
func handWritten(props func(string) (string, bool)) bool {
	a, ok := props("a")
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(a, 10, 32)
	if err != nil {
		return false
	}
	if n < 5 {
		return false
	}
	tags, ok := props("TAGS")
	return ok && tags != "TagB"
}

func TestHandWrittenAgrees(t *testing.T) {
	x, err := Compile(benchExpr)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range benchMessages {
		if got, want := x.Match(lookup(m)), handWritten(lookup(m)); got != want {
			t.Errorf("%v: Match = %v, hand-written = %v", m, got, want)
		}
	}
}

func BenchmarkCompile(b *testing.B) {
	for _, expr := range []string{
		benchExpr,
		"(region IN ('EU', 'US', 'APAC') AND price BETWEEN 10 AND 99.5) OR (vip = 'true' AND TAGS IS NOT NULL)",
	} {
		b.Run(strconv.Itoa(len(expr))+"B", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compile(expr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCacheHit(b *testing.B) {
	c := NewCache(1024)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Compile(benchExpr); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMatchVsGo runs the compiled expression and the hand-written
// predicate in alternating blocks over the same messages and property
// lookup, and reports both costs and their ratio, so machine load affects
// both alike.
func BenchmarkMatchVsGo(b *testing.B) {
	x, err := Compile(benchExpr)
	if err != nil {
		b.Fatal(err)
	}
	lookups := make([]func(string) (string, bool), len(benchMessages))
	for i, m := range benchMessages {
		lookups[i] = lookup(m)
	}
	const block = 1024
	var exprTime, goTime time.Duration
	matched := 0
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		n := min(block, b.N-done)
		start := time.Now()
		for i := range n {
			if x.Match(lookups[i%len(lookups)]) {
				matched++
			}
		}
		mid := time.Now()
		for i := range n {
			if handWritten(lookups[i%len(lookups)]) {
				matched--
			}
		}
		exprTime += mid.Sub(start)
		goTime += time.Since(mid)
	}
	b.StopTimer()
	if matched != 0 {
		b.Fatalf("the expression and the hand-written predicate disagree")
	}
	b.ReportMetric(float64(exprTime.Nanoseconds())/float64(b.N), "expr-ns/match")
	b.ReportMetric(float64(goTime.Nanoseconds())/float64(b.N), "go-ns/match")
	b.ReportMetric(float64(exprTime)/float64(goTime), "expr/go")
}
