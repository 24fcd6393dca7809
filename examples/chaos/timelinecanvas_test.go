package main

import (
	"fmt"
	"image"
	"image/color"
	"math"

	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
)

// textBox is a text the picture drew, with the box it covers on the canvas.
type textBox struct {
	text string
	box  vg.Rectangle
}

func (b textBox) String() string {
	return fmt.Sprintf("%q at (%.1f,%.1f)-(%.1f,%.1f)", b.text, b.box.Min.X, b.box.Min.Y, b.box.Max.X, b.box.Max.Y)
}

// affine is a 2-D transform: (x, y) → (a·x + c·y + e, b·x + d·y + f).
type affine struct{ a, b, c, d, e, f float64 }

var identity = affine{a: 1, d: 1}

// then returns m followed, in m's frame, by n: what a canvas does with a
// Translate, Rotate or Scale after m.
func (m affine) then(n affine) affine {
	return affine{
		a: m.a*n.a + m.c*n.b, b: m.b*n.a + m.d*n.b,
		c: m.a*n.c + m.c*n.d, d: m.b*n.c + m.d*n.d,
		e: m.a*n.e + m.c*n.f + m.e, f: m.b*n.e + m.d*n.f + m.f,
	}
}

func (m affine) apply(x, y float64) (float64, float64) {
	return m.a*x + m.c*y + m.e, m.b*x + m.d*y + m.f
}

// recorder is a vg.Canvas that draws nothing: it records the box of every
// text drawn on it, measured with the plot library's own font metrics
// (font.Face's Width and Extents) and carried through the canvas's
// transforms, as a renderer places it. Each text is widened by widen (1
// for the font the SVG names; more for a wider fallback font, which a
// viewer without it uses: DejaVu Sans is about 15 % wider than Liberation
// Sans), from its start, as a renderer that substitutes the font does.
type recorder struct {
	w, h  vg.Length
	widen float64
	m     affine
	stack []affine
	texts []textBox
}

func newRecorder(w, h vg.Length, widen float64) *recorder {
	return &recorder{w: w, h: h, widen: widen, m: identity}
}

func (r *recorder) Size() (vg.Length, vg.Length) { return r.w, r.h }
func (r *recorder) SetLineWidth(vg.Length)       {}
func (r *recorder) SetLineDash([]vg.Length, vg.Length) {
}
func (r *recorder) SetColor(color.Color) {}
func (r *recorder) Rotate(rad float64) {
	s, c := math.Sincos(rad)
	r.m = r.m.then(affine{a: c, b: s, c: -s, d: c})
}
func (r *recorder) Translate(pt vg.Point) {
	r.m = r.m.then(affine{a: 1, d: 1, e: float64(pt.X), f: float64(pt.Y)})
}
func (r *recorder) Scale(x, y float64) { r.m = r.m.then(affine{a: x, d: y}) }
func (r *recorder) Push()              { r.stack = append(r.stack, r.m) }
func (r *recorder) Pop() {
	r.m = r.stack[len(r.stack)-1]
	r.stack = r.stack[:len(r.stack)-1]
}
func (r *recorder) Stroke(vg.Path)                      {}
func (r *recorder) Fill(vg.Path)                        {}
func (r *recorder) DrawImage(vg.Rectangle, image.Image) {}

// FillString records the box from the baseline's start: the text's width,
// its font's ascent above and descent below.
func (r *recorder) FillString(f font.Face, pt vg.Point, text string) {
	if f.Font.Size == 0 || text == "" {
		return
	}
	ext := f.Extents()
	x0, x1 := float64(pt.X), float64(pt.X)+r.widen*float64(f.Width(text))
	y0, y1 := float64(pt.Y-ext.Descent), float64(pt.Y+ext.Ascent)
	box := vg.Rectangle{Min: vg.Point{X: vg.Length(math.Inf(1)), Y: vg.Length(math.Inf(1))}, Max: vg.Point{X: vg.Length(math.Inf(-1)), Y: vg.Length(math.Inf(-1))}}
	for _, c := range [][2]float64{{x0, y0}, {x1, y0}, {x0, y1}, {x1, y1}} {
		x, y := r.m.apply(c[0], c[1])
		box.Min.X, box.Min.Y = min(box.Min.X, vg.Length(x)), min(box.Min.Y, vg.Length(y))
		box.Max.X, box.Max.Y = max(box.Max.X, vg.Length(x)), max(box.Max.Y, vg.Length(y))
	}
	r.texts = append(r.texts, textBox{text: text, box: box})
}

// overlaps reports whether a and b share more than a sliver (tol on each
// side): text boxes that merely touch do not overlap.
func overlaps(a, b vg.Rectangle, tol vg.Length) bool {
	return a.Min.X+tol < b.Max.X && b.Min.X+tol < a.Max.X && a.Min.Y+tol < b.Max.Y && b.Min.Y+tol < a.Max.Y
}

// inside reports whether a lies within b, give or take tol.
func inside(a, b vg.Rectangle, tol vg.Length) bool {
	return a.Min.X >= b.Min.X-tol && a.Max.X <= b.Max.X+tol && a.Min.Y >= b.Min.Y-tol && a.Max.Y <= b.Max.Y+tol
}

// textProblems returns what is wrong with the texts drawn on a w×h canvas:
// a text that runs past the canvas, or two texts that overlap.
func textProblems(texts []textBox, w, h vg.Length) []string {
	var out []string
	canvas := vg.Rectangle{Max: vg.Point{X: w, Y: h}}
	for i, a := range texts {
		if !inside(a.box, canvas, 0) {
			out = append(out, fmt.Sprintf("runs past the %.0f×%.0f canvas: %v", w, h, a))
		}
		for _, b := range texts[i+1:] {
			if overlaps(a.box, b.box, 0.5) {
				out = append(out, fmt.Sprintf("overlap: %v and %v", a, b))
			}
		}
	}
	return out
}
