// This file turns each scenario's track into its section of the picture:
// one function per scenario (sectionOf), each drawing the panels that show
// what meshless changed in that scenario. A new scenario adds its own.

package main

import (
	"fmt"
	"image/color"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// The states the strips draw.
const (
	stateClosed   = "closed"
	stateOpen     = "open"
	stateHalfOpen = "half-open"
	stateRemote   = "open by another pod's open"
	stateIn       = "in rotation"
	stateEjected  = "ejected"
)

// sectionOf builds a scenario's section from its track.
var sectionOf = map[string]func(snapshot) (section, error){
	"backend": backendSection,
	"pods":    podsSection,
	"cluster": clusterSection,
	"events":  eventsSection,
}

// sections are the timeline's sections, one per scenario that ran.
func (t *timeline) sections() ([]section, error) {
	var out []section
	for _, k := range t.all() {
		build, ok := sectionOf[k.scenario]
		if !ok {
			return nil, fmt.Errorf("no section for the scenario %q", k.scenario)
		}
		s, err := build(k.snapshot())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k.scenario, err)
		}
		s.scenario = k.scenario
		out = append(out, s)
	}
	return out, nil
}

// The heights of the panels' data areas.
const (
	lineH = vg.Length(52)
	rowH  = vg.Length(12) // a state strip's
)

// perBin names a track's bin: "second", or "100ms".
func perBin(bin time.Duration) string {
	if bin == time.Second {
		return "second"
	}
	return bin.String()
}

// backendSection shows the backend scenario: the calls each client's
// callers saw answered and their p99, the requests that reached each
// backend per call (meshless's win while the backend fails and hangs), and
// meshless's breaker.
func backendSection(s snapshot) (section, error) {
	bare, mesh := s.series["bare"].points(), s.series["meshless"].points()
	xmax, gap := s.length.Seconds(), 1.5*s.bin.Seconds()
	per := perBin(s.bin)
	title, bareLegend, answered := "backend: two clients, each calling its own backend, which gets overloaded, fails, hangs, then recovers",
		"bare: a gRPC deadline, nothing else", "calls answered (OK, or NOT_FOUND: the backend's business answer)"
	if s.transport == transportHTTP {
		title = "backend over HTTP: two clients, each with its own backend: overloaded, failing, hanging, recovered"
		bareLegend = "bare: net/http with a deadline, nothing else"
		answered = "calls answered (200, or 404: the backend's business answer)"
	}
	sec := section{
		title: title,
		legend: []legendItem{
			{bareLegend, lineThumb{colorBare}},
			{"meshless: client.yaml's breaker, retries, bulkhead, timeouts", lineThumb{colorMeshless}},
		},
		spans: s.spans, xmax: xmax,
		xlabel: "seconds since the scenario's start",
	}
	succ, err := linePanel(s.spans, xmax, 104, gap, []line{{bare.success, colorBare}, {mesh.success, colorMeshless}})
	if err != nil {
		return sec, err
	}
	lat, err := linePanel(s.spans, xmax, max(10, 1.12*maxY(bare.p99ms, mesh.p99ms)), gap, []line{{bare.p99ms, colorBare}, {mesh.p99ms, colorMeshless}})
	if err != nil {
		return sec, err
	}
	reqs, err := linePanel(s.spans, xmax, max(1.25, 1.12*maxY(bare.perCall, mesh.perCall)), gap, []line{{bare.perCall, colorBare}, {mesh.perCall, colorMeshless}})
	if err != nil {
		return sec, err
	}
	rows := s.rows
	if len(rows) == 0 {
		rows = []stateRow{{Name: "breaker", Initial: stateClosed}} // it never left closed
	}
	labels := rowNames(rows)
	if len(rows) == 1 {
		labels = []string{"breaker"}
	}
	cb, err := statePanel(rows, labels, xmax, map[string]color.Color{stateClosed: colorOK, stateOpen: colorOpen, stateHalfOpen: colorHalfOpen}, stateHalfOpen)
	if err != nil {
		return sec, err
	}
	sec.panels = []panel{
		{answered + ", % of the calls started in each " + per, succ, lineH, nil},
		{"p99 latency of those calls, ms", lat, lineH, nil},
		{"requests that reached the backend per call, retries included: bare sends each call, meshless stops sending to a backend that fails", reqs, lineH, nil},
		{"meshless's circuit breaker:", cb, rowH * vg.Length(len(rows)), []legendItem{
			{"closed", boxThumb{colorOK}}, {"open", boxThumb{colorOpen}}, {"half-open: a probe, a mark each", boxThumb{colorHalfOpen}},
		}},
	}
	return sec, nil
}

// podsSection shows the pods scenario: the calls answered and their p99,
// and which pods meshless's balancer had ejected.
func podsSection(s snapshot) (section, error) {
	bare, mesh := s.series["bare"].points(), s.series["meshless"].points()
	xmax, gap := s.length.Seconds(), 1.5*s.bin.Seconds()
	sec := section{
		title: "pods: both clients call four pods; one fails, then another is slow",
		legend: []legendItem{
			{"bare: round_robin", lineThumb{colorBare}},
			{"meshless: round_robin with outlier ejection (pods.yaml)", lineThumb{colorMeshless}},
		},
		spans: s.spans, xmax: xmax,
		xlabel: "seconds since the scenario's start",
	}
	succ, err := linePanel(s.spans, xmax, 104, gap, []line{{bare.success, colorBare}, {mesh.success, colorMeshless}})
	if err != nil {
		return sec, err
	}
	lat, err := linePanel(s.spans, xmax, max(10, 1.12*maxY(bare.p99ms, mesh.p99ms)), gap, []line{{bare.p99ms, colorBare}, {mesh.p99ms, colorMeshless}})
	if err != nil {
		return sec, err
	}
	sec.panels = []panel{
		{"calls answered (OK or NOT_FOUND), % of the calls started in each " + perBin(s.bin), succ, lineH, nil},
		{"p99 latency of those calls, ms", lat, lineH, nil},
	}
	if len(s.rows) > 0 {
		pods, err := statePanel(s.rows, rowNames(s.rows), xmax, map[string]color.Color{stateIn: colorOK, stateEjected: colorOpen}, "")
		if err != nil {
			return sec, err
		}
		sec.panels = append(sec.panels, panel{"each pod in meshless's balancer (bare's round_robin keeps them all):", pods, rowH * vg.Length(len(s.rows)), []legendItem{
			{"in rotation", boxThumb{colorOK}}, {"ejected", boxThumb{colorOpen}},
		}})
	}
	return sec, nil
}

// clusterSection shows the cluster scenario, both runs on the same clock:
// the requests that reached the dead dependency, in total, and each pod's
// breaker.
func clusterSection(s snapshot) (section, error) {
	xmax := s.length.Seconds()
	sec := section{
		title: "cluster: three client pods call a dead dependency at 3, 1 and 1 calls a second, alone, then in cluster mode",
		legend: []legendItem{
			{"alone: each pod's breaker decides on its own calls", lineThumb{colorAlone}},
			{"cluster mode: the pods share their breakers through Redis", lineThumb{colorCluster}},
		},
		xmax:   xmax,
		xlabel: "seconds since the run's start (each run lasts " + s.length.String() + ")",
	}
	var lines []line
	caption := "requests that reached the dead dependency, in total since the run's start:"
	for _, run := range []struct {
		name string
		c    color.Color
	}{{clusterRuns[modeAlone], colorAlone}, {clusterRuns[modeCluster], colorCluster}} {
		ts, ok := s.tallies[run.name]
		if !ok && !hasRun(s.rows, run.name) {
			continue // it did not run
		}
		lines = append(lines, line{cumulative(ts, xmax), run.c})
		caption += fmt.Sprintf(" %d %s,", len(ts), map[string]string{"alone": "alone", "cluster": "in cluster mode"}[run.name])
	}
	caption = caption[:len(caption)-1]
	ymax := 5.0
	for _, l := range lines {
		ymax = max(ymax, 1.15*maxY(l.xys))
	}
	reached, err := linePanel(nil, xmax, ymax, xmax, lines)
	if err != nil {
		return sec, err
	}
	sec.panels = []panel{{caption, reached, lineH + 10, nil}}
	if len(s.rows) > 0 {
		cb, err := statePanel(s.rows, rowNames(s.rows), xmax, map[string]color.Color{stateClosed: colorOK, stateOpen: colorOpen, stateRemote: colorRemote}, "")
		if err != nil {
			return sec, err
		}
		sec.panels = append(sec.panels, panel{"each pod's breaker, in each run:", cb, rowH * vg.Length(len(s.rows)), []legendItem{
			{"closed", boxThumb{colorOK}}, {"open", boxThumb{colorOpen}}, {"open by another pod's open, through Redis", boxThumb{colorRemote}},
		}})
	}
	return sec, nil
}

// clusterRow names pod's strip in run.
func clusterRow(run, pod string) string { return run + " " + pod }

func hasRun(rows []stateRow, run string) bool {
	for _, r := range rows {
		if len(r.Name) > len(run) && r.Name[:len(run)+1] == run+" " {
			return true
		}
	}
	return false
}

// cumulative is the count of ts (sorted) up to each moment, as a staircase
// from 0 to xmax: it ends where the run ends.
func cumulative(ts []time.Duration, xmax float64) plotter.XYs {
	xys := plotter.XYs{{X: 0, Y: 0}}
	for i, t := range ts {
		x := min(t.Seconds(), xmax)
		xys = append(xys, plotter.XY{X: x, Y: float64(i)}, plotter.XY{X: x, Y: float64(i + 1)})
	}
	return append(xys, plotter.XY{X: xmax, Y: float64(len(ts))})
}

// line is a client's line in a panel.
type line struct {
	xys plotter.XYs
	c   color.Color
}

func maxY(sets ...plotter.XYs) float64 {
	m := 0.0
	for _, s := range sets {
		for _, p := range s {
			m = max(m, p.Y)
		}
	}
	return m
}

// linePanel is a panel of lines from 0 to ymax, over the phases shaded.
// A line breaks where two points are further apart than gap.
func linePanel(spans []span, xmax, ymax, gap float64, lines []line) (*plot.Plot, error) {
	p := newPanelPlot()
	p.Y.Min, p.Y.Max = 0, ymax
	p.Y.Tick.Marker = valueTicks{}
	for i, sp := range spans {
		band, err := plotter.NewPolygon(plotter.XYs{
			{X: sp.From.Seconds(), Y: 0}, {X: min(sp.To.Seconds(), xmax), Y: 0},
			{X: min(sp.To.Seconds(), xmax), Y: ymax}, {X: sp.From.Seconds(), Y: ymax},
		})
		if err != nil {
			return nil, err
		}
		band.Color, band.LineStyle.Width = panelShades[i%2], 0
		p.Add(band)
	}
	for _, l := range lines {
		ps, err := linesOf(l.xys, gap, l.c)
		if err != nil {
			return nil, err
		}
		p.Add(ps...)
	}
	return p, nil
}

// rowNames are the rows' names, each cut to 18 characters.
func rowNames(rows []stateRow) []string {
	var out []string
	for _, r := range rows {
		n := []rune(r.Name)
		if len(n) > 18 {
			n = append(n[:17], '…')
		}
		out = append(out, string(n))
	}
	return out
}

// statePanel draws each row as a strip coloured by its state over time,
// the first row at the top, and a mark across the strip at each change to
// the state marked (one too short to show as a colour: a probe).
func statePanel(rows []stateRow, labels []string, xmax float64, colors map[string]color.Color, marked string) (*plot.Plot, error) {
	p := newPanelPlot()
	n := len(rows)
	p.Y.Min, p.Y.Max = 0, float64(n)
	p.Y.Tick.Length, p.Y.LineStyle.Width = 0, 0
	// Room for the names drawn in a wider fallback font, which start where
	// the plot's font would end them.
	var widest vg.Length
	for _, l := range labels {
		widest = max(widest, p.Y.Tick.Label.Width(l))
	}
	p.Y.Padding = 3 + vg.Length(fallbackWiden-1)*widest
	var ticks []plot.Tick
	var marks []plot.Plotter
	colorOf := func(state string) color.Color {
		if c, ok := colors[state]; ok {
			return c
		}
		return color.Gray{Y: 0xa0}
	}
	for i, r := range rows {
		y0 := float64(n - 1 - i)
		ticks = append(ticks, plot.Tick{Value: y0 + 0.5, Label: labels[i]})
		at, state := 0.0, r.Initial
		for _, ch := range append(r.Changes, change{At: time.Duration(xmax * float64(time.Second))}) {
			to := max(0, min(ch.At.Seconds(), xmax))
			if to > at {
				strip, err := plotter.NewPolygon(plotter.XYs{{X: at, Y: y0 + 0.12}, {X: to, Y: y0 + 0.12}, {X: to, Y: y0 + 0.88}, {X: at, Y: y0 + 0.88}})
				if err != nil {
					return nil, err
				}
				strip.Color, strip.LineStyle.Width = colorOf(state), 0
				p.Add(strip)
			}
			if ch.State == marked && marked != "" && to < xmax {
				m, err := plotter.NewLine(plotter.XYs{{X: to, Y: y0 + 0.02}, {X: to, Y: y0 + 0.98}})
				if err != nil {
					return nil, err
				}
				m.Color, m.Width = colorOf(marked), vg.Points(1.3)
				marks = append(marks, m)
			}
			at, state = max(at, to), ch.State
		}
	}
	p.Add(marks...)
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	return p, nil
}

// eventsSection shows the events scenario: the events each backend
// handled against those published, meshless's dead-letter queue filling
// and draining, the requests that reached each backend, and meshless's
// breaker.
func eventsSection(s snapshot) (section, error) {
	xmax := s.length.Seconds()
	sec := section{
		title: "events: a consumer's events, each a gRPC call to a backend that fails, then recovers",
		legend: []legendItem{
			{"bare: redelivered at once when its call fails, then given up", lineThumb{colorBare}},
			{"meshless: kept in a dead-letter queue (a local file), replayed once the breaker closes (events.yaml)", lineThumb{colorMeshless}},
			{"every event published", lineThumb{colorPublished}},
		},
		spans: s.spans, xmax: xmax,
		xlabel: "seconds since the scenario's start",
	}
	var panels []panel
	for _, build := range []func(snapshot) (panel, error){eventsHandledPanel, eventsWaitingPanel, eventsRequestsPanel, eventsBreakerPanel} {
		p, err := build(s)
		if err != nil {
			return sec, err
		}
		panels = append(panels, p)
	}
	sec.panels = panels
	return sec, nil
}

// eventsHandledPanel: the events each backend handled, each once, in total
// since the start, under the events published.
func eventsHandledPanel(s snapshot) (panel, error) {
	xmax := s.length.Seconds()
	pub := countsOver(s.tallies[tallyPublished], xmax)
	bare, mesh := countsOver(s.tallies[tallyHandled("bare")], xmax), countsOver(s.tallies[tallyHandled("meshless")], xmax)
	p, err := linePanel(s.spans, xmax, max(10, 1.08*maxY(pub, bare, mesh)), xmax,
		[]line{{pub, colorPublished}, {bare, colorBare}, {mesh, colorMeshless}})
	return panel{"events the backend handled, each counted once, in total since the start: bare's line falls behind for good, meshless's catches up", p, lineH + 10, nil}, err
}

// eventsWaitingPanel: the events waiting in meshless's dead-letter queue.
func eventsWaitingPanel(s snapshot) (panel, error) {
	xmax := s.length.Seconds()
	in, out := countsOver(s.tallies[tallyDeferred], xmax), countsOver(s.tallies[tallyResolved], xmax)
	waiting := make(plotter.XYs, len(in))
	for i := range in {
		waiting[i] = plotter.XY{X: in[i].X, Y: in[i].Y - out[i].Y}
	}
	p, err := linePanel(s.spans, xmax, max(10, 1.12*maxY(waiting)), xmax, []line{{waiting, colorMeshless}})
	peak := peakWaiting(s.tallies[tallyDeferred], s.tallies[tallyResolved])
	caption := fmt.Sprintf("events waiting in meshless's dead-letter queue (at most %d): kept while the backend fails, replayed after the breaker closes", peak)
	if len(s.tallies[tallyStuck]) > 0 {
		caption = fmt.Sprintf("events waiting in meshless's dead-letter queue (at most %d), replayed after the breaker closes; flat behind a failing replay", peak)
	}
	return panel{caption, p, lineH, nil}, err
}

// eventsRequestsPanel: the requests that reached each backend, per second,
// over bins of a fiftieth of the run or so: a redelivery storm starts and
// ends at once.
func eventsRequestsPanel(s snapshot) (panel, error) {
	xmax := s.length.Seconds()
	bin := binFor(s.length / 5)
	bare, mesh := perSecond(s.tallies[tallyRequests("bare")], bin, xmax), perSecond(s.tallies[tallyRequests("meshless")], bin, xmax)
	p, err := linePanel(s.spans, xmax, max(10, 1.12*maxY(bare, mesh)), xmax, []line{{bare, colorBare}, {mesh, colorMeshless}})
	return panel{"requests that reached the backend, per second: bare's broker redelivers each failed event at once; meshless's breaker stops them", p, lineH, nil}, err
}

// eventsBreakerPanel: meshless's breaker, as a strip.
func eventsBreakerPanel(s snapshot) (panel, error) {
	rows := s.rows
	if len(rows) == 0 {
		rows = []stateRow{{Name: "breaker", Initial: stateClosed}}
	}
	labels := rowNames(rows)
	if len(rows) == 1 {
		labels = []string{"breaker"}
	}
	p, err := statePanel(rows, labels, s.length.Seconds(), map[string]color.Color{stateClosed: colorOK, stateOpen: colorOpen, stateHalfOpen: colorHalfOpen}, stateHalfOpen)
	return panel{"meshless's circuit breaker:", p, rowH * vg.Length(len(rows)), []legendItem{
		{"closed", boxThumb{colorOK}}, {"open", boxThumb{colorOpen}}, {"half-open: a probe, a mark each", boxThumb{colorHalfOpen}},
	}}, err
}

// peakWaiting is the most entries in and not yet out at any moment, from
// the sorted times they went in and out (an entry goes out after it went
// in).
func peakWaiting(in, out []time.Duration) int {
	peak, j := 0, 0
	for i, t := range in {
		for j < len(out) && out[j] < t {
			j++
		}
		peak = max(peak, i+1-j)
	}
	return peak
}

// countsOver is how many of ts (sorted) happened up to each of 400 moments
// from 0 to xmax: a cumulative count, drawn as a line.
func countsOver(ts []time.Duration, xmax float64) plotter.XYs {
	const n = 400
	xys := make(plotter.XYs, n+1)
	for i := range xys {
		x := xmax * float64(i) / n
		j, _ := slices.BinarySearch(ts, time.Duration(x*float64(time.Second))+1)
		xys[i] = plotter.XY{X: x, Y: float64(j)}
	}
	return xys
}

// perSecond is ts (sorted) counted per bin, as a rate per second, at each
// bin's middle, from 0 to xmax.
func perSecond(ts []time.Duration, bin time.Duration, xmax float64) plotter.XYs {
	n := int(xmax / bin.Seconds())
	if n < 1 {
		n = 1
	}
	counts := make([]int, n)
	for _, t := range ts {
		if i := int(t / bin); i >= 0 && i < n {
			counts[i]++
		}
	}
	xys := make(plotter.XYs, n)
	for i, c := range counts {
		xys[i] = plotter.XY{X: (time.Duration(i)*bin + bin/2).Seconds(), Y: float64(c) / bin.Seconds()}
	}
	return xys
}
