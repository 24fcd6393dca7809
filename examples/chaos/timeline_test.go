package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// pictureProblems draws secs on a recorder, with the widths of the SVG's
// font and then with a fallback font's (fallbackWiden wider), and returns
// the layout and what is wrong: a text past the canvas, two texts that
// overlap, a text over a panel's data, a phase's name outside its band, data
// areas whose edges differ.
func pictureProblems(t *testing.T, secs []section) (layout, []string) {
	t.Helper()
	h := place(secs).h
	var lay layout
	var out []string
	for _, widen := range []float64{1, fallbackWiden} {
		rec := newRecorder(pictureW, h, widen)
		lay = drawSections(draw.New(rec), secs)
		if len(rec.texts) < 10 {
			t.Fatalf("the recorder saw only %d texts: %v", len(rec.texts), rec.texts)
		}
		for _, p := range textProblems(rec.texts, pictureW, h) {
			out = append(out, fmt.Sprintf("widened %g: %s", widen, p))
		}
		for _, s := range lay.sections {
			for _, p := range s.panels {
				for _, b := range rec.texts {
					if overlaps(b.box, p.data, 0.5) {
						out = append(out, fmt.Sprintf("widened %g: %v is over the data of %q", widen, b, p.caption))
					}
				}
			}
			for _, ph := range s.phases {
				if ph.label == "" {
					continue
				}
				i := slices.IndexFunc(rec.texts, func(b textBox) bool {
					mid := vg.Point{X: (b.box.Min.X + b.box.Max.X) / 2, Y: (b.box.Min.Y + b.box.Max.Y) / 2}
					return b.text == ph.label && mid.X > ph.band.Min.X && mid.X < ph.band.Max.X && mid.Y > ph.band.Min.Y && mid.Y < ph.band.Max.Y
				})
				switch {
				case i < 0:
					out = append(out, fmt.Sprintf("the phase %s's name %q is not drawn over its band", ph.phase, ph.label))
				case !inside(rec.texts[i].box, ph.band, 0):
					out = append(out, fmt.Sprintf("widened %g: %v runs out of its band %v", widen, rec.texts[i], ph.band))
				}
			}
		}
	}
	var first *panelLayout
	for _, s := range lay.sections {
		for _, p := range s.panels {
			if first == nil {
				first = &p
			} else if math.Abs(float64(p.data.Min.X-first.data.Min.X)) > 0.01 || math.Abs(float64(p.data.Max.X-first.data.Max.X)) > 0.01 {
				out = append(out, fmt.Sprintf("the data of %q spans %v to %v, that of %q %v to %v", p.caption, p.data.Min.X, p.data.Max.X, first.caption, first.data.Min.X, first.data.Max.X))
			}
		}
	}
	return lay, out
}

// svgTexts parses the SVG at path and returns its texts.
func svgTexts(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var texts []string
	root := ""
	dec := xml.NewDecoder(f)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG does not parse as XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				texts = append(texts, s)
			}
		}
	}
	if root != "svg" {
		t.Errorf("the root element is %q, want svg", root)
	}
	return texts
}

// The four scenarios, one after the other, draw one picture: a section
// each, with its panels, no text clipped or overlapping (with the SVG's
// font and a wider fallback), and what meshless changed drawn in each.
func TestTimelineOfEveryScenario(t *testing.T) {
	cfg := shortConfig(t)
	cfg.Quiet = true
	pods := shortPodsConfig(t)
	cl := shortClusterConfig(t)
	cl.Run = 3 * time.Second
	ev := shortEventsConfig(t)
	path := filepath.Join(t.TempDir(), "timeline.svg")
	var res results
	var out bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		cfg.Listen = listenMem
		pods.Net = new(memPods)
		ev.Listen = listenMem
		var err error
		res, err = runScenarios(t.Context(), cfg, scenarioOptions{Scenario: "all", SVG: path, Pods: pods, Cluster: cl, Events: ev}, &out)
		if err != nil {
			t.Fatalf("runScenarios: %v", err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	if res.Backend == nil || res.Pods == nil || res.Cluster == nil || res.Events == nil || res.SVG != path {
		t.Fatalf("results %+v: want the four scenarios and the SVG at %s", res, path)
	}
	if !strings.Contains(out.String(), "timeline: "+path) {
		t.Errorf("the output does not end with the picture's path %s:\n%s", path, out.String())
	}

	secs, err := res.Timeline.sections()
	if err != nil {
		t.Fatal(err)
	}
	lay, problems := pictureProblems(t, secs)
	for _, p := range problems {
		t.Error(p)
	}
	var names []string
	for _, s := range lay.sections {
		names = append(names, fmt.Sprintf("%s:%d", s.scenario, len(s.panels)))
	}
	if want := []string{"backend:4", "pods:3", "cluster:2", "events:4"}; !slices.Equal(names, want) {
		t.Errorf("sections and their panels %v, want %v", names, want)
	}

	// Backend: the requests that reached each backend per call. bare sends
	// every call; meshless, once its breaker is open, almost none while the
	// backend fails and hangs.
	k := res.Timeline.all()[0].snapshot()
	sched := res.Backend.Schedule
	for _, ph := range []int{phaseFailing, phaseHanging} {
		from, to := sched.start(ph).Seconds(), (sched.start(ph) + sched[ph].Duration).Seconds()
		last := func(name string) float64 { // the value of the phase's last bin
			v := math.NaN()
			for _, p := range k.series[name].points().perCall {
				if p.X > from && p.X < to {
					v = p.Y
				}
			}
			return v
		}
		if b, m := last("bare"), last("meshless"); !(b >= 1) || !(m < 0.2) {
			t.Errorf("%s: requests per call at the phase's end: bare %v (want 1 or more), meshless %v (want under 0.2)", sched[ph].Name, b, m)
		}
	}
	// Its breaker's strip: open in the failing phase, each probe a change
	// to half-open.
	if len(k.rows) != 1 || !slices.ContainsFunc(k.rows[0].Changes, func(c change) bool { return c.State == stateHalfOpen }) {
		t.Errorf("the backend's breaker rows %+v: want one, with half-opens", k.rows)
	}

	// Pods: one strip per pod; the failing pod ejected.
	kp := res.Timeline.all()[1].snapshot()
	if len(kp.rows) != 4 || !slices.ContainsFunc(kp.rows[0].Changes, func(c change) bool { return c.State == stateEjected }) {
		t.Errorf("the pods' rows %+v: want four, the first ejected", kp.rows)
	}

	// Cluster: in each run, the requests that reached the dead dependency,
	// in total, from 0 to the run's end and no further: all of them.
	kc := res.Timeline.all()[2].snapshot()
	for i, r := range res.Cluster.Runs {
		xys := cumulative(kc.tallies[r.Name], kc.length.Seconds())
		end := xys[len(xys)-1]
		if int(end.Y) != r.Reached() || r.Reached() == 0 || end.X != cl.Run.Seconds() {
			t.Errorf("cluster run %d (%s): the line ends at (%v, %v), want (%v, %d): every request that reached the dependency, at the run's end",
				i, r.Name, end.X, end.Y, cl.Run.Seconds(), r.Reached())
		}
	}

	// Events: the events each backend handled end at its count, under the
	// events published; the queue's line rises while the backend fails and
	// ends at 0, drained; bare's requests per second while the backend
	// fails are its redeliveries, meshless's almost none.
	ke := res.Timeline.all()[3].snapshot()
	xmax := ke.length.Seconds()
	last := func(xys plotter.XYs) float64 { return xys[len(xys)-1].Y }
	if p := countsOver(ke.tallies[tallyPublished], xmax); last(p) != float64(res.Events.Published) {
		t.Errorf("the published line ends at %v, want %d", last(p), res.Events.Published)
	}
	for _, r := range res.Events.Consumers {
		if h := countsOver(ke.tallies[tallyHandled(r.Name)], xmax); last(h) != float64(r.Handled) || r.Handled == 0 {
			t.Errorf("%s's handled line ends at %v, want %d", r.Name, last(h), r.Handled)
		}
	}
	waiting := func(x float64) float64 {
		in, out := countsOver(ke.tallies[tallyDeferred], x), countsOver(ke.tallies[tallyResolved], x)
		return last(in) - last(out)
	}
	failEnd := (ev.Phases.start(eventsFailing) + ev.Phases[eventsFailing].Duration).Seconds()
	if w := waiting(failEnd); w < float64(ev.Phases[eventsFailing].Duration.Seconds()*float64(ev.Rate))-10 {
		t.Errorf("%v events waiting in the queue at the end of the failing phase, want about every event of the phase", w)
	}
	if w := waiting(xmax); w != 0 {
		t.Errorf("%v events waiting in the queue at the end, want 0: drained", w)
	}
	bin := binFor(ke.length / 5)
	mid := failEnd - ev.Phases[eventsFailing].Duration.Seconds()/2
	rate := func(name string) float64 { // the bin nearest mid
		v, d := math.NaN(), math.Inf(1)
		for _, p := range perSecond(ke.tallies[tallyRequests(name)], bin, xmax) {
			if math.Abs(p.X-mid) < d {
				v, d = p.Y, math.Abs(p.X-mid)
			}
		}
		return v
	}
	if b, m := rate("bare"), rate("meshless"); !(b >= float64(ev.Rate*ev.Deliveries)*0.9) || !(m < float64(ev.Rate)/10) {
		t.Errorf("requests per second in the middle of the failing phase: bare %v (want about %d), meshless %v (want under %d)", b, ev.Rate*ev.Deliveries, m, ev.Rate/10)
	}

	texts := svgTexts(t, path)
	for _, want := range []string{
		"bare: a gRPC deadline, nothing else", "meshless: round_robin with outlier ejection (pods.yaml)", // the legends
		"alone: each pod's breaker decides on its own calls",
		"healthy", "overloaded: 2.5× capacity", "one-failing: pod-1 answers UNAVAILABLE", // the phases
		"every event published",                    // the events' legend
		"breaker", "pod-1", "alone A", "cluster C", // the strips
		"seconds since the scenario's start",
	} {
		if !slices.Contains(texts, want) {
			t.Errorf("the SVG has no text %q; it has %q", want, texts)
		}
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg, []byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")) || bytes.Contains(svg, []byte("font-family:Liberation Sans;")) {
		t.Error("the SVG does not name its font's fallbacks (Arial, Helvetica, sans-serif)")
	}
}

// drawOneScenario runs one scenario (opts, which names the SVG file) of the
// short config, set by edit, in a synctest bubble, and returns its sections
// and their layout, failing the test on any text clipped or overlapping.
// edit returns the backends' listener, or nil to keep shortConfig's.
func drawOneScenario(t *testing.T, edit func(*config) listenFunc, opts scenarioOptions) ([]section, layout) {
	t.Helper()
	var res results
	synctest.Test(t, func(t *testing.T) {
		cfg := shortConfig(t)
		cfg.Quiet = true
		if l := edit(&cfg); l != nil {
			cfg.Listen = l
		}
		var err error
		res, err = runScenarios(t.Context(), cfg, opts, io.Discard)
		if err != nil {
			t.Fatalf("runScenarios: %v", err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	secs, err := res.Timeline.sections()
	if err != nil {
		t.Fatal(err)
	}
	lay, problems := pictureProblems(t, secs)
	for _, p := range problems {
		t.Error(p)
	}
	return secs, lay
}

// One scenario draws its own section and nothing else: no empty panels.
func TestTimelineOfOneScenario(t *testing.T) {
	cl := shortClusterConfig(t)
	cl.Run = 2 * time.Second
	cl.Quiet = true
	path := filepath.Join(t.TempDir(), "cluster.svg")
	secs, lay := drawOneScenario(t, func(cfg *config) listenFunc { return nil }, scenarioOptions{Scenario: "cluster", SVG: path, Cluster: cl})
	if len(lay.sections) != 1 || lay.sections[0].scenario != "cluster" || len(lay.sections[0].panels) != 2 {
		t.Fatalf("layout %+v: want the cluster's section alone, with its two panels", lay.sections)
	}
	if last := secs[0].panels[len(secs[0].panels)-1]; last.plot.X.Label.Text == "" {
		t.Errorf("the last panel has no x label")
	}
	if texts := svgTexts(t, path); slices.Contains(texts, "calls answered (OK or NOT_FOUND), % of the calls started in each second") {
		t.Errorf("the cluster's picture draws another scenario's panel: %q", texts)
	}
}

// The picture's checks can fail: overlapping texts, a text past the canvas.
func TestTextProblemsFindsOverlapsAndOverflow(t *testing.T) {
	box := func(x0, y0, x1, y1 vg.Length) vg.Rectangle {
		return vg.Rectangle{Min: vg.Point{X: x0, Y: y0}, Max: vg.Point{X: x1, Y: y1}}
	}
	for _, tc := range []struct {
		name  string
		texts []textBox
		want  int
	}{
		{"apart", []textBox{{"a", box(0, 0, 10, 10)}, {"b", box(20, 0, 30, 10)}}, 0},
		{"touching", []textBox{{"a", box(0, 0, 10, 10)}, {"b", box(10, 0, 20, 10)}}, 0},
		{"overlapping", []textBox{{"a", box(0, 0, 10, 10)}, {"b", box(5, 5, 15, 15)}}, 1},
		{"past the right edge", []textBox{{"a", box(95, 0, 105, 10)}}, 1},
		{"past the top", []textBox{{"a", box(0, 95, 10, 105)}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := textProblems(tc.texts, 100, 100); len(got) != tc.want {
				t.Errorf("textProblems = %q, want %d problems", got, tc.want)
			}
		})
	}
}

// The recorder places a rotated text (a y axis's label) where a renderer
// does: turned a quarter, it runs up from its start.
func TestRecorderFollowsTransforms(t *testing.T) {
	rec := newRecorder(200, 200, 1)
	dc := draw.New(rec)
	sty := textStyle(10)
	sty.Rotation = math.Pi / 2
	dc.FillText(sty, vg.Point{X: 50, Y: 20}, "a long label")
	if len(rec.texts) != 1 {
		t.Fatalf("texts %v", rec.texts)
	}
	b := rec.texts[0].box
	w := sty.Width("a long label")
	if b.Max.Y-b.Min.Y < w-0.01 || b.Max.X-b.Min.X > 15 || b.Min.Y < 19 {
		t.Errorf("box %v: want %v tall, about 12 wide, from y=20 up", b, w)
	}
}

// Phases too narrow for any name are shaded without one; the others are
// named with the longest name that fits.
func TestPhaseNamesFitTheirBands(t *testing.T) {
	tl := newTimeline()
	k := tl.track("backend", 10*time.Second)
	sched := schedule{{Name: "healthy", Duration: 4 * time.Second}, {Name: "overloaded", Duration: 3 * time.Second},
		{Name: "failing", Duration: 100 * time.Millisecond}, {Name: "hanging", Duration: 600 * time.Millisecond}, {Name: "recovered", Duration: 2300 * time.Millisecond}}
	k.phases(sched, []string{"", "overloaded: 2.5× capacity", "failing: UNAVAILABLE", "hanging: no answer", ""})
	k.change("a.very.long.service.Name", stateClosed, 4*time.Second, stateOpen)
	k.change("another.Service", stateClosed, 5*time.Second, stateOpen)
	secs, err := tl.sections()
	if err != nil {
		t.Fatal(err)
	}
	lay, problems := pictureProblems(t, secs)
	for _, p := range problems {
		t.Error(p)
	}
	var labels []string
	for _, ph := range lay.sections[0].phases {
		labels = append(labels, ph.label)
	}
	if want := []string{"healthy", "overloaded: 2.5× capacity", "", "han…", "recovered"}; !slices.Equal(labels, want) {
		t.Errorf("phase names %q, want %q", labels, want)
	}
}

// A series draws no value where no call started: its line stops there.
func TestSeriesLineStopsWhereNoCallStarted(t *testing.T) {
	origin := time.Now()
	s := &series{origin: origin, bin: time.Second}
	for _, sec := range []int{0, 1, 4, 5} {
		s.add(origin.Add(time.Duration(sec)*time.Second+time.Millisecond), time.Millisecond, 1, true)
	}
	pts := s.points()
	if len(pts.success) != 4 {
		t.Fatalf("points %v: want one per second with calls", pts.success)
	}
	ps, err := linesOf(pts.success, 1.5, colorBare)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 {
		t.Errorf("%d lines, want 2: broken over the seconds without calls", len(ps))
	}
}

func TestBinFor(t *testing.T) {
	for _, tc := range []struct{ length, want time.Duration }{
		{40 * time.Second, time.Second}, {10 * time.Second, time.Second}, {5 * time.Second, 500 * time.Millisecond},
		{1500 * time.Millisecond, 100 * time.Millisecond}, {300 * time.Millisecond, 20 * time.Millisecond}, {0, time.Millisecond},
	} {
		t.Run(tc.length.String(), func(t *testing.T) {
			if got := binFor(tc.length); got != tc.want {
				t.Errorf("binFor(%v) = %v, want %v", tc.length, got, tc.want)
			}
		})
	}
}

// The picture goes to the working directory unless -svg says otherwise.
func TestDefaultSVGInWorkingDirectory(t *testing.T) {
	if defaultSVG != filepath.Base(defaultSVG) {
		t.Errorf("defaultSVG %q is not a file of the working directory", defaultSVG)
	}
	pods, err := defaultPodsConfig()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := defaultClusterConfig()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := defaultEventsConfig()
	if err != nil {
		t.Fatal(err)
	}
	fs := flagSet()
	o, _ := addScenarioFlags(fs, pods, cl, ev)
	if o.SVG != defaultSVG {
		t.Errorf("-svg defaults to %q, want %q", o.SVG, defaultSVG)
	}
	if err := fs.Parse([]string{"-svg", "x/y.svg"}); err != nil || o.SVG != "x/y.svg" {
		t.Errorf("-svg x/y.svg gave %q, %v", o.SVG, err)
	}
}

func flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// A nil timeline records nothing and does not fail: what -svg "" gives.
func TestNilTimeline(t *testing.T) {
	var tl *timeline
	k := tl.track("pods", time.Second)
	k.begin(time.Now())
	s := k.series("bare")
	s.add(time.Now(), time.Millisecond, 1, true)
	k.change("pod-1", stateIn, time.Second, stateEjected)
	k.phases(schedule{{Name: "healthy", Duration: time.Second}}, nil)
	k.transitions([]transition{{At: time.Second}})
	k.tally("alone", time.Second)
	if k != nil || s != nil {
		t.Errorf("a nil timeline gave a track or a series")
	}
}

// The backend scenario over HTTP draws its section with HTTP's words, and
// no text clipped or overlapping.
func TestTimelineOfTheBackendOverHTTP(t *testing.T) {
	path := filepath.Join(t.TempDir(), "backend-http.svg")
	_, lay := drawOneScenario(t, func(cfg *config) listenFunc {
		cfg.Transport = transportHTTP
		return listenPipe
	}, scenarioOptions{Scenario: "backend", SVG: path})
	if len(lay.sections) != 1 || lay.sections[0].scenario != "backend" || len(lay.sections[0].panels) != 4 {
		t.Fatalf("layout %+v: want the backend's section alone, with its four panels", lay.sections)
	}
	texts := svgTexts(t, path)
	for _, want := range []string{"bare: net/http with a deadline, nothing else", "calls answered (200, or 404: the backend's business answer), % of the calls started in each 200ms", "failing: 503"} {
		if !slices.Contains(texts, want) {
			t.Errorf("the picture has no text %q: %q", want, texts)
		}
	}
}
