// This file draws the run as a timeline (an SVG, with gonum.org/v1/plot):
// per second, each client's success rate and p99 latency, with the phases
// shaded and the breaker's transitions and the outlier ejections marked.

package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/meshless/meshless/circuitbreaker"
)

// maxSeconds bounds the timeline: calls that start later are not drawn.
const maxSeconds = 24 * 3600

// timeline records the run, per second since its origin. A nil *timeline
// records nothing. It is safe for concurrent use.
type timeline struct {
	origin time.Time
	mu     sync.Mutex
	byName map[string]*series
	names  []string // in the order first asked for
	spans  []span   // the phases
	marks  []mark
	counts map[string][]int // per name, events per second (the cluster scenario's requests to its dead dependency)
	cnames []string         // the names of counts, in the order first counted
}

// span is a phase on the timeline.
type span struct {
	From, To        time.Duration
	Scenario, Phase string
}

// mark is an event on the timeline.
type mark struct {
	At   time.Duration
	Kind string // one of markKinds
}

// The kinds of marks, as the legend names them.
const (
	markOpen     = "breaker opens"
	markHalfOpen = "breaker half-opens"
	markClosed   = "breaker closes"
	markEjected  = "pod ejected"
	markReturned = "pod returned"
	markRemote   = "breaker opens by another pod's open (cluster)"
)

var markKinds = []string{markOpen, markHalfOpen, markClosed, markEjected, markReturned, markRemote}

func newTimeline(origin time.Time) *timeline {
	return &timeline{origin: origin, byName: map[string]*series{}}
}

// since is the time from the timeline's origin to t.
func (t *timeline) since(at time.Time) time.Duration { return at.Sub(t.origin) }

// series returns the series of the client called name, made on first use.
func (t *timeline) series(name string) *series {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.byName[name]
	if !ok {
		s = &series{origin: t.origin}
		t.byName[name] = s
		t.names = append(t.names, name)
	}
	return s
}

// phases adds the phases of sched, which started at offset, under scenario.
func (t *timeline) phases(scenario string, offset time.Duration, sched schedule) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, p := range sched {
		if p.Duration > 0 {
			from := offset + sched.start(i)
			t.spans = append(t.spans, span{From: from, To: from + p.Duration, Scenario: scenario, Phase: p.Name})
		}
	}
}

// mark adds an event at at, since the origin.
func (t *timeline) mark(at time.Duration, kind string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.marks = append(t.marks, mark{At: at, Kind: kind})
}

// count counts one event of the series name at at (per second since the
// origin), drawn in a third plot: the requests that reached the cluster
// scenario's dead dependency.
func (t *timeline) count(name string, at time.Time) {
	if t == nil {
		return
	}
	i := int(at.Sub(t.origin) / time.Second)
	if i < 0 || i >= maxSeconds {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[string][]int{}
	}
	c, ok := t.counts[name]
	if !ok {
		t.cnames = append(t.cnames, name)
	}
	for len(c) <= i {
		c = append(c, 0)
	}
	c[i]++
	t.counts[name] = c
}

// countPoints returns name's counts per second, at the middle of each
// second, over the phase called name (zero where nothing was counted), or
// from its first to its last counted second without such a phase.
func (t *timeline) countPoints(name string) plotter.XYs {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.counts[name]
	from := slices.IndexFunc(c, func(n int) bool { return n > 0 })
	if from < 0 {
		return nil
	}
	to := len(c)
	for _, sp := range t.spans {
		if sp.Phase == name {
			from, to = int(sp.From/time.Second), int((sp.To+time.Second-1)/time.Second)
		}
	}
	var xys plotter.XYs
	for i := from; i < to; i++ {
		n := 0
		if i < len(c) {
			n = c[i]
		}
		xys = append(xys, plotter.XY{X: float64(i) + 0.5, Y: float64(n)})
	}
	return xys
}

// transitions marks the breaker's transitions of a run started at offset.
func (t *timeline) transitions(offset time.Duration, trs []transition) {
	for _, tr := range trs {
		kind := markClosed
		switch tr.To {
		case circuitbreaker.StateOpen, circuitbreaker.StateForcedOpen:
			kind = markOpen
		case circuitbreaker.StateHalfOpen:
			kind = markHalfOpen
		}
		t.mark(offset+tr.At, kind)
	}
}

// series is one client's calls, per second of their start. A nil *series
// records nothing.
type series struct {
	origin time.Time
	mu     sync.Mutex
	secs   []second
}

type second struct {
	calls, ok int
	lat       []time.Duration
}

// add records a call that started at start, took lat and succeeded or not.
func (s *series) add(start time.Time, lat time.Duration, ok bool) {
	if s == nil {
		return
	}
	i := int(start.Sub(s.origin) / time.Second)
	if i < 0 || i >= maxSeconds {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.secs) <= i {
		s.secs = append(s.secs, second{})
	}
	b := &s.secs[i]
	b.calls++
	if ok {
		b.ok++
	}
	b.lat = append(b.lat, lat)
}

// points returns, for each second with calls, its success rate in percent
// and its p99 latency in milliseconds, at the middle of the second.
func (s *series) points() (success, p99ms plotter.XYs) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range s.secs {
		if b.calls == 0 {
			continue
		}
		x := float64(i) + 0.5
		lat := slices.Clone(b.lat)
		slices.Sort(lat)
		success = append(success, plotter.XY{X: x, Y: 100 * float64(b.ok) / float64(b.calls)})
		p99ms = append(p99ms, plotter.XY{X: x, Y: float64(percentile(lat, 99)) / float64(time.Millisecond)})
	}
	return success, p99ms
}

// The colours of the picture.
var (
	clientColors = map[string]color.Color{
		"bare":     color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		"meshless": color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
		"alone":    color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		"cluster":  color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	}
	markColors = map[string]color.Color{
		markOpen:     color.RGBA{R: 0xe0, G: 0x40, B: 0x00, A: 0xff},
		markHalfOpen: color.RGBA{R: 0xe0, G: 0xa0, B: 0x00, A: 0xff},
		markClosed:   color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		markEjected:  color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
		markReturned: color.RGBA{R: 0x8c, G: 0x8c, B: 0x8c, A: 0xff},
		markRemote:   color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
	}
	shades = []color.Color{color.RGBA{R: 0xee, G: 0xee, B: 0xee, A: 0xff}, color.RGBA{R: 0xf8, G: 0xf8, B: 0xf8, A: 0xff}}
)

// The picture's size: 7 inches high, 9.5 with the third plot.
const timelineW, timelineH, timelineH3 = 11 * vg.Inch, 7 * vg.Inch, 9.5 * vg.Inch

// writeSVG draws the timeline as an SVG on w.
func (t *timeline) writeSVG(w io.Writer) error {
	h := timelineH
	t.mu.Lock()
	if len(t.cnames) > 0 {
		h = timelineH3
	}
	t.mu.Unlock()
	c := vgsvg.New(timelineW, h)
	if err := t.draw(draw.New(c)); err != nil {
		return err
	}
	_, err := c.WriteTo(w)
	return err
}

// draw draws the timeline on dc: success rate above, p99 latency below, on
// the same seconds.
func (t *timeline) draw(dc draw.Canvas) error {
	t.mu.Lock()
	spans, marks, names, cnames := slices.Clone(t.spans), slices.Clone(t.marks), slices.Clone(t.names), slices.Clone(t.cnames)
	var all []*series
	for _, n := range names {
		all = append(all, t.byName[n])
	}
	t.mu.Unlock()

	succ, lat, reach := plot.New(), plot.New(), plot.New()
	reach.Y.Label.Text = "requests to the dead dependency /s"
	reach.Y.Min = 0
	var reachLines []line2
	for _, n := range cnames {
		xys := t.countPoints(n)
		reachLines = append(reachLines, line2{n, "cluster scenario, " + n + ": requests that reached it", xys})
		for _, p := range xys {
			reach.Y.Max = max(reach.Y.Max, p.Y*1.6)
		}
	}
	reach.Y.Max = max(reach.Y.Max, 5)
	panels := []*plot.Plot{succ, lat}
	if len(cnames) > 0 {
		panels = append(panels, reach)
	}
	succ.Title.Text = "examples/chaos: each client's calls, per second of their start"
	succ.Y.Label.Text = "success (OK or NOT_FOUND), %"
	lat.Y.Label.Text = "p99 latency, ms"
	panels[len(panels)-1].X.Label.Text = "seconds since the start of the run"
	succ.Y.Min, succ.Y.Max = 0, 112
	lat.Y.Min = 0
	type line = line2
	var succLines, latLines []line
	for i, n := range names {
		s, l := all[i].points()
		succLines = append(succLines, line{n, n + " success", s})
		latLines = append(latLines, line{n, n + " p99", l})
		for _, p := range l {
			lat.Y.Max = max(lat.Y.Max, p.Y*1.3) // room for the legend
		}
	}
	lat.Y.Max = max(lat.Y.Max, 10)
	var xmax float64
	for _, sp := range spans {
		xmax = max(xmax, sp.To.Seconds())
	}
	for _, p := range panels {
		p.X.Min, p.X.Max = 0, max(xmax, 1)
		p.X.Tick.Marker = secondTicks{}
		p.Legend.Left = p != succ // the success plot's bottom right is the emptiest corner
		p.Legend.Top = p != succ
		p.Legend.TextStyle.Font.Size = vg.Points(8)
	}

	// Phases: shaded bands, named at the top of the success plot; a new
	// scenario starts with its name.
	var labels plotter.XYLabels
	for i, sp := range spans {
		for _, p := range panels {
			band, err := plotter.NewPolygon(plotter.XYs{
				{X: sp.From.Seconds(), Y: p.Y.Min}, {X: sp.To.Seconds(), Y: p.Y.Min},
				{X: sp.To.Seconds(), Y: p.Y.Max}, {X: sp.From.Seconds(), Y: p.Y.Max},
			})
			if err != nil {
				return err
			}
			band.Color, band.LineStyle.Width = shades[i%2], 0
			p.Add(band)
		}
		name := sp.Phase
		if i == 0 || spans[i-1].Scenario != sp.Scenario {
			name = sp.Scenario + ": " + name
		}
		labels.XYs = append(labels.XYs, plotter.XY{X: sp.From.Seconds() + 0.1, Y: []float64{109, 104}[i%2]})
		labels.Labels = append(labels.Labels, name)
	}
	if len(labels.XYs) > 0 {
		ls, err := plotter.NewLabels(labels)
		if err != nil {
			return err
		}
		for i := range ls.TextStyle {
			ls.TextStyle[i].Font.Size = vg.Points(7)
			ls.TextStyle[i].YAlign = draw.YCenter
		}
		succ.Add(ls)
	}

	// Marks: a vertical rule each, in both plots; a legend entry per kind.
	for _, kind := range markKinds {
		var at []time.Duration
		for _, m := range marks {
			if m.Kind == kind {
				at = append(at, m.At)
			}
		}
		for i, a := range at {
			for _, p := range panels {
				rule, err := plotter.NewLine(plotter.XYs{{X: a.Seconds(), Y: p.Y.Min}, {X: a.Seconds(), Y: p.Y.Max * 0.95}})
				if err != nil {
					return err
				}
				rule.Color, rule.Width, rule.Dashes = markColors[kind], vg.Points(0.8), []vg.Length{vg.Points(3), vg.Points(2)}
				p.Add(rule)
				if i == 0 && p == succ {
					p.Legend.Add(kind, rule)
				}
			}
		}
	}

	// The clients' lines, on top.
	for _, set := range []struct {
		p     *plot.Plot
		lines []line
	}{{succ, succLines}, {lat, latLines}, {reach, reachLines}} {
		for _, l := range set.lines {
			if len(l.xys) == 0 {
				continue
			}
			pl, err := plotter.NewLine(l.xys)
			if err != nil {
				return err
			}
			pl.Color, pl.Width = clientColors[l.client], vg.Points(1.5)
			if pl.Color == nil {
				pl.Color = color.Black
			}
			set.p.Add(pl)
			set.p.Legend.Add(l.name, pl)
		}
	}

	var plots [][]*plot.Plot
	for _, p := range panels {
		plots = append(plots, []*plot.Plot{p})
	}
	canvases := plot.Align(plots, draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Points(6), PadY: vg.Points(10), PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(10)}, dc)
	for j := range plots {
		plots[j][0].Draw(canvases[j][0])
	}
	return nil
}

// line2 is a line of a plot: its client (its colour), its legend, its points.
type line2 struct {
	client, name string
	xys          plotter.XYs
}

// secondTicks marks whole seconds, and labels every fifth mark.
type secondTicks struct{}

func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 1.0
	for (hi-lo)/step > 80 {
		step *= 2
	}
	var ts []plot.Tick
	for x := math.Ceil(lo/step) * step; x <= hi; x += step {
		t := plot.Tick{Value: x}
		if math.Mod(x, 5*step) == 0 {
			t.Label = strconv.FormatFloat(x, 'f', -1, 64) + "s"
		}
		ts = append(ts, t)
	}
	return ts
}

// saveSVG writes the timeline to the file at path.
func (t *timeline) saveSVG(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := t.writeSVG(f); err != nil {
		f.Close()
		return fmt.Errorf("drawing the timeline: %w", err)
	}
	return f.Close()
}
