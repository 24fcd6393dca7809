// This file records the run for its timeline picture: per scenario a
// track, on that scenario's own clock, which timelinedraw.go lays out and
// timelinepanels.go turns into panels.

package main

import (
	"slices"
	"sync"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/meshless/meshless/circuitbreaker"
)

// The bounds of what a track records: later calls, changes and events are
// not drawn.
const (
	maxBins    = 100_000 // per series
	maxChanges = 10_000  // per state row
	maxTallies = 100_000 // per tally
	maxRows    = 12      // state rows per track
)

// timeline records the run, one track per scenario, in the order they ran.
// A nil *timeline records nothing. It is safe for concurrent use.
type timeline struct {
	mu     sync.Mutex
	tracks []*track
}

func newTimeline() *timeline { return &timeline{} }

// track starts the track of scenario, whose axis runs over length (the
// scenario's schedule, or one of its runs); nil on a nil timeline.
func (t *timeline) track(scenario string, length time.Duration) *track {
	if t == nil {
		return nil
	}
	k := &track{scenario: scenario, length: length, bin: binFor(length), byName: map[string]*series{}, tallies: map[string][]time.Duration{}}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tracks = append(t.tracks, k)
	return k
}

// all returns the tracks, in the order they were started.
func (t *timeline) all() []*track {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.tracks)
}

// binFor is the width of a track's points: a second, or for a track shorter
// than 10s a tenth of it or less (a round number of milliseconds), so that a
// short run still draws a line.
func binFor(length time.Duration) time.Duration {
	if length >= 10*time.Second {
		return time.Second
	}
	for _, b := range []time.Duration{500, 200, 100, 50, 20, 10, 5, 2, 1} {
		if b *= time.Millisecond; length >= 10*b {
			return b
		}
	}
	return time.Millisecond
}

// track is one scenario on the timeline: its clients' calls per bin, its
// phases, the states of its breakers or pods, and counted events. A nil
// *track records nothing.
type track struct {
	scenario  string
	length    time.Duration
	bin       time.Duration
	transport string // the backend scenario's: "grpc" or "http"

	mu      sync.Mutex
	origin  time.Time
	byName  map[string]*series
	names   []string // in the order first asked for
	spans   []span
	rows    []*stateRow
	tallies map[string][]time.Duration
	tnames  []string // in the order first tallied
}

// span is a phase on a track.
type span struct {
	From, To time.Duration
	Phase    string
	About    string // what happens in it, in a few words; "" for nothing to add
}

// stateRow is a thing whose state the picture draws as a strip: a breaker,
// a pod in a balancer.
type stateRow struct {
	Name    string
	Initial string
	Changes []change
}

// change is a state row's new state from At.
type change struct {
	At    time.Duration
	State string
}

// begin sets the track's origin: the scenario's start, from which its
// series count their bins. Call it before series.
func (k *track) begin(origin time.Time) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.origin = origin
}

// series returns the series of the client called name, made on first use.
func (k *track) series(name string) *series {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	s, ok := k.byName[name]
	if !ok {
		s = &series{origin: k.origin, bin: k.bin}
		k.byName[name] = s
		k.names = append(k.names, name)
	}
	return s
}

// phases adds the phases of sched, from the track's start; about[i], if
// given, says what happens in phase i.
func (k *track) phases(sched schedule, about []string) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, p := range sched {
		if p.Duration > 0 {
			from := sched.start(i)
			sp := span{From: from, To: from + p.Duration, Phase: p.Name}
			if i < len(about) {
				sp.About = about[i]
			}
			k.spans = append(k.spans, sp)
		}
	}
}

// row returns the state row called name, made with state initial on first
// use; nil beyond maxRows.
func (k *track) row(name, initial string) *stateRow {
	for _, r := range k.rows {
		if r.Name == name {
			return r
		}
	}
	if len(k.rows) >= maxRows {
		return nil
	}
	r := &stateRow{Name: name, Initial: initial}
	k.rows = append(k.rows, r)
	return r
}

// state declares the row name, in state initial from the start: rows are
// drawn in the order declared.
func (k *track) state(name, initial string) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.row(name, initial)
}

// change records that row name is in state from at on. A row not declared
// yet starts in initial.
func (k *track) change(name, initial string, at time.Duration, state string) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if r := k.row(name, initial); r != nil && len(r.Changes) < maxChanges {
		r.Changes = append(r.Changes, change{At: at, State: state})
	}
}

// transitions records the breaker's transitions, one row per breaker.
func (k *track) transitions(trs []transition) {
	for _, tr := range trs {
		state := stateClosed
		switch tr.To {
		case circuitbreaker.StateOpen, circuitbreaker.StateForcedOpen:
			state = stateOpen
		case circuitbreaker.StateHalfOpen:
			state = stateHalfOpen
		}
		k.change(tr.Breaker, stateClosed, tr.At, state)
	}
}

// tally counts one event of name at at, since the track's start (the
// cluster scenario's requests that reached its dead dependency, per run).
func (k *track) tally(name string, at time.Duration) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	ts, ok := k.tallies[name]
	if !ok {
		k.tnames = append(k.tnames, name)
	}
	if len(ts) < maxTallies {
		k.tallies[name] = append(ts, at)
	}
}

// snapshot is a copy of what a track recorded, for drawing.
type snapshot struct {
	scenario  string
	length    time.Duration
	bin       time.Duration
	transport string
	series    map[string]*series
	spans     []span
	rows      []stateRow
	tallies   map[string][]time.Duration // each sorted
	tnames    []string
}

func (k *track) snapshot() snapshot {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := snapshot{scenario: k.scenario, length: k.length, bin: k.bin, transport: k.transport, series: map[string]*series{}, spans: slices.Clone(k.spans),
		tallies: map[string][]time.Duration{}, tnames: slices.Clone(k.tnames)}
	for n, v := range k.byName {
		s.series[n] = v
	}
	for _, r := range k.rows {
		c := *r
		c.Changes = slices.Clone(r.Changes)
		slices.SortStableFunc(c.Changes, func(a, b change) int { return int(a.At - b.At) })
		s.rows = append(s.rows, c)
	}
	for n, ts := range k.tallies {
		ts = slices.Clone(ts)
		slices.Sort(ts)
		s.tallies[n] = ts
	}
	return s
}

// series is one client's calls, per bin of their start. A nil *series
// records nothing.
type series struct {
	origin time.Time
	bin    time.Duration
	mu     sync.Mutex
	bins   []bin
}

type bin struct {
	calls, ok, sent int
	lat             []time.Duration
}

// add records a call that started at start, took lat, sent requests to the
// backend (retries included) and succeeded or not.
func (s *series) add(start time.Time, lat time.Duration, sent int, ok bool) {
	if s == nil {
		return
	}
	i := int(start.Sub(s.origin) / s.bin)
	if i < 0 || i >= maxBins {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.bins) <= i {
		s.bins = append(s.bins, bin{})
	}
	b := &s.bins[i]
	b.calls++
	b.sent += sent
	if ok {
		b.ok++
	}
	b.lat = append(b.lat, lat)
}

// seriesPoints are a series' values per bin with calls, at the bin's middle,
// in seconds: a bin without calls has no point (a line stops there).
type seriesPoints struct {
	success plotter.XYs // % of calls that succeeded
	p99ms   plotter.XYs // p99 latency, ms
	perCall plotter.XYs // requests sent per call
}

func (s *series) points() seriesPoints {
	var out seriesPoints
	if s == nil {
		return out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range s.bins {
		if b.calls == 0 {
			continue
		}
		x := (time.Duration(i)*s.bin + s.bin/2).Seconds()
		lat := slices.Clone(b.lat)
		slices.Sort(lat)
		n := float64(b.calls)
		out.success = append(out.success, plotter.XY{X: x, Y: 100 * float64(b.ok) / n})
		out.p99ms = append(out.p99ms, plotter.XY{X: x, Y: float64(percentile(lat, 99)) / float64(time.Millisecond)})
		out.perCall = append(out.perCall, plotter.XY{X: x, Y: float64(b.sent) / n})
	}
	return out
}
