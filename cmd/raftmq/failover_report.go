package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// killResult is one leader kill. Phase times are milliseconds from the
// kill instant; -1 means not seen within the phase timeout.
type killResult struct {
	N          int       `json:"n"`
	Killed     string    `json:"killed"`
	KilledAddr string    `json:"killedAddr"`
	PID        int       `json:"pid"`
	KilledAt   time.Time `json:"killedAt"`
	OldTerm    uint64    `json:"oldTerm"`
	NewLeader  string    `json:"newLeader"`
	NewTerm    uint64    `json:"newTerm"`
	// DetectMs: the name server's gossip gauge of live brokers dropped.
	DetectMs float64 `json:"detectMs"`
	// RouteDropMs: the killed address left the name server's route.
	RouteDropMs float64 `json:"routeDropMs"`
	// ElectMs: a survivor's RAFT_STATUS named a new leader, higher term.
	ElectMs float64 `json:"electMs"`
	// RouteUpdateMs: the route's brokerId 0 is another address.
	RouteUpdateMs float64 `json:"routeUpdateMs"`
	// FirstWriteMs: the producer's first ack from a broker other than the
	// killed one.
	FirstWriteMs float64 `json:"firstWriteMs"`
	// ConsumeMs: the push consumer has delivered, from every queue, a
	// message whose send started after the kill.
	ConsumeMs float64 `json:"consumeMs"`
}

// phaseStats is min/median/max of one phase over the kills that saw it.
type phaseStats struct {
	Phase  string  `json:"phase"`
	N      int     `json:"n"`
	Min    float64 `json:"minMs"`
	Median float64 `json:"medianMs"`
	Max    float64 `json:"maxMs"`
}

// failoverReport is the whole run.
type failoverReport struct {
	Dir        string       `json:"dir"`
	Senders    int          `json:"senders"`
	Kills      []killResult `json:"kills"`
	Summary    []phaseStats `json:"summary"`
	Acks       int64        `json:"acks"`
	SendErrors int64        `json:"sendErrors"`
}

// phases lists the phases in report order with their accessors.
var phases = []struct {
	name string
	get  func(*killResult) float64
}{
	{"detection (gossip)", func(k *killResult) float64 { return k.DetectMs }},
	{"route drop", func(k *killResult) float64 { return k.RouteDropMs }},
	{"election (raft)", func(k *killResult) float64 { return k.ElectMs }},
	{"route update (BID 0)", func(k *killResult) float64 { return k.RouteUpdateMs }},
	{"first write (SDK ack)", func(k *killResult) float64 { return k.FirstWriteMs }},
	{"consume resume (push)", func(k *killResult) float64 { return k.ConsumeMs }},
}

// summarize computes min/median/max per phase (median of an even count is
// the mean of the middle two).
func summarize(kills []killResult) []phaseStats {
	var out []phaseStats
	for _, ph := range phases {
		var v []float64
		for i := range kills {
			if x := ph.get(&kills[i]); x >= 0 {
				v = append(v, x)
			}
		}
		s := phaseStats{Phase: ph.name, N: len(v), Min: -1, Median: -1, Max: -1}
		if len(v) > 0 {
			slices.Sort(v)
			s.Min, s.Max = v[0], v[len(v)-1]
			s.Median = v[len(v)/2]
			if len(v)%2 == 0 {
				s.Median = (v[len(v)/2-1] + v[len(v)/2]) / 2
			}
		}
		out = append(out, s)
	}
	return out
}

// printFailover writes the report as tables or JSON.
func printFailover(w io.Writer, rep *failoverReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "#kill\t#killed\t#old term\t#new leader\t#new term\t#detect ms\t#route drop ms\t#elect ms\t#route update ms\t#first write ms\t#consume ms\t")
	for _, k := range rep.Kills {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", k.N, k.Killed, k.OldTerm, orDash(k.NewLeader), k.NewTerm,
			fmtMs(k.DetectMs), fmtMs(k.RouteDropMs), fmtMs(k.ElectMs), fmtMs(k.RouteUpdateMs), fmtMs(k.FirstWriteMs), fmtMs(k.ConsumeMs))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "#phase\t#n\t#min ms\t#median ms\t#max ms\t")
	for _, s := range rep.Summary {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t\n", s.Phase, s.N, fmtMs(s.Min), fmtMs(s.Median), fmtMs(s.Max))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d kills, %d acks, %d failed sends (%d synchronous senders); times are from the SIGKILL instant\n",
		len(rep.Kills), rep.Acks, rep.SendErrors, rep.Senders)
	return err
}

// fmtMs prints milliseconds with one decimal, "-" for not seen.
func fmtMs(v float64) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}
