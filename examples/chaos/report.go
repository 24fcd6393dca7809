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
	Breaker  string           // its key: the service's name
	From, To resilience.Label // circuitbreaker.State
	Reason   resilience.Label // circuitbreaker.Reason
}

// breakerView is what the story says about the meshless client's breaker:
// the keys of client.yaml's defaults.circuitBreaker, or grpcmw's defaults.
type breakerView struct {
	Window, MinCalls, Probes int
	FailureRate, SlowRate    float64
	SlowCall, OpenWait       time.Duration
}

func viewBreaker(cfg *grpcmw.Config) breakerView {
	v := breakerView{Window: 100, MinCalls: 20, Probes: 2, FailureRate: 80, SlowRate: 100, SlowCall: 2 * time.Second, OpenWait: 30 * time.Second}
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
	groupW = 42 // one client's columns, with the space before them
)

func (s *story) header() {
	var sched []string
	for _, p := range s.cfg.Schedule {
		sched = append(sched, fmt.Sprintf("%s %v", p, p.Duration))
	}
	v := wordsOf(s.cfg.Transport)
	fmt.Fprintf(s.w, "chaos: %d %s clients call their own backend %d times a second each, every call in its own goroutine;\n"+
		"half of the calls look up an item that does not exist (%s, a business answer)\n",
		len(s.clients), v.proto, s.cfg.Rate, v.notFound)
	for _, c := range s.clients {
		fmt.Fprintf(s.w, "  %-9s %s\n", c.name, c.about)
	}
	fmt.Fprintf(s.w, "  %-9s %s\n", "schedule", strings.Join(sched, " → "))
	fmt.Fprintf(s.w, "  %-9s per client, since the line before: calls started, and calls that ended ok, %s,\n"+
		"  %-9s failed or rejected by meshless itself; then the client's calls in flight (each a goroutine)\n"+
		"  %-9s now; last, the goroutines of the whole process (both clients, both backends, the runtime)\n\n", "columns", v.notFound, "", "")
	fmt.Fprintln(s.w, "  "+strings.ReplaceAll(strings.TrimSpace(s.cfg.ClientYAML), "\n", "\n  "))
	fmt.Fprintln(s.w)
	fmt.Fprintf(s.w, "%*s", leftW, "")
	for _, c := range s.clients {
		fmt.Fprintf(s.w, " %s", center(c.name, groupW-1))
	}
	fmt.Fprintf(s.w, " %s", center("process", 11))
	fmt.Fprintf(s.w, "\n%9s  %-10s", "time", "phase")
	for range s.clients {
		fmt.Fprintf(s.w, " %5s %4s %9s %4s %4s %9s", "calls", "ok", v.notFound, "fail", "rej", "in-flight")
	}
	fmt.Fprintf(s.w, " %11s\n", "goroutines")
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
		fmt.Fprintf(s.w, " %5d %4d %9d %4d %4d %9d", t.Calls, t.OK, t.NotFound, t.Failed, t.Rejected(), inflight)
	}
	fmt.Fprintf(s.w, " %11d\n", runtime.NumGoroutine())
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
	case tr.From == circuitbreaker.StateHalfOpen && tr.To == circuitbreaker.StateOpen && tr.Reason == circuitbreaker.ReasonHalfOpenTimeout:
		return "the probe took longer than maxWaitDurationInHalfOpenState; rejecting calls again, the wait doubled up to maxWaitDurationInOpenState"
	case tr.From == circuitbreaker.StateHalfOpen && tr.To == circuitbreaker.StateOpen:
		return "the probes failed; rejecting calls again, the wait doubled up to maxWaitDurationInOpenState"
	case tr.Reason == circuitbreaker.ReasonFailureRate:
		return fmt.Sprintf("%g%% or more of the last %d attempts failed; rejecting calls for %v", b.FailureRate, b.Window, b.OpenWait)
	case tr.Reason == circuitbreaker.ReasonSlowCallRate:
		return fmt.Sprintf("%g%% or more of the last %d attempts took over %v; rejecting calls for %v", b.SlowRate, b.Window, b.SlowCall, b.OpenWait)
	case tr.Reason == circuitbreaker.ReasonWaitElapsed:
		probes := fmt.Sprintf("%d probes", b.Probes)
		if b.Probes == 1 {
			probes = "1 probe"
		}
		return fmt.Sprintf("open for %v; letting %s through", (tr.At - s.opened[tr.Breaker]).Round(10*time.Millisecond), probes)
	case tr.Reason == circuitbreaker.ReasonProbesSucceeded:
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
	Rates       []float64 // calls per second per client, by phase
	Capacity    capacity
	Timeout     time.Duration
	Clients     []clientSummary
	Verdicts    []verdict // by phase: the first client against the last
	Transitions []transition
	Interrupted bool   // the run's context ended before the schedule did
	Transport   string // what the clients spoke: "grpc" or "http"
}

type clientSummary struct {
	Name         string
	Total        result
	Phases       []result // by index in the schedule
	PeakInFlight int      // the client's calls, each a goroutine
	PeakBackend  int      // the backend's handlers running at once
	Shed         int      // requests the backend shed, its queue full
}

// summarize reads the clients' stats once every call is over.
func summarize(cfg config, clients []*client, trs []transition, elapsed time.Duration) summary {
	sum := summary{Elapsed: elapsed, Schedule: cfg.Schedule, Capacity: cfg.Capacity, Timeout: cfg.Timeout, Transitions: trs, Transport: cfg.Transport}
	for _, p := range cfg.Schedule {
		sum.Rates = append(sum.Rates, cfg.rate(p))
	}
	for _, c := range clients {
		st := c.st
		st.mu.Lock()
		cs := clientSummary{Name: c.name, PeakInFlight: st.peak, PeakBackend: int(c.backend.peak.Load()), Shed: int(c.backend.shed.Load())}
		var all tally
		var lat []time.Duration
		for i := range cfg.Schedule {
			all.add(st.phases[i])
			lat = append(lat, st.lat[i]...)
			cs.Phases = append(cs.Phases, measure(st.phases[i], slices.Clone(st.lat[i])))
		}
		cs.Total = measure(all, lat)
		st.mu.Unlock()
		sum.Clients = append(sum.Clients, cs)
	}
	if len(sum.Clients) >= 2 {
		a, b := sum.Clients[0], sum.Clients[len(sum.Clients)-1]
		for i := range cfg.Schedule {
			sum.Verdicts = append(sum.Verdicts, judge(a.Name, b.Name, a.Phases[i], b.Phases[i]))
		}
	}
	return sum
}

// SuccessRate is the share of the calls answered OK or NOT_FOUND, in
// percent; 0 without calls.
func (r result) SuccessRate() float64 {
	if r.Calls == 0 {
		return 0
	}
	return 100 * float64(r.Answered()) / float64(r.Calls)
}

// Amplification is the requests the backend received per call made.
func (r result) Amplification() float64 {
	if r.Calls == 0 {
		return 0
	}
	return float64(r.Reached) / float64(r.Calls)
}

// The margins within which judge calls two clients even on a criterion.
const (
	successMargin = 2.0  // points of success rate
	relMargin     = 0.10 // of the larger amplification or p99
	ampMargin     = 0.05 // backend requests per call, at least
	p99Margin     = time.Millisecond
)

// verdict says which of two clients did better in a phase.
type verdict struct {
	Winner string // a client's name, or "tie"
	Why    string
}

// verdictRule states, for the summary, how judge decides; notFound is the
// transport's business answer.
func verdictRule(notFound string) string {
	return "who did better: the higher success rate (OK or " + notFound + "; a tie within 2 points); on a tie,\n" +
		"fewer backend requests per call (a tie within 10 %); then the lower p99 (a tie within 10 % or 1ms)"
}

// words are how a transport names the calls' outcomes.
type words struct {
	proto    string // the protocol
	notFound string // the business answer half of the calls get
	failed   string // the failures a bare client sees
}

func wordsOf(transport string) words {
	if transport == transportHTTP {
		return words{"HTTP", "404", "503, timeouts…"}
	}
	return words{"gRPC", "NOT_FOUND", "UNAVAILABLE, DEADLINE_EXCEEDED…"}
}

// judge compares a and b, the results of the clients named na and nb in one
// phase, by the criteria verdictRule states, in that order. When a later
// criterion favours the loser beyond its margin, Why says so too.
func judge(na, nb string, a, b result) verdict {
	if a.Calls == 0 || b.Calls == 0 {
		return verdict{Winner: "tie", Why: "no calls"}
	}
	type criterion struct {
		name   string
		better int // 1: a better, -1: b better, 0: tie
		va, vb string
	}
	cmp := func(x, y, margin float64, higher bool) int {
		switch {
		case x-y > margin:
			if higher {
				return 1
			}
			return -1
		case y-x > margin:
			if higher {
				return -1
			}
			return 1
		}
		return 0
	}
	aa, ab := a.Amplification(), b.Amplification()
	pa, pb := float64(a.P99), float64(b.P99)
	cs := []criterion{
		{"success", cmp(a.SuccessRate(), b.SuccessRate(), successMargin, true),
			fmt.Sprintf("%.1f%%", a.SuccessRate()), fmt.Sprintf("%.1f%%", b.SuccessRate())},
		{"backend requests per call", cmp(aa, ab, max(relMargin*max(aa, ab), ampMargin), false),
			fmt.Sprintf("%.2f", aa), fmt.Sprintf("%.2f", ab)},
		{"p99", cmp(pa, pb, max(relMargin*max(pa, pb), float64(p99Margin)), false),
			fmtDur(a.P99), fmtDur(b.P99)},
	}
	for i, c := range cs {
		if c.better == 0 {
			continue
		}
		win, lose, vw, vl := na, nb, c.va, c.vb
		if c.better < 0 {
			win, lose, vw, vl = nb, na, c.vb, c.va
		}
		v := verdict{Winner: win, Why: fmt.Sprintf("%s %s against %s's %s", c.name, vw, lose, vl)}
		var but []string
		for _, l := range cs[i+1:] {
			if l.better == -c.better {
				lw, ll := l.vb, l.va
				if l.better > 0 {
					lw, ll = l.va, l.vb
				}
				but = append(but, fmt.Sprintf("%s %s against %s", l.name, lw, ll))
			}
		}
		if len(but) > 0 {
			v.Why += fmt.Sprintf(" (%s did better on %s)", lose, strings.Join(but, ", "))
		}
		return v
	}
	return verdict{Winner: "tie", Why: fmt.Sprintf("success %s and %s, backend requests per call %s and %s, p99 %s and %s",
		cs[0].va, cs[0].vb, cs[1].va, cs[1].vb, cs[2].va, cs[2].vb)}
}

func (s summary) print(w io.Writer) {
	ran := "ran"
	if s.Interrupted {
		ran = "interrupted after"
	}
	fmt.Fprintf(w, "\nsummary: %s %v, a %v deadline per call (bare) or attempt (meshless); each backend serves\n"+
		"%d calls at a time, %v each (%.0f calls a second), queues %d more and sheds the rest\n\n",
		ran, s.Elapsed.Round(10*time.Millisecond), s.Timeout, s.Capacity.Workers, s.Capacity.Work, s.Capacity.perSecond(), s.Capacity.Queue)
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
	v := wordsOf(s.Transport)
	row("", func(c clientSummary) string { return c.Name })
	row("calls made", n(func(r result) int { return r.Calls }, total))
	row("  requests the backend received (retries too)", n(func(r result) int { return r.Reached }, total))
	row("  answered OK", n(func(r result) int { return r.OK }, total))
	row("  answered "+v.notFound+" (a business answer)", n(func(r result) int { return r.NotFound }, total))
	row("  failed ("+v.failed+")", n(func(r result) int { return r.Failed }, total))
	row("  rejected fast: breaker open (CIRCUIT_OPEN)", n(func(r result) int { return r.Open }, total))
	row("  rejected fast: throttled (THROTTLED)", n(func(r result) int { return r.Throttled }, total))
	row("  rejected fast: bulkhead full (BULKHEAD_FULL)", n(func(r result) int { return r.Full }, total))
	row("latency p50", d(func(r result) time.Duration { return r.P50 }, total))
	row("latency p99", d(func(r result) time.Duration { return r.P99 }, total))
	row("latency max", d(func(r result) time.Duration { return r.Max }, total))
	row("peak in-flight calls (goroutines)", func(c clientSummary) string { return fmt.Sprint(c.PeakInFlight) })
	row("peak calls running in the backend", func(c clientSummary) string { return fmt.Sprint(c.PeakBackend) })
	row("requests the backend shed (queue full)", func(c clientSummary) string { return fmt.Sprint(c.Shed) })
	if len(s.Verdicts) > 0 {
		fmt.Fprintf(w, "\n  %s\n", strings.ReplaceAll(verdictRule(v.notFound), "\n", "\n  "))
	}
	for i, p := range s.Schedule {
		if p.Duration == 0 {
			continue
		}
		ph := func(c clientSummary) result { return c.Phases[i] }
		fmt.Fprintf(w, "  while %s (%.0f calls a second)\n", p, s.Rates[i])
		row("  calls made", n(func(r result) int { return r.Calls }, ph))
		row("  success (OK or "+v.notFound+")", func(c clientSummary) string { return fmt.Sprintf("%.1f%%", c.Phases[i].SuccessRate()) })
		row("  failed", n(func(r result) int { return r.Failed }, ph))
		row("  rejected fast", n(func(r result) int { return r.Rejected() }, ph))
		row("  latency p50", d(func(r result) time.Duration { return r.P50 }, ph))
		row("  latency p99", d(func(r result) time.Duration { return r.P99 }, ph))
		row("  requests the backend received", n(func(r result) int { return r.Reached }, ph))
		row("  backend requests per call", func(c clientSummary) string { return fmt.Sprintf("%.2f", c.Phases[i].Amplification()) })
		if i < len(s.Verdicts) {
			v := s.Verdicts[i]
			if v.Winner == "tie" {
				fmt.Fprintf(w, "  → tie: %s\n", v.Why)
			} else {
				fmt.Fprintf(w, "  → %s did better: %s\n", v.Winner, v.Why)
			}
		}
	}

	hung := slices.IndexFunc(s.Schedule, func(p phase) bool { return p.Behaviour == hanging && p.Duration > 0 })
	if len(s.Clients) < 2 || hung < 0 {
		return
	}
	base, c := s.Clients[0], s.Clients[len(s.Clients)-1]
	bh, ch := base.Phases[hung], c.Phases[hung]
	fmt.Fprintf(w, "\nWhile the backend hung, %s sent it %d requests (%s: %d) and answered half of its callers\n"+
		"within %s (%s: %s), 99%% within %s (%s: %s); its calls in flight peaked at %d (%s: %d).\n",
		c.Name, ch.Reached, base.Name, bh.Reached, fmtDur(ch.P50), base.Name, fmtDur(bh.P50), fmtDur(ch.P99), base.Name, fmtDur(bh.P99),
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
