package main

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"gonum.org/v1/plot/plotter"
)

// The three scenarios, one after the other, draw one timeline: an SVG that
// parses as XML, with both clients' series, the phases of every scenario
// and the marks of the breaker, of the ejections and of the remote opens.
func TestTimelineOfEveryScenario(t *testing.T) {
	cfg := shortConfig(t)
	for i := range cfg.Schedule {
		cfg.Schedule[i].Duration = 500 * time.Millisecond
	}
	cfg.Quiet = true
	pods := shortPodsConfig(t)
	pods.Phases[podsHealthy].Duration = 500 * time.Millisecond
	pods.Phases[podsFailing].Duration = time.Second
	pods.Phases[podsSlow].Duration = 500 * time.Millisecond
	cl := shortClusterConfig(t)
	cl.Run = 3 * time.Second
	path := filepath.Join(t.TempDir(), "timeline.svg")
	var res results
	synctest.Test(t, func(t *testing.T) {
		cfg.Listen = listenBufconn
		pods.Net = new(bufconnPods)
		var err error
		res, err = runScenarios(t.Context(), cfg, scenarioOptions{Scenario: "all", SVG: path, Pods: pods, Cluster: cl}, io.Discard)
		if err != nil {
			t.Fatalf("runScenarios: %v", err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	if res.Backend == nil || res.Pods == nil || res.Cluster == nil || res.SVG != path {
		t.Fatalf("results %+v: want the three scenarios and the SVG at %s", res, path)
	}

	// Per second of the run (4.5s of phases), each client has a point with
	// calls in it.
	for _, name := range []string{"bare", "meshless"} {
		succ, p99 := res.Timeline.series(name).points()
		if len(succ) < 5 || len(p99) != len(succ) {
			t.Errorf("%s: %d success points and %d p99 points, want one per second, at least 5", name, len(succ), len(p99))
		}
		for _, p := range succ {
			if p.Y < 0 || p.Y > 100 {
				t.Errorf("%s: success %v%% at %vs", name, p.Y, p.X)
			}
		}
	}
	// The bare client's success dips while the backend fails and while a
	// pod fails: the picture has something to show.
	succ, _ := res.Timeline.series("bare").points()
	if i := slices.IndexFunc(succ, func(p plotter.XY) bool { return p.Y < 50 }); i < 0 {
		t.Errorf("bare's success never went under 50%%: %v", succ)
	}

	// The third plot counts, per second, the requests that reached the
	// cluster scenario's dead dependency in each run: all of them.
	for i, r := range res.Cluster.Runs {
		n := 0
		for _, p := range res.Timeline.countPoints(r.Name) {
			n += int(p.Y)
		}
		if n != r.Reached() || n == 0 {
			t.Errorf("cluster run %d (%s): the timeline counts %d requests to the dead dependency, the run %d", i, r.Name, n, r.Reached())
		}
	}

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
	for _, want := range []string{
		"bare success", "meshless success", "bare p99", "meshless p99", // the series, in the legends
		"breaker opens", "pod ejected", markRemote, // the marks
		"backend: healthy", "hanging", "pods: healthy", "one-failing", "one-slow", "cluster: alone", "cluster", // the phases
		"seconds since the start of the run",
		"cluster scenario, alone: requests that reached it", "cluster scenario, cluster: requests that reached it",
	} {
		if !slices.Contains(texts, want) {
			t.Errorf("the SVG has no text %q; it has %q", want, texts)
		}
	}
}

// A nil timeline records nothing and does not fail: what -svg "" gives.
func TestNilTimeline(t *testing.T) {
	var tl *timeline
	s := tl.series("bare")
	s.add(time.Now(), time.Millisecond, true)
	tl.mark(time.Second, markEjected)
	tl.phases("pods", 0, schedule{{Name: "healthy", Duration: time.Second}})
	tl.transitions(0, []transition{{At: time.Second}})
	if s != nil {
		t.Errorf("a nil timeline gave a series")
	}
}
