// This file lays the timeline out and writes it as SVG: one section per
// scenario, stacked, each with its title, its legend, its phases named in a
// strip and its panels, every panel with a caption above it; the data
// areas of every panel share their left and right edges. No text is drawn
// over data: legends, captions and phase names have rows of their own.

package main

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// section is one scenario's part of the picture.
type section struct {
	scenario string
	title    string
	legend   []legendItem
	spans    []span  // named in a strip above the first panel
	xmax     float64 // seconds: every panel's x axis runs from 0 to xmax
	xlabel   string  // under the last panel
	panels   []panel
}

// panel is one plot of a section, under its caption and, on the same row,
// its own legend (a state strip's states).
type panel struct {
	caption string
	plot    *plot.Plot
	height  vg.Length // of its data area
	legend  []legendItem
}

// legendItem is an entry of a section's legend: a sample and a name.
type legendItem struct {
	name  string
	thumb plot.Thumbnailer
}

// The picture's measures, in points but the width.
const (
	pictureW    = 9 * vg.Inch
	margin      = vg.Length(10)
	sectionGap  = vg.Length(18)
	stripH      = vg.Length(15)
	panelGap    = vg.Length(5)
	labelPad    = vg.Length(3) // a phase name's room on each side, inside its band
	legendThumb = vg.Length(18)
	legendGap   = vg.Length(14)
)

// fallbackWiden is how much wider a text may run in a viewer without the
// SVG's font (Liberation Sans, or Arial, Helvetica, both of the same
// widths): DejaVu Sans, a common substitute, is about 15 % wider. A phase
// name is drawn only if it fits its band that much wider.
const fallbackWiden = 1.15

// Text styles: Liberation Sans, which the plot library embeds for its
// measurements.
func sans(size vg.Length) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: size}
}

func textStyle(size vg.Length) text.Style {
	return text.Style{Font: sans(size), Handler: plot.DefaultTextHandler, Color: color.Black}
}

var (
	titleStyle   = func() text.Style { s := textStyle(11); s.Font.Weight = 3; return s }() // golang.org/x/image/font.WeightBold
	legendStyle  = textStyle(9)
	captionStyle = func() text.Style { s := textStyle(8.5); s.Color = color.Gray{Y: 0x30}; return s }()
	phaseStyle   = textStyle(8.5)
)

// Colours: one per client, the same in every section; one per state.
var (
	colorBare      = color.RGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xff}
	colorMeshless  = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colorAlone     = color.RGBA{R: 0xe6, G: 0x55, B: 0x0d, A: 0xff}
	colorCluster   = color.RGBA{R: 0x75, G: 0x6b, B: 0xb1, A: 0xff}
	colorOK        = color.RGBA{R: 0xc7, G: 0xe9, B: 0xc0, A: 0xff} // closed, in rotation
	colorOpen      = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff} // open, ejected
	colorHalfOpen  = color.RGBA{R: 0xf5, G: 0xa6, B: 0x23, A: 0xff}
	colorRemote    = colorCluster                                   // open by another pod's open, through the cluster
	colorPublished = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff} // every event published
	stripShades    = []color.Color{color.RGBA{R: 0xe4, G: 0xe4, B: 0xe4, A: 0xff}, color.RGBA{R: 0xf2, G: 0xf2, B: 0xf2, A: 0xff}}
	panelShades    = []color.Color{color.RGBA{R: 0xf0, G: 0xf0, B: 0xf0, A: 0xff}, color.RGBA{R: 0xfa, G: 0xfa, B: 0xfa, A: 0xff}}
)

// layout is where everything went, for the tests.
type layout struct {
	sections []sectionLayout
}

type sectionLayout struct {
	scenario string
	panels   []panelLayout
	phases   []phaseLayout
}

type panelLayout struct {
	caption string
	data    vg.Rectangle // the panel's data area, as the plot library measures it
}

type phaseLayout struct {
	phase, label string // label "" when no name fits the band
	band         vg.Rectangle
}

// offsets are the room a plot takes around its data area.
type offsets struct{ left, right, bottom, top vg.Length }

func offsetsOf(p *plot.Plot) offsets {
	const trial = 1000
	c := draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: pictureW, Y: trial}}}
	d := p.DataCanvas(c)
	return offsets{left: d.Min.X, right: pictureW - d.Max.X, bottom: d.Min.Y, top: trial - d.Max.Y}
}

// placement is the picture laid out, from the top down: what draw draws.
type placement struct {
	h           vg.Length
	left, right vg.Length // every data area's edges
	items       []placed
}

// placed is a section's element at depth (from the top of the picture).
type placed struct {
	kind   int // one of the place* constants
	sec    int
	panel  int
	depth  vg.Length
	height vg.Length
	text   string
	x      vg.Length // a caption's or a legend item's start
	item   legendItem
}

const (
	placeTitle = iota
	placeLegend
	placeCaption
	placeStrip
	placePanel
)

// place lays the sections out down the picture.
func place(secs []section) placement {
	pl := placement{}
	offs := make([][]offsets, len(secs))
	var left, right vg.Length
	for i, s := range secs {
		for j, p := range s.panels {
			styleAxes(p.plot, s.xmax, j == len(s.panels)-1, s.xlabel)
			o := offsetsOf(p.plot)
			offs[i] = append(offs[i], o)
			left, right = max(left, o.left), max(right, o.right)
		}
	}
	pl.left, pl.right = margin+left, pictureW-margin-right
	depth := margin
	for i, s := range secs {
		if i > 0 {
			depth += sectionGap
		}
		th := titleStyle.Height(s.title)
		pl.items = append(pl.items, placed{kind: placeTitle, sec: i, depth: depth, height: th, text: s.title})
		depth += th + 4
		depth = flow(&pl, i, -1, depth, "", s.legend)
		for j, p := range s.panels {
			depth = flow(&pl, i, j, depth, p.caption, p.legend)
			if j == 0 && len(s.spans) > 0 {
				pl.items = append(pl.items, placed{kind: placeStrip, sec: i, depth: depth, height: stripH})
				depth += stripH + 1
			}
			o := offs[i][j]
			h := o.top + p.height + o.bottom
			pl.items = append(pl.items, placed{kind: placePanel, sec: i, panel: j, depth: depth, height: h})
			depth += h + panelGap
		}
	}
	pl.h = depth + margin
	return pl
}

// flow places a caption (if any) then legend items left to right from the
// picture's margin, onto a new row when one is full, from depth down; it
// returns the depth under them. Widths are reserved for a fallback font.
func flow(pl *placement, sec, panel int, depth vg.Length, caption string, items []legendItem) vg.Length {
	if caption == "" && len(items) == 0 {
		return depth
	}
	h := max(legendStyle.Height("Mg"), captionStyle.Height("Mg"))
	x := margin
	if caption != "" {
		pl.items = append(pl.items, placed{kind: placeCaption, sec: sec, panel: panel, depth: depth, height: h, x: x, text: caption})
		x += fallbackWiden*captionStyle.Width(caption) + legendGap
	}
	for _, it := range items {
		w := legendThumb + 4 + fallbackWiden*legendStyle.Width(it.name)
		if x > margin && x+w > pictureW-margin {
			x, depth = margin, depth+h+2
		}
		pl.items = append(pl.items, placed{kind: placeLegend, sec: sec, panel: panel, depth: depth, height: h, x: x, item: it})
		x += w + legendGap
	}
	return depth + h + 3
}

// styleAxes sets p's x axis: 0 to xmax, labelled on the last panel of a
// section only.
func styleAxes(p *plot.Plot, xmax float64, last bool, xlabel string) {
	p.X.Min, p.X.Max = 0, max(xmax, 1e-3)
	ticks := secondTicks{}
	p.X.Tick.Marker = ticks
	if last {
		p.X.Label.Text = xlabel
	} else {
		p.X.Tick.Marker = unlabelled{ticks}
		p.X.Label.Text = ""
	}
	p.X.Label.Padding = 2
}

// drawSections draws the sections on dc, pictureW wide and place(secs).h
// high, and returns where everything went.
func drawSections(dc draw.Canvas, secs []section) layout {
	pl := place(secs)
	var out layout
	top := dc.Max.Y
	for _, s := range secs {
		out.sections = append(out.sections, sectionLayout{scenario: s.scenario})
	}
	dataOf := map[[2]int]vg.Rectangle{}
	// Panels first: the strip and the legend need their data areas.
	for _, it := range pl.items {
		if it.kind != placePanel {
			continue
		}
		s := secs[it.sec]
		p := s.panels[it.panel].plot
		o := offsetsOf(p)
		c := draw.Crop(dc, 0, 0, 0, 0)
		c.Min.X, c.Max.X = pl.left-o.left, pl.right+o.right
		c.Max.Y = top - it.depth
		c.Min.Y = c.Max.Y - it.height
		p.Draw(c)
		d := p.DataCanvas(c).Rectangle
		dataOf[[2]int{it.sec, it.panel}] = d
		out.sections[it.sec].panels = append(out.sections[it.sec].panels, panelLayout{caption: s.panels[it.panel].caption, data: d})
	}
	for _, it := range pl.items {
		s := secs[it.sec]
		y := top - it.depth
		switch it.kind {
		case placeTitle:
			fillText(dc, titleStyle, draw.XLeft, vg.Point{X: margin, Y: y}, it.text)
		case placeCaption:
			fillText(dc, captionStyle, draw.XLeft, vg.Point{X: it.x, Y: y}, it.text)
		case placeLegend:
			thumb := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
				Min: vg.Point{X: it.x, Y: y - it.height + 1}, Max: vg.Point{X: it.x + legendThumb, Y: y - 1}}}
			it.item.thumb.Thumbnail(&thumb)
			fillText(dc, legendStyle, draw.XLeft, vg.Point{X: it.x + legendThumb + 4, Y: y}, it.item.name)
		case placeStrip:
			d := dataOf[[2]int{it.sec, 0}]
			out.sections[it.sec].phases = drawStrip(dc, s, vg.Rectangle{Min: vg.Point{X: d.Min.X, Y: y - it.height}, Max: vg.Point{X: d.Max.X, Y: y}})
		}
	}
	return out
}

// fillText draws txt with its top at pt.Y, aligned on pt.X as xalign says.
func fillText(dc draw.Canvas, sty text.Style, xalign text.XAlignment, pt vg.Point, txt string) {
	sty.XAlign, sty.YAlign = xalign, draw.YTop
	dc.FillText(sty, pt, txt)
}

// drawStrip shades the phases of s in r, the width of the data areas, each
// named by the longest of its names that fits it.
func drawStrip(dc draw.Canvas, s section, r vg.Rectangle) []phaseLayout {
	xmax := max(s.xmax, 1e-3)
	x := func(sec float64) vg.Length {
		return r.Min.X + (r.Max.X-r.Min.X)*vg.Length(max(0, min(sec, xmax))/xmax)
	}
	var out []phaseLayout
	for i, sp := range s.spans {
		band := vg.Rectangle{Min: vg.Point{X: x(sp.From.Seconds()), Y: r.Min.Y}, Max: vg.Point{X: x(sp.To.Seconds()), Y: r.Max.Y}}
		dc.SetColor(stripShades[i%2])
		dc.Fill(band.Path())
		label := fitting(band.Max.X-band.Min.X-2*labelPad, phaseNames(sp))
		if label != "" {
			sty := phaseStyle
			sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
			dc.FillText(sty, vg.Point{X: (band.Min.X + band.Max.X) / 2, Y: (band.Min.Y + band.Max.Y) / 2}, label)
		}
		out = append(out, phaseLayout{phase: sp.Phase, label: label, band: band})
	}
	return out
}

// phaseNames are a phase's names, longest first: what it is, its name, its
// name cut short.
func phaseNames(sp span) []string {
	var names []string
	if sp.About != "" {
		names = append(names, sp.About)
	}
	names = append(names, sp.Phase)
	for n := len([]rune(sp.Phase)) - 1; n >= 3; n-- {
		names = append(names, string([]rune(sp.Phase)[:n])+"…")
	}
	return names
}

// fitting is the first of names whose width, widened for a fallback font,
// fits in w; "" if none does.
func fitting(w vg.Length, names []string) string {
	for _, n := range names {
		if fallbackWiden*phaseStyle.Width(n) <= w {
			return n
		}
	}
	return ""
}

// secondTicks labels round numbers of seconds, at most 16 along the axis,
// with an unlabelled tick between each two.
type secondTicks struct{}

func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 0.001
	for _, s := range []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 43200, 86400} {
		step = s
		if (hi-lo)/s <= 16 {
			break
		}
	}
	var ts []plot.Tick
	for k := math.Ceil(lo / step * 2); k/2*step <= hi+1e-9; k++ {
		v := k / 2 * step
		t := plot.Tick{Value: v}
		if math.Mod(k, 2) == 0 {
			t.Label = strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64) + "s"
		}
		ts = append(ts, t)
	}
	return ts
}

// unlabelled is a ticker's ticks without their labels: the x axis of a
// panel that another one under it labels.
type unlabelled struct{ plot.Ticker }

func (u unlabelled) Ticks(lo, hi float64) []plot.Tick {
	ts := u.Ticker.Ticks(lo, hi)
	for i := range ts {
		ts[i].Label = ""
	}
	return ts
}

// valueTicks labels 0 and round values up to hi, at most 4 of them.
type valueTicks struct{}

func (valueTicks) Ticks(_, hi float64) []plot.Tick {
	step := niceStep(hi, 3.2)
	var ts []plot.Tick
	for k := 0.0; k*step <= hi+1e-9; k++ {
		v := k * step
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)})
	}
	return ts
}

// niceStep is the smallest of 1, 2, 2.5 and 5 times a power of ten that
// divides hi into n steps or fewer.
func niceStep(hi, n float64) float64 {
	for e := 1e-3; e <= 1e9; e *= 10 {
		for _, m := range []float64{1, 2, 2.5, 5} {
			if hi/(m*e) <= n {
				return m * e
			}
		}
	}
	return 1e10
}

// A lineThumb is a line's sample in a legend; a boxThumb a state's.
type lineThumb struct{ c color.Color }

func (l lineThumb) Thumbnail(c *draw.Canvas) {
	y := (c.Min.Y + c.Max.Y) / 2
	c.StrokeLine2(draw.LineStyle{Color: l.c, Width: vg.Points(2)}, c.Min.X, y, c.Max.X, y)
}

type boxThumb struct{ c color.Color }

func (b boxThumb) Thumbnail(c *draw.Canvas) {
	c.SetColor(b.c)
	c.Fill(c.Rectangle.Path())
}

// newPanelPlot is an empty plot in the picture's style.
func newPanelPlot() *plot.Plot {
	p := plot.New()
	p.X.Tick.Label.Font, p.Y.Tick.Label.Font = sans(8), sans(8)
	p.X.Label.TextStyle.Font, p.Y.Label.TextStyle.Font = sans(9), sans(9)
	return p
}

// errNoSections is writeSVG's error when no scenario ran.
var errNoSections = fmt.Errorf("no scenario ran: nothing to draw")

// writeSVG draws the sections as an SVG on w. The SVG names Liberation
// Sans, then Arial and Helvetica (the same widths), then any sans-serif.
func writeSVG(w io.Writer, secs []section) error {
	if len(secs) == 0 {
		return errNoSections
	}
	pl := place(secs)
	c := vgsvg.New(pictureW, pl.h)
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	drawSections(dc, secs)
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return err
	}
	out := strings.ReplaceAll(buf.String(), "font-family:Liberation Sans;", "font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")
	_, err := io.WriteString(w, out)
	return err
}

// saveSVG draws the timeline to the file at path.
func (t *timeline) saveSVG(path string) error {
	secs, err := t.sections()
	if err != nil {
		return fmt.Errorf("drawing the timeline: %w", err)
	}
	var buf bytes.Buffer
	if err := writeSVG(&buf, secs); err != nil {
		return fmt.Errorf("drawing the timeline: %w", err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// linesOf is a line of a panel, broken where points are further apart than
// gap (a bin without calls), so that no value is drawn where none was
// measured.
func linesOf(xys plotter.XYs, gap float64, c color.Color) ([]plot.Plotter, error) {
	var out []plot.Plotter
	for start := 0; start < len(xys); {
		end := start + 1
		for end < len(xys) && xys[end].X-xys[end-1].X <= gap {
			end++
		}
		var (
			p   plot.Plotter
			err error
		)
		if end-start == 1 {
			s, e := plotter.NewScatter(xys[start:end])
			if e == nil {
				s.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(1.5), Shape: draw.CircleGlyph{}}
			}
			p, err = s, e
		} else {
			l, e := plotter.NewLine(xys[start:end])
			if e == nil {
				l.Color, l.Width = c, vg.Points(1.6)
			}
			p, err = l, e
		}
		if err != nil {
			return nil, err
		}
		out = append(out, p)
		start = end
	}
	return out, nil
}
