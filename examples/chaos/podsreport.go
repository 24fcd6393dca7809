// This file tells the pods scenario: its running log and its summary.

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/meshless/meshless/grpcmw"
)

// podsStory writes the pods scenario's running log. Only its run loop calls
// it.
type podsStory struct {
	w       io.Writer
	cfg     podsConfig
	pods    []*pod
	clients []*podClient
	chain   *grpcmw.Chain
	seen    []int // per client, calls already told of
}

func (s *podsStory) header() {
	var names, sched []string
	for _, p := range s.pods {
		names = append(names, p.name+" "+p.addr)
	}
	for _, p := range s.cfg.Phases {
		sched = append(sched, fmt.Sprintf("%s %v", p.Name, p.Duration))
	}
	fmt.Fprintf(s.w, "pods: %d gRPC pods serve the same service (%v a call); a manual resolver gives both clients all %d addresses,\n"+
		"and each client sends %d calls a second, every call in its own goroutine; half of them look up an item\n"+
		"that does not exist (NOT_FOUND, a business answer)\n", len(s.pods), s.cfg.Work, len(s.pods), s.cfg.Rate)
	fmt.Fprintf(s.w, "  %-9s %s\n", "pods", strings.Join(names, ", "))
	fmt.Fprintf(s.w, "  %-9s plain round_robin, a %v deadline per call, nothing else\n", "bare", s.cfg.Timeout)
	fmt.Fprintf(s.w, "  %-9s round_robin under meshless's outlier balancer (pods.yaml below), no retry, no breaker\n", "meshless")
	fmt.Fprintf(s.w, "  %-9s %s\n", "schedule", strings.Join(sched, " → "))
	fmt.Fprintf(s.w, "  %-9s per client, calls that ended since the line before, ok (OK or NOT_FOUND) and failed, and\n"+
		"  %-9s the share of them the bad pod answered; last, the pods meshless has ejected now\n\n", "columns", "")
	fmt.Fprintln(s.w, "  "+strings.ReplaceAll(strings.TrimSpace(s.cfg.ClientYAML), "\n", "\n  "))
	fmt.Fprintln(s.w)
	fmt.Fprintf(s.w, "%*s", leftW+2, "")
	for _, c := range s.clients {
		fmt.Fprintf(s.w, " %s", center(c.name, 27))
	}
	fmt.Fprintf(s.w, "\n%9s  %-12s", "time", "phase")
	for range s.clients {
		fmt.Fprintf(s.w, " %5s %5s %5s %9s", "calls", "ok", "fail", "bad pod")
	}
	fmt.Fprintf(s.w, "  %s\n", "ejected")
	s.seen = make([]int, len(s.clients))
}

func (s *podsStory) phase(el time.Duration, p int) {
	ph := s.cfg.Phases[p]
	fmt.Fprintf(s.w, "%8.3fs  ▶ phase %d/%d, %s for %v: %s\n", el.Seconds(), p+1, len(s.cfg.Phases), ph.Name, ph.Duration, s.describe(ph))
}

// describe says what the pods do in a phase.
func (s *podsStory) describe(ph podPhase) string {
	if ph.Bad < 0 || ph.Mode == podHealthy {
		return "every pod is healthy"
	}
	name := s.pods[ph.Bad].name
	switch ph.Mode {
	case podFailing:
		return name + " answers UNAVAILABLE at once; the other pods are healthy"
	case podSlow:
		return fmt.Sprintf("%s takes %v a call; the other pods are healthy", name, s.cfg.Slow)
	}
	return ""
}

// status prints each client's calls that ended since the last status line.
func (s *podsStory) status(el time.Duration, label string) {
	fmt.Fprintf(s.w, "%8.3fs  %-12s", el.Seconds(), label)
	for i, c := range s.clients {
		c.mu.Lock()
		calls := c.calls[s.seen[i]:]
		s.seen[i] = len(c.calls)
		var ok, failed, bad int
		for _, k := range calls {
			if k.OK {
				ok++
			} else {
				failed++
			}
			if b := s.cfg.Phases[k.Phase].Bad; b >= 0 && k.Pod == b && s.cfg.Phases[k.Phase].Mode != podHealthy {
				bad++
			}
		}
		c.mu.Unlock()
		fmt.Fprintf(s.w, " %5d %5d %5d %9s", len(calls), ok, failed, pct(bad, len(calls)))
	}
	var ej []string
	for _, a := range s.chain.Outlier().Ejected() {
		ej = append(ej, s.podName(a))
	}
	fmt.Fprintf(s.w, "  %s\n", strings.Join(ej, " "))
}

func (s *podsStory) podName(addr string) string {
	for _, p := range s.pods {
		if p.addr == addr {
			return p.name
		}
	}
	return addr
}

// ejection tells of an ejection or return and returns it.
func (s *podsStory) ejection(e ejection) ejection {
	if e.Returned {
		fmt.Fprintf(s.w, "%8.3fs  ↩ meshless returned %s to load balancing\n", e.At.Seconds(), s.podName(e.Addr))
	} else {
		fmt.Fprintf(s.w, "%8.3fs  ⊘ meshless ejected %s (%s)\n", e.At.Seconds(), s.podName(e.Addr), e.Reason)
	}
	return e
}

// pct is n of total in percent, for a table cell; "-" without a total.
func pct(n, total int) string {
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
}

// podWindow is a client's calls started in a stretch of a phase.
type podWindow struct {
	Calls, OK, ToBad int
	P99              time.Duration
}

func (w podWindow) SuccessRate() float64 { return ratio(w.OK, w.Calls) }
func (w podWindow) BadShare() float64    { return ratio(w.ToBad, w.Calls) }

func ratio(n, total int) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(n) / float64(total)
}

// podResult is a client's calls in one phase.
type podResult struct {
	Received []int     // requests each pod received, as the pods counted them
	All      podWindow // the whole phase
	Ejected  podWindow // the calls started once meshless had ejected the bad pod, if it did
}

// ReceivedShare is the share of the requests the pods received that pod i
// received, in percent.
func (r podResult) ReceivedShare(i int) float64 {
	total := 0
	for _, n := range r.Received {
		total += n
	}
	if i < 0 || i >= len(r.Received) {
		return 0
	}
	return ratio(r.Received[i], total)
}

// podsSummary is what a run of the pods scenario found.
type podsSummary struct {
	Elapsed     time.Duration
	Phases      []podPhase
	Pods        []string
	Clients     []string
	Results     [][]podResult   // by client, by phase
	EjectedAt   []time.Duration // by phase: when meshless first ejected its bad pod, since the phase's start; -1 if it did not
	Ejections   []ejection
	Interrupted bool
}

func summarizePods(cfg podsConfig, pods []*pod, clients []*podClient, ejs []ejection, elapsed time.Duration) podsSummary {
	sched := cfg.schedule()
	sum := podsSummary{Elapsed: elapsed, Phases: cfg.Phases, Ejections: ejs}
	for _, p := range pods {
		sum.Pods = append(sum.Pods, p.name)
	}
	for i, ph := range cfg.Phases {
		at := time.Duration(-1)
		from, to := sched.start(i), sched.start(i)+ph.Duration
		for _, e := range ejs {
			if !e.Returned && ph.Bad >= 0 && e.Pod == ph.Bad && e.At >= from && e.At < to {
				at = e.At - from
				break
			}
		}
		sum.EjectedAt = append(sum.EjectedAt, at)
	}
	for ci, c := range clients {
		sum.Clients = append(sum.Clients, c.name)
		c.mu.Lock()
		calls := slices.Clone(c.calls)
		c.mu.Unlock()
		var res []podResult
		for i, ph := range cfg.Phases {
			r := podResult{}
			for _, p := range pods {
				r.Received = append(r.Received, int(p.received[ci][i].Load()))
			}
			var all, ej []time.Duration
			for _, k := range calls {
				if k.Phase != i {
					continue
				}
				bad := ph.Bad >= 0 && ph.Mode != podHealthy && k.Pod == ph.Bad
				count(&r.All, &all, k, bad)
				if at := sum.EjectedAt[i]; at >= 0 && k.At >= sched.start(i)+at {
					count(&r.Ejected, &ej, k, bad)
				}
			}
			r.All.P99, r.Ejected.P99 = p99(all), p99(ej)
			res = append(res, r)
		}
		sum.Results = append(sum.Results, res)
	}
	return sum
}

func count(w *podWindow, lat *[]time.Duration, k podCall, bad bool) {
	w.Calls++
	if k.OK {
		w.OK++
	}
	if bad {
		w.ToBad++
	}
	*lat = append(*lat, k.Lat)
}

func p99(lat []time.Duration) time.Duration {
	slices.Sort(lat)
	return percentile(lat, 99)
}

func (s podsSummary) print(w io.Writer) {
	ran := "ran"
	if s.Interrupted {
		ran = "interrupted after"
	}
	fmt.Fprintf(w, "\nsummary (pods): %s %v; %d pods, one of them bad in some phases\n", ran, s.Elapsed.Round(10*time.Millisecond), len(s.Pods))
	row := func(label string, cell func(ci int) string) {
		fmt.Fprintf(w, "  %-48s", label)
		for ci := range s.Clients {
			fmt.Fprintf(w, "%22s", cell(ci))
		}
		fmt.Fprintln(w)
	}
	row("", func(ci int) string { return s.Clients[ci] })
	for i, ph := range s.Phases {
		if ph.Duration == 0 {
			continue
		}
		res := func(ci int) podResult { return s.Results[ci][i] }
		bad := ""
		if ph.Bad >= 0 && ph.Mode != podHealthy {
			bad = s.Pods[ph.Bad]
		}
		fmt.Fprintf(w, "  while %s", ph.Name)
		if bad != "" {
			fmt.Fprintf(w, " (the bad pod: %s)", bad)
		}
		fmt.Fprintln(w)
		row("  calls made", func(ci int) string { return fmt.Sprint(res(ci).All.Calls) })
		row("  requests each pod received ("+strings.Join(s.Pods, " ")+")", func(ci int) string {
			var ns []string
			for _, n := range res(ci).Received {
				ns = append(ns, fmt.Sprint(n))
			}
			return strings.Join(ns, " ")
		})
		if bad != "" {
			row("  the bad pod's share of requests", func(ci int) string { return fmt.Sprintf("%.1f%%", res(ci).ReceivedShare(ph.Bad)) })
		}
		row("  success (OK or NOT_FOUND)", func(ci int) string { return fmt.Sprintf("%.1f%%", res(ci).All.SuccessRate()) })
		row("  latency p99", func(ci int) string { return fmtDur(res(ci).All.P99) })
		if bad == "" {
			continue
		}
		at := s.EjectedAt[i]
		if at < 0 {
			fmt.Fprintf(w, "    meshless did not eject %s in this phase\n", bad)
			continue
		}
		fmt.Fprintf(w, "    once meshless had ejected %s (%v into the phase), the calls started since:\n", bad, at.Round(time.Millisecond))
		row("    the bad pod's share of calls", func(ci int) string { return fmt.Sprintf("%.1f%%", res(ci).Ejected.BadShare()) })
		row("    success (OK or NOT_FOUND)", func(ci int) string { return fmt.Sprintf("%.1f%%", res(ci).Ejected.SuccessRate()) })
		row("    latency p99", func(ci int) string { return fmtDur(res(ci).Ejected.P99) })
	}
}
