// This file tells the events scenario: its running log, and its summary,
// counted from what each backend served.

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/meshless/meshless/deadletter"
)

// eventsStory writes the events scenario's running log. Only its run loop
// calls it.
type eventsStory struct {
	w         io.Writer
	cfg       eventsConfig
	consumers []*eventConsumer
	rec       *dlRecorder
	brk       *breakerLog
	path      string
}

func (s *eventsStory) header() {
	var sched []string
	for _, p := range s.cfg.Phases {
		sched = append(sched, fmt.Sprintf("%s %v", p.Name, p.Duration))
	}
	fmt.Fprintf(s.w, "events: a broker's events, %d a second about %d keys (order matters per key), each handled with one gRPC\n"+
		"call to a backend that fails (UNAVAILABLE at once), then recovers; %d of them the backend can never handle\n"+
		"(INTERNAL: a poison event). Each consumer has its own backend, which counts what it handled.\n",
		s.cfg.Rate, s.cfg.Keys, s.cfg.Poison)
	for _, c := range s.consumers {
		fmt.Fprintf(s.w, "  %-9s %s\n", c.name, c.about)
	}
	fmt.Fprintf(s.w, "  %-9s %s\n", "queue", s.path+" (removed at the end of the run)")
	fmt.Fprintf(s.w, "  %-9s %s\n", "schedule", strings.Join(sched, " → "))
	fmt.Fprintf(s.w, "  %-9s since the start: events the backend handled, given up by the broker (lost), requests the\n"+
		"  %-9s backend received; for meshless also the events kept (DEFERRED), waiting in the queue, the breaker\n\n", "columns", "")
	fmt.Fprintln(s.w, "  "+strings.ReplaceAll(strings.TrimSpace(s.cfg.ClientYAML), "\n", "\n  "))
	fmt.Fprintln(s.w)
	fmt.Fprintf(s.w, "%9s  %-14s %9s │ %-23s │ %s\n", "", "", "", "bare", "meshless")
	fmt.Fprintf(s.w, "%9s  %-14s %9s │ %7s %6s %8s │ %7s %6s %8s %7s %8s  %s\n", "time", "phase", "published",
		"handled", "lost", "requests", "handled", "lost", "requests", "kept", "waiting", "breaker")
}

func (s *eventsStory) phase(el time.Duration, p int) {
	ph := s.cfg.Phases[p]
	what := "the backend handles every event but the poison ones"
	if ph.Behaviour == failing {
		what = "the backend answers UNAVAILABLE at once"
	}
	fmt.Fprintf(s.w, "%8.3fs  ▶ phase %d/%d, %s for %v: %s\n", el.Seconds(), p+1, len(s.cfg.Phases), ph.Name, ph.Duration, what)
}

func (s *eventsStory) status(el time.Duration, phase string, published int) {
	fmt.Fprintf(s.w, "%8.3fs  %-14s %9d", el.Seconds(), phase, published)
	for _, c := range s.consumers {
		handled, requests := c.backend.counts()
		fmt.Fprintf(s.w, " │ %7d %6d %8d", handled, c.lost.Load(), requests)
	}
	fmt.Fprintf(s.w, " %7d %8d  %s\n", s.consumers[1].deferred.Load(), s.rec.waiting(), s.brk.state())
}

func (s *eventsStory) settling(el time.Duration, waiting int) {
	fmt.Fprintf(s.w, "%8.3fs  ▶ draining: no more events; %d wait in meshless's queue, and the run waits up to %v for them\n", el.Seconds(), waiting, s.cfg.Settle)
}

// counts is how many distinct events the backend handled, and the requests
// it received.
func (b *eventBackend) counts() (handled, requests int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range b.seen {
		if n > 0 {
			handled++
		}
	}
	return handled, b.requests
}

// eventsResult is what one consumer's backend saw.
type eventsResult struct {
	Name               string
	Handled            int // distinct events the backend handled
	Live, Replayed     int // of them, handled first by a live call, by a replay
	Deferred           int // events the consumer acked as kept (DEFERRED)
	Lost               int // events the broker gave up on after its deliveries
	Redelivered        int // deliveries after an event's first
	Duplicates         int // handlings of an event already handled
	ReplayIDDuplicates int // handlings with a replay id already handled
	OutOfOrder         int // events handled after a newer one of their key
	OutOfOrderReplays  int // replays handled after a newer replay of their key
	Requests           int // requests the backend received
	HandledAt          []time.Duration
	RequestsAt         []time.Duration
}

// eventsSummary is what the events scenario found.
type eventsSummary struct {
	Phases     schedule
	Rate, Keys int
	Deliveries int
	Published  int
	Poison     int
	PublishAt  []time.Duration
	Recovery   time.Duration // the backend recovered, since the start; -1: it did not fail
	StreamEnd  time.Duration // the last event was published
	Elapsed    time.Duration // the run, the wait for the queue included
	Consumers  []eventsResult
	// meshless's queue, as its listener heard it.
	Queue       map[string]int // by deadletter event
	Peak        int            // the most entries waiting at once
	Left        int            // still waiting at the end
	DeferredAt  []time.Duration
	ResolvedAt  []time.Duration // replayed, parked, expired or dropped
	StuckAt     []time.Duration // failed replays, and those that parked their entry
	Closed      time.Duration   // meshless's breaker closed after the recovery, since the start; -1: it did not
	Drained     time.Duration   // the queue emptied after the recovery, since the start; -1: it did not
	HeldUp      time.Duration   // of the drain, the time spent behind failed replays (the poison event)
	Breaker     []change
	Interrupted bool
}

func summarizeEvents(cfg eventsConfig, consumers []*eventConsumer, rec *dlRecorder, brk *breakerLog, pub *publisher, streamEnd, elapsed time.Duration) eventsSummary {
	sum := eventsSummary{Phases: cfg.Phases, Rate: cfg.Rate, Keys: cfg.Keys, Deliveries: cfg.Deliveries, Published: pub.published(),
		PublishAt: slices.Clone(pub.at), Recovery: cfg.recovery(), StreamEnd: streamEnd, Elapsed: elapsed, Closed: -1, Drained: -1}
	for _, c := range consumers {
		sum.Consumers = append(sum.Consumers, c.result())
	}
	sum.Poison = len(pub.poisoned)
	rec.mu.Lock()
	sum.Queue = map[string]int{}
	for k, v := range rec.counts {
		sum.Queue[k] = v
	}
	sum.Peak, sum.Left = rec.peak, rec.backlog
	sum.DeferredAt, sum.ResolvedAt, sum.StuckAt = slices.Clone(rec.at[recDeferred]), slices.Clone(rec.at[recResolved]), slices.Clone(rec.at[recStuck])
	if sum.Recovery >= 0 && rec.backlog <= 0 && rec.emptied >= sum.Recovery {
		sum.Drained = rec.emptied
	}
	if stuck := rec.at[recStuck]; sum.Drained >= 0 && len(stuck) > 0 && stuck[0] >= sum.Recovery {
		// Behind a failed replay the queue waits (a backoff, until the
		// entry is parked): from the first one to the first replay after
		// the last.
		next := sum.Drained
		for _, t := range rec.at[recReplayed] {
			if t > stuck[len(stuck)-1] {
				next = t
				break
			}
		}
		sum.HeldUp = next - stuck[0]
	}
	rec.mu.Unlock()
	sum.Breaker = brk.changes()
	for _, ch := range sum.Breaker {
		if ch.State == stateClosed && sum.Recovery >= 0 && ch.At >= sum.Recovery {
			sum.Closed = ch.At
			break
		}
	}
	return sum
}

// result counts what c's backend handled.
func (c *eventConsumer) result() eventsResult {
	b := c.backend
	b.mu.Lock()
	defer b.mu.Unlock()
	r := eventsResult{Name: c.name, Deferred: int(c.deferred.Load()), Lost: int(c.lost.Load()), Redelivered: int(c.redelivered.Load()),
		Requests: b.requests, RequestsAt: slices.Clone(b.requestsAt)}
	for _, n := range b.seen {
		if n > 0 {
			r.Handled++
			r.Duplicates += int(n) - 1
		}
	}
	for _, n := range b.replayIDs {
		r.ReplayIDDuplicates += n - 1
	}
	first := make([]bool, b.limit)
	newest := map[int]int{}       // by key, the newest event handled
	newestReplay := map[int]int{} // by key, the newest replay handled
	for _, s := range b.served {
		if first[s.ID] {
			continue
		}
		first[s.ID] = true
		if len(r.HandledAt) < maxTallies {
			r.HandledAt = append(r.HandledAt, s.At)
		}
		if n, ok := newest[s.Key]; ok && n > s.Seq {
			r.OutOfOrder++
		} else {
			newest[s.Key] = s.Seq
		}
		if !s.Replay {
			r.Live++
			continue
		}
		r.Replayed++
		if n, ok := newestReplay[s.Key]; ok && n > s.Seq {
			r.OutOfOrderReplays++
		} else {
			newestReplay[s.Key] = s.Seq
		}
	}
	return r
}

// NotHandled is the events the backend never handled.
func (s eventsSummary) NotHandled(r eventsResult) int { return s.Published - r.Handled }

func (s eventsSummary) print(w io.Writer) {
	ran := ""
	if s.Interrupted {
		ran = " (interrupted)"
	}
	failed := ""
	for i, p := range s.Phases {
		if p.Behaviour == failing && p.Duration > 0 {
			failed = fmt.Sprintf("the backend failed for %v from %.3gs", p.Duration, s.Phases.start(i).Seconds())
			break
		}
	}
	fmt.Fprintf(w, "\nsummary (events)%s: %d events, %d a second about %d keys, %d of them poison; %s\n", ran, s.Published, s.Rate, s.Keys, s.Poison, failed)
	fmt.Fprintf(w, "  %-56s%12s%12s\n", "", "bare", "meshless")
	row := func(label string, cell func(r eventsResult, mesh bool) string) {
		fmt.Fprintf(w, "  %-56s", label)
		for i, r := range s.Consumers {
			fmt.Fprintf(w, "%12s", cell(r, i == 1))
		}
		fmt.Fprintln(w)
	}
	num := func(f func(r eventsResult) int) func(eventsResult, bool) string {
		return func(r eventsResult, _ bool) string { return fmt.Sprint(f(r)) }
	}
	meshOnly := func(v int) func(eventsResult, bool) string {
		return func(_ eventsResult, mesh bool) string {
			if !mesh {
				return "-"
			}
			return fmt.Sprint(v)
		}
	}
	row("events handled by the backend", num(func(r eventsResult) int { return r.Handled }))
	row("  first by a live call", num(func(r eventsResult) int { return r.Live }))
	row("  first by a replay from the dead-letter queue", func(r eventsResult, mesh bool) string {
		if !mesh {
			return "-"
		}
		return fmt.Sprint(r.Replayed)
	})
	row("events never handled", num(s.NotHandled))
	row(fmt.Sprintf("  given up by the broker after %d deliveries (lost)", s.Deliveries), num(func(r eventsResult) int { return r.Lost }))
	row("  parked in the dead-letter queue (for an operator)", meshOnly(s.Queue[deadletter.EventParked]))
	row("  expired in the dead-letter queue (maxAge)", meshOnly(s.Queue[deadletter.EventExpired]))
	row("  still waiting in the queue at the end", meshOnly(s.Left))
	row("duplicates the backend saw (an event id handled again)", num(func(r eventsResult) int { return r.Duplicates }))
	row("events handled after a newer one of their key", num(func(r eventsResult) int { return r.OutOfOrder }))
	row("  replays handled after a newer replay of their key", func(r eventsResult, mesh bool) string {
		if !mesh {
			return "-"
		}
		return fmt.Sprint(r.OutOfOrderReplays)
	})
	row("requests that reached the backend", num(func(r eventsResult) int { return r.Requests }))
	row("  per event published", func(r eventsResult, _ bool) string {
		if s.Published == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(r.Requests)/float64(s.Published))
	})
	q := s.Queue
	fmt.Fprintf(w, "  meshless's queue: %d kept (DEFERRED), %d refused, %d replayed, %d failed replays, %d parked, %d expired; at most %d waiting\n",
		q[deadletter.EventDeferred], q[deadletter.EventRefused], q[deadletter.EventReplayed], q[deadletter.EventFailed],
		q[deadletter.EventParked], q[deadletter.EventExpired], s.Peak)
	if s.Recovery >= 0 {
		closed := "did not close"
		if s.Closed >= 0 {
			closed = fmt.Sprintf("closed %.2fs after it", (s.Closed - s.Recovery).Seconds())
		}
		drained := "did not drain before the run ended"
		switch {
		case s.Drained >= 0 && s.HeldUp > 0:
			drained = fmt.Sprintf("drained %.2fs after it (%.2fs of it behind failed replays: the poison event, until parked)", (s.Drained - s.Recovery).Seconds(), s.HeldUp.Seconds())
		case s.Drained >= 0:
			drained = fmt.Sprintf("drained %.2fs after it", (s.Drained - s.Recovery).Seconds())
		case s.Peak == 0:
			drained = "held nothing"
		}
		fmt.Fprintf(w, "  the backend recovered at %.2fs; meshless's breaker %s, its queue %s\n", s.Recovery.Seconds(), closed, drained)
	}
	if len(s.Consumers) == 2 {
		b, m := s.Consumers[0], s.Consumers[1]
		fmt.Fprintf(w, "  → bare lost %d events and sent the backend %.2f requests per event; meshless lost %d, kept %d for an operator, %.2f requests per event;\n"+
			"    its replays kept their order per key (%d out of order), but live events overtook them: %d events came after a newer one of their key\n",
			b.Lost, perEvent(b.Requests, s.Published), m.Lost, s.Queue[deadletter.EventParked], perEvent(m.Requests, s.Published), m.OutOfOrderReplays, m.OutOfOrder)
	}
}

func perEvent(n, events int) float64 {
	if events == 0 {
		return 0
	}
	return float64(n) / float64(events)
}

// The events scenario's tallies on its track.
const (
	tallyPublished = "published"
	tallyDeferred  = "deferred"
	tallyResolved  = "resolved" // out of the queue: replayed, parked, expired or dropped
	tallyStuck     = "stuck"    // a failed replay, or one that parked its entry
)

func tallyHandled(consumer string) string  { return consumer + " handled" }
func tallyRequests(consumer string) string { return consumer + " requests" }

// draw records the run on k: the phases (and the wait for the queue after
// the last event), the events published and handled, the requests each
// backend received, the queue's entries in and out, and meshless's breaker.
func (s eventsSummary) draw(k *track, about []string) {
	if k == nil {
		return
	}
	sched := slices.Clone(s.Phases)
	if wait := s.Elapsed - s.Phases.total(); wait > k.bin/2 {
		sched = append(sched, phase{Name: "draining", Behaviour: healthy, Duration: wait})
	}
	k.phases(sched, about)
	tally := func(name string, ts []time.Duration) {
		for _, t := range ts {
			k.tally(name, t)
		}
	}
	tally(tallyPublished, s.PublishAt)
	for _, r := range s.Consumers {
		tally(tallyHandled(r.Name), r.HandledAt)
		tally(tallyRequests(r.Name), r.RequestsAt)
	}
	tally(tallyDeferred, s.DeferredAt)
	tally(tallyResolved, s.ResolvedAt)
	tally(tallyStuck, s.StuckAt)
	k.state("breaker", stateClosed)
	for _, ch := range s.Breaker {
		k.change("breaker", stateClosed, ch.At, ch.State)
	}
}
