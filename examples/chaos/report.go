// This file tells the story: the running log (phases, breaker transitions, a
// status line per second) and the summary.

package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
)

// transition is a breaker's change of state, as the story tells it.
type transition struct {
	At       time.Duration // since the start
	Phase    int           // of the schedule at At; len(schedule) after it
	Client   string
	Breaker  string // its key: the service's name
	From, To circuitbreaker.State
	Reason   resilience.Reason
}

// breakerView is what the story says about the meshless client's breaker:
// the keys of client.yaml's defaults.circuitBreaker, or grpcmw's defaults.
type breakerView struct {
	Window, MinCalls, Probes int
	FailureRate, SlowRate    float64
	SlowCall, OpenWait       time.Duration
}

func viewBreaker(cfg *grpcmw.Config) breakerView {
	v := breakerView{Window: 100, MinCalls: 20, Probes: 2, FailureRate: 50, SlowRate: 100, SlowCall: 2 * time.Second, OpenWait: 30 * time.Second}
	cb := cfg.Defaults.CircuitBreaker
	if cb == nil {
		return v
	}
	set(&v.Window, cb.SlidingWindowSize)
	set(&v.MinCalls, cb.MinimumNumberOfCalls)
	set(&v.Probes, cb.PermittedNumberOfCallsInHalfOpenState)
	set(&v.FailureRate, cb.FailureRateThreshold)
	set(&v.SlowRate, cb.SlowCallRateThreshold)
	if cb.SlowCallDurationThreshold != nil {
		v.SlowCall = cb.SlowCallDurationThreshold.D()
	}
	if cb.WaitDurationInOpenState != nil {
		v.OpenWait = cb.WaitDurationInOpenState.D()
	}
	return v
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// story writes the running log. Only the run loop calls it.
type story struct {
	w           io.Writer
	cfg         config
	breaker     breakerView
	clients     []*client
	transitions []transition
	opened      map[string]time.Duration // when each breaker last opened
}

func newStory(w io.Writer, cfg config, clients []*client) *story {
	return &story{w: w, cfg: cfg, breaker: viewBreaker(cfg.Client), clients: clients, opened: map[string]time.Duration{}}
}

const (
	leftW  = 21 // "  12.345s  overloaded": time and phase
	groupW = 37 // one client's columns, with the space before them
)

func (s *story) header() {
	var sched []string
	for _, p := range s.cfg.Schedule {
		sched = append(sched, fmt.Sprintf("%s %v", p, p.Duration))
	}
	fmt.Fprintf(s.w, "chaos: %d gRPC clients call their own backend %d times a second each, every call in its own goroutine;\n"+
		"half of the calls look up an item that does not exist (NOT_FOUND, a business answer)\n",
		len(s.clients), s.cfg.Rate)
	for _, c := range s.clients {
		fmt.Fprintf(s.w, "  %-9s %s\n", c.name, c.about)
	}
	fmt.Fprintf(s.w, "  %-9s %s\n", "schedule", strings.Join(sched, " → "))
	fmt.Fprintf(s.w, "  %-9s since the line before: calls started, and calls that ended ok, NOT_FOUND, failed\n"+
		"  %-9s or rejected by meshless itself; then the calls in flight (each a goroutine) now,\n"+
		"  %-9s and the goroutines of the whole process\n\n", "columns", "", "")
	fmt.Fprintln(s.w, "  "+strings.ReplaceAll(strings.TrimSpace(s.cfg.ClientYAML), "\n", "\n  "))
	fmt.Fprintln(s.w)
	fmt.Fprintf(s.w, "%*s", leftW, "")
	for _, c := range s.clients {
		fmt.Fprintf(s.w, " %s", center(c.name, groupW-1))
	}
	fmt.Fprintf(s.w, "\n%9s  %-10s", "time", "phase")
	for range s.clients {
		fmt.Fprintf(s.w, " %5s %4s %4s %4s %4s %9s", "calls", "ok", "404", "fail", "rej", "in-flight")
	}
	fmt.Fprintf(s.w, " %10s\n", "goroutines")
}

// center pads name with rules to width.
func center(name string, width int) string {
	n := width - len(name) - 2
	if n < 2 {
		return name
	}
	return strings.Repeat("─", n/2) + " " + name + " " + strings.Repeat("─", n-n/2)
}

func (s *story) phase(el time.Duration, p int) {
	ph := s.cfg.Schedule[p]
	fmt.Fprintf(s.w, "%8.3fs  ▶ phase %d/%d, %s for %v: %s\n",
		el.Seconds(), p+1, len(s.cfg.Schedule), ph, ph.Duration, ph.describe(s.cfg))
}

// status prints each client's calls since the last status line.
func (s *story) status(el time.Duration, label string) {
	fmt.Fprintf(s.w, "%8.3fs  %-10s", el.Seconds(), label)
	for _, c := range s.clients {
		t, inflight := c.st.take()
		fmt.Fprintf(s.w, " %5d %4d %4d %4d %4d %9d", t.Calls, t.OK, t.NotFound, t.Failed, t.Rejected(), inflight)
	}
	fmt.Fprintf(s.w, " %10d\n", runtime.NumGoroutine())
}

// draining tells of the calls still in flight once the schedule is over, and
// reports whether there are any.
func (s *story) draining(el time.Duration) bool {
	var parts []string
	total := 0
	for _, c := range s.clients {
		n := c.st.inFlight()
		total += n
		parts = append(parts, fmt.Sprintf("%s %d", c.name, n))
	}
	if total > 0 {
		fmt.Fprintf(s.w, "%8.3fs  ■ schedule over; waiting for the calls still in flight (%s), which end by their deadlines\n",
			el.Seconds(), strings.Join(parts, ", "))
	}
	return total > 0
}

func (s *story) transition(tr transition) {
	tr.Phase = s.cfg.Schedule.at(tr.At)
	s.transitions = append(s.transitions, tr)
	fmt.Fprintf(s.w, "%8.3fs  ⚡ %s breaker %v → %v (%v): %s\n",
		tr.At.Seconds(), tr.Client, tr.From, tr.To, tr.Reason, s.explain(tr))
	if tr.To == circuitbreaker.StateOpen {
		s.opened[tr.Breaker] = tr.At
	}
}

// explain says in words why the breaker moved.
func (s *story) explain(tr transition) string {
	b := s.breaker
	switch {
	case tr.From == circuitbreaker.StateHalfOpen && tr.To == circuitbreaker.StateOpen:
		return "the probes failed; rejecting calls again, the wait doubled up to maxWaitDurationInOpenState"
	case tr.Reason == resilience.ReasonFailureRate:
		return fmt.Sprintf("%g%% or more of the last %d attempts failed; rejecting calls for %v", b.FailureRate, b.Window, b.OpenWait)
	case tr.Reason == resilience.ReasonSlowCallRate:
		return fmt.Sprintf("%g%% or more of the last %d attempts took over %v; rejecting calls for %v", b.SlowRate, b.Window, b.SlowCall, b.OpenWait)
	case tr.Reason == resilience.ReasonWaitElapsed:
		return fmt.Sprintf("open for %v; letting %d probes through", (tr.At - s.opened[tr.Breaker]).Round(10*time.Millisecond), b.Probes)
	case tr.Reason == resilience.ReasonProbesSucceeded:
		return "the probes passed; calls flow again"
	}
	return tr.Reason.String()
}

// result is a tally with the latencies of its calls.
type result struct {
	tally
	P50, P99, Max time.Duration
}

// measure sorts lat, which it takes over, for the percentiles.
func measure(t tally, lat []time.Duration) result {
	slices.Sort(lat)
	return result{tally: t, P50: percentile(lat, 50), P99: percentile(lat, 99), Max: percentile(lat, 100)}
}

// percentile returns the p-th percentile of sorted by nearest rank: the
// smallest value that at least p% of the values are at or below; 0 when
// sorted is empty.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ⌈p/100 × n⌉, in integers
	return sorted[max(rank, 1)-1]
}

// summary is what a run found, per client.
type summary struct {
	Elapsed     time.Duration
	Schedule    schedule
	Rate        int
	Timeout     time.Duration
	Clients     []clientSummary
	Transitions []transition
	Interrupted bool // the run's context ended before the schedule did
}

type clientSummary struct {
	Name         string
	Total        result
	Phases       []result             // by index in the schedule
	During       map[behaviour]result // the phases of each behaviour together
	PeakInFlight int                  // the client's calls, each a goroutine
	PeakBackend  int                  // the backend's handlers running at once
}

// summarize reads the clients' stats once every call is over.
func summarize(cfg config, clients []*client, trs []transition, elapsed time.Duration) summary {
	sum := summary{Elapsed: elapsed, Schedule: cfg.Schedule, Rate: cfg.Rate, Timeout: cfg.Timeout, Transitions: trs}
	for _, c := range clients {
		st := c.st
		st.mu.Lock()
		merged := func(keep func(i int) bool) result {
			var t tally
			var lat []time.Duration
			for i := range cfg.Schedule {
				if keep(i) {
					t.add(st.phases[i])
					lat = append(lat, st.lat[i]...)
				}
			}
			return measure(t, lat)
		}
		cs := clientSummary{Name: c.name, PeakInFlight: st.peak, PeakBackend: int(c.backend.peak.Load()), During: map[behaviour]result{}}
		cs.Total = merged(func(int) bool { return true })
		for i := range cfg.Schedule {
			cs.Phases = append(cs.Phases, merged(func(j int) bool { return j == i }))
		}
		for _, b := range []behaviour{healthy, overloaded, failing, hanging} {
			cs.During[b] = merged(func(i int) bool { return cfg.Schedule[i].Behaviour == b })
		}
		st.mu.Unlock()
		sum.Clients = append(sum.Clients, cs)
	}
	return sum
}

func (s summary) print(w io.Writer) {
	ran := "ran"
	if s.Interrupted {
		ran = "interrupted after"
	}
	fmt.Fprintf(w, "\nsummary: %s %v, %d calls a second per client, a %v deadline per call (bare) or attempt (meshless)\n\n",
		ran, s.Elapsed.Round(10*time.Millisecond), s.Rate, s.Timeout)
	row := func(label string, cell func(clientSummary) string) {
		fmt.Fprintf(w, "  %-46s", label)
		for _, c := range s.Clients {
			fmt.Fprintf(w, "%11s", cell(c))
		}
		fmt.Fprintln(w)
	}
	n := func(f func(r result) int, r func(clientSummary) result) func(clientSummary) string {
		return func(c clientSummary) string { return fmt.Sprint(f(r(c))) }
	}
	d := func(f func(r result) time.Duration, r func(clientSummary) result) func(clientSummary) string {
		return func(c clientSummary) string { return fmtDur(f(r(c))) }
	}
	total := func(c clientSummary) result { return c.Total }
	row("", func(c clientSummary) string { return c.Name })
	row("calls made", n(func(r result) int { return r.Calls }, total))
	row("  requests the backend received (retries too)", n(func(r result) int { return r.Reached }, total))
	row("  answered OK", n(func(r result) int { return r.OK }, total))
	row("  answered NOT_FOUND (a business answer)", n(func(r result) int { return r.NotFound }, total))
	row("  failed (UNAVAILABLE, DEADLINE_EXCEEDED)", n(func(r result) int { return r.Failed }, total))
	row("  rejected fast: breaker open (CIRCUIT_OPEN)", n(func(r result) int { return r.Open }, total))
	row("  rejected fast: bulkhead full (BULKHEAD_FULL)", n(func(r result) int { return r.Full }, total))
	row("latency p50", d(func(r result) time.Duration { return r.P50 }, total))
	row("latency p99", d(func(r result) time.Duration { return r.P99 }, total))
	row("latency max", d(func(r result) time.Duration { return r.Max }, total))
	row("peak in-flight calls (goroutines)", func(c clientSummary) string { return fmt.Sprint(c.PeakInFlight) })
	row("peak calls running in the backend", func(c clientSummary) string { return fmt.Sprint(c.PeakBackend) })
	for _, b := range []behaviour{overloaded, failing, hanging} {
		if s.Schedule.lengthOf(b) == 0 {
			continue
		}
		during := func(c clientSummary) result { return c.During[b] }
		fmt.Fprintf(w, "  while %s\n", b)
		row("  requests the backend received", n(func(r result) int { return r.Reached }, during))
		row("  answered (OK or NOT_FOUND)", n(func(r result) int { return r.Answered() }, during))
		row("  failed", n(func(r result) int { return r.Failed }, during))
		row("  rejected fast", n(func(r result) int { return r.Rejected() }, during))
		row("  latency p99", d(func(r result) time.Duration { return r.P99 }, during))
	}

	if len(s.Clients) < 2 || s.Schedule.lengthOf(hanging) == 0 {
		return
	}
	base, c := s.Clients[0], s.Clients[len(s.Clients)-1]
	bh, ch := base.During[hanging], c.During[hanging]
	fmt.Fprintf(w, "\nWhile the backend hung, %s sent it %d requests (%s: %d) and answered 99%% of its callers\n"+
		"within %s (%s: %s); its calls in flight peaked at %d (%s: %d).\n",
		c.Name, ch.Reached, base.Name, bh.Reached, fmtDur(ch.P99), base.Name, fmtDur(bh.P99),
		c.PeakInFlight, base.Name, base.PeakInFlight)
}

// fmtDur rounds d for a table cell.
func fmtDur(d time.Duration) string {
	switch {
	case d < 10*time.Microsecond:
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
