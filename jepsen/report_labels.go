package jepsen

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// faultColors shade the windows of the nemeses report.go has no colour
// for (keyed by the name's first word, like report.go's).
var faultColors = map[string]color.NRGBA{
	"crash": {R: 200, G: 40, B: 40, A: 50}, "disk": {R: 160, G: 110, B: 40, A: 50},
	"net": {R: 40, G: 170, B: 170, A: 50}, "slow": {R: 230, G: 190, B: 40, A: 60},
	"bitflip": {R: 240, G: 60, B: 200, A: 50}, "rebuild": {R: 110, G: 60, B: 200, A: 50},
}

// Label geometry of the timeline's top panel (16 in wide at 96 dpi, about
// 1 050 pt of it data area): 7 pt text, about 0.6 em per character.
const (
	labelFontPt   = 7
	labelCharPt   = labelFontPt * 0.6
	plotDataPt    = 1050
	labelRowShare = 0.065 // of the y range per row
)

// addFaultLabels names every fault window (and its longest ack gap when
// ≥ 300 ms) at the window's start, one label per row slot: a label goes
// to the first row whose previous label ends before it starts, so faults
// close together stack downwards instead of printing over each other.
// The y range grows to make room for the rows used.
func addFaultLabels(top *plot.Plot, av []Availability, endS, maxThr float64) error {
	if endS <= 0 || len(av) == 0 {
		return nil
	}
	ps, rows := placeFaultLabels(av, endS)
	// The data sit below 1/1.15 of the range; the label rows above them.
	top.Y.Max = maxThr * (1.15 + labelRowShare*float64(rows)*1.15)
	var xys plotter.XYLabels
	for _, p := range ps {
		xys.XYs = append(xys.XYs, plotter.XY{X: p.x, Y: top.Y.Max * (0.985 - labelRowShare*float64(p.row))})
		xys.Labels = append(xys.Labels, p.txt)
	}
	labels, err := plotter.NewLabels(xys)
	if err != nil {
		return err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].Font.Size = vg.Points(labelFontPt)
	}
	top.Add(labels)
	return nil
}

// labelPlace is one fault label: its text, its x (seconds) and its row
// (0 = top).
type labelPlace struct {
	x   float64
	row int
	txt string
}

// placeFaultLabels assigns each window's label the first row where it does
// not overlap the previous label, and returns the labels and row count.
func placeFaultLabels(av []Availability, endS float64) ([]labelPlace, int) {
	secPerPt := endS / plotDataPt
	var rowsEnd []float64
	var ps []labelPlace
	for _, a := range av {
		txt := a.Window.Nemesis
		if a.MaxGapMs >= 300 {
			txt = fmt.Sprintf("%s %.0fms", txt, a.MaxGapMs)
		}
		x := a.Window.StartMs / 1000
		w := float64(len(txt)) * labelCharPt * secPerPt
		row := -1
		for r, end := range rowsEnd {
			if end < x {
				row = r
				break
			}
		}
		if row < 0 {
			row = len(rowsEnd)
			rowsEnd = append(rowsEnd, 0)
		}
		rowsEnd[row] = x + w + 2*labelCharPt*secPerPt
		ps = append(ps, labelPlace{x, row, txt})
	}
	return ps, len(rowsEnd)
}
