package jepsen

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// VerdictTable renders the verdict as plain text.
func VerdictTable(h History, v Verdict) string {
	var b strings.Builder
	verdict := "VALID"
	if !v.Valid {
		verdict = "INVALID"
	}
	fmt.Fprintf(&b, "raftmq jepsen — profile %s, seed %d, network mode %s\n", h.Profile, h.Seed, h.Mode)
	fmt.Fprintf(&b, "sends %d: ok %d, unknown %d; deliveries %d; final reads %d; faults %d\n\n",
		v.Sent, v.OK, v.Unknown, len(h.Deliveries), len(h.Reads), len(h.Faults))
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tVALUE\tRESULT")
	for _, c := range v.Checks {
		res := "pass"
		switch {
		case !c.OK && c.Required:
			res = "FAIL"
		case !c.Required:
			res = "info"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Value, res)
	}
	_ = tw.Flush()
	for _, c := range v.Checks {
		if len(c.Examples) > 0 {
			fmt.Fprintf(&b, "\n%s, e.g.:\n", c.Name)
			for _, e := range c.Examples {
				fmt.Fprintf(&b, "  %s\n", e)
			}
		}
	}
	if len(v.Availability) > 0 {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FAULT\tFROM s\tTO s\tLONGEST ACK GAP ms\tFIRST ACK AFTER INJECTION ms\tCONSUMED\tDISK-FULL REFUSALS\tDETAIL")
		for _, a := range v.Availability {
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.0f\t%.0f\t%d\t%d\t%s\n", a.Window.Nemesis, a.Window.StartMs/1000, a.Window.EndMs/1000, a.MaxGapMs, a.TimeToOKMs, a.Deliveries, a.DiskFullRefusals, a.Window.Detail)
		}
		_ = tw.Flush()
		b.WriteString(availabilitySummary(v.Availability))
	}
	if len(h.Notes) > 0 {
		b.WriteString("\nnotes:\n")
		for _, n := range h.Notes {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	fmt.Fprintf(&b, "\nVERDICT: %s\n", verdict)
	return b.String()
}

// availabilitySummary gives, per nemesis, the worst and median longest
// ack gap.
func availabilitySummary(av []Availability) string {
	gaps := map[string][]float64{}
	for _, a := range av {
		gaps[a.Window.Nemesis] = append(gaps[a.Window.Nemesis], a.MaxGapMs)
	}
	names := make([]string, 0, len(gaps))
	for n := range gaps {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("\nper nemesis: longest ack gap (median / max ms over its windows)\n")
	for _, n := range names {
		g := gaps[n]
		sort.Float64s(g)
		fmt.Fprintf(&b, "  %-18s n=%-3d median %6.0f  max %6.0f\n", n, len(g), g[len(g)/2], g[len(g)-1])
	}
	return b.String()
}

// WriteReport writes verdict.txt, history.json (history plus verdict) and
// timeline.png into dir.
func WriteReport(dir string, h History, v Verdict) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "verdict.txt"), []byte(VerdictTable(h, v)), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "history.json"))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	if err := enc.Encode(struct {
		History History `json:"history"`
		Verdict Verdict `json:"verdict"`
	}{h, v}); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return plotTimeline(filepath.Join(dir, "timeline.png"), h, v)
}

// plotTimeline draws throughput (acks/s per 500 ms bucket) and send
// latency (ok: blue, unknown: red) over time, fault windows shaded and
// the longest ack gap of each window marked in orange.
func plotTimeline(path string, h History, v Verdict) error {
	end := 0.0
	for _, o := range h.Ops {
		if o.CompleteMs > end {
			end = o.CompleteMs
		}
	}
	endS := end / 1000
	const bucket = 0.5
	nb := int(endS/bucket) + 1
	counts := make([]float64, nb)
	var okLat, unkLat plotter.XYs
	step := 1
	if len(h.Ops) > 20000 {
		step = len(h.Ops) / 20000
	}
	for i, o := range h.Ops {
		if o.Result == ResultOK {
			counts[int(o.CompleteMs/1000/bucket)]++
		}
		if i%step != 0 && o.Result == ResultOK {
			continue
		}
		pt := plotter.XY{X: o.CompleteMs / 1000, Y: o.CompleteMs - o.InvokeMs}
		if o.Result == ResultOK {
			okLat = append(okLat, pt)
		} else {
			unkLat = append(unkLat, pt)
		}
	}
	thr := make(plotter.XYs, nb)
	maxThr := 1.0
	for i, c := range counts {
		thr[i] = plotter.XY{X: float64(i) * bucket, Y: c / bucket}
		if thr[i].Y > maxThr {
			maxThr = thr[i].Y
		}
	}
	maxLat := 1.0
	for _, p := range append(append(plotter.XYs{}, okLat...), unkLat...) {
		if p.Y > maxLat {
			maxLat = p.Y
		}
	}

	top := plot.New()
	top.Title.Text = fmt.Sprintf("raftmq jepsen %s (seed %d, %s): acknowledged sends/s", h.Profile, h.Seed, h.Mode)
	top.X.Label.Text = "time (s)"
	top.Y.Label.Text = "acks/s"
	top.Y.Min, top.Y.Max = 0, maxThr*1.15
	top.X.Min, top.X.Max = 0, endS
	bottom := plot.New()
	bottom.Title.Text = "send latency (blue ok, red unknown/failed)"
	bottom.X.Label.Text = "time (s)"
	bottom.Y.Label.Text = "latency (ms)"
	bottom.Y.Min, bottom.Y.Max = 0, maxLat*1.1
	bottom.X.Min, bottom.X.Max = 0, endS

	colors := map[string]color.NRGBA{
		"kill": {R: 255, G: 80, B: 80, A: 50}, "pause": {R: 80, G: 80, B: 255, A: 50},
		"partition": {R: 60, G: 190, B: 60, A: 50}, "fsync": {R: 200, G: 120, B: 255, A: 50},
	}
	for k, c := range faultColors {
		colors[k] = c
	}
	for _, p := range []*plot.Plot{top, bottom} {
		ymax := p.Y.Max
		for _, a := range v.Availability {
			kind, _, _ := strings.Cut(a.Window.Nemesis, "-")
			col, ok := colors[kind]
			if !ok {
				col = color.NRGBA{R: 150, G: 150, B: 150, A: 50}
			}
			poly, err := plotter.NewPolygon(plotter.XYs{
				{X: a.Window.StartMs / 1000, Y: 0}, {X: a.Window.EndMs / 1000, Y: 0},
				{X: a.Window.EndMs / 1000, Y: ymax}, {X: a.Window.StartMs / 1000, Y: ymax},
			})
			if err != nil {
				return err
			}
			poly.Color = col
			poly.LineStyle.Width = 0
			p.Add(poly)
			if a.MaxGapMs > 0 {
				y := ymax * 0.95
				gap, err := plotter.NewLine(plotter.XYs{{X: a.GapFromMs / 1000, Y: y}, {X: (a.GapFromMs + a.MaxGapMs) / 1000, Y: y}})
				if err != nil {
					return err
				}
				gap.Color = color.RGBA{R: 255, G: 140, B: 0, A: 255}
				gap.Width = vg.Points(3)
				p.Add(gap)
			}
		}
	}
	if err := addFaultLabels(top, v.Availability, endS, maxThr); err != nil {
		return err
	}
	line, err := plotter.NewLine(thr)
	if err != nil {
		return err
	}
	line.Color = color.RGBA{A: 255}
	top.Add(line)
	if len(okLat) > 0 {
		s, err := plotter.NewScatter(okLat)
		if err != nil {
			return err
		}
		s.GlyphStyle.Radius = vg.Points(1)
		s.GlyphStyle.Shape = draw.CircleGlyph{}
		s.GlyphStyle.Color = color.RGBA{B: 200, A: 255}
		bottom.Add(s)
	}
	if len(unkLat) > 0 {
		s, err := plotter.NewScatter(unkLat)
		if err != nil {
			return err
		}
		s.GlyphStyle.Radius = vg.Points(1.5)
		s.GlyphStyle.Shape = draw.CrossGlyph{}
		s.GlyphStyle.Color = color.RGBA{R: 220, A: 255}
		bottom.Add(s)
	}

	const w, ht = 16 * vg.Inch, 9 * vg.Inch
	img := vgimgCanvas(w, ht)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(8)}
	dc := draw.New(img)
	top.Draw(tiles.At(dc, 0, 0))
	bottom.Draw(tiles.At(dc, 0, 1))
	return savePNG(img, path)
}
