// This file holds both ends of a call: the dependency, an in-process stand-in
// for a remote service whose behaviour a schedule of phases moves from healthy
// to failing to hanging and back; and the clients that call it, each counting
// its own calls.

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
)

// behaviour is how the dependency answers during a phase.
type behaviour int32

const (
	healthy behaviour = iota // answers after a short latency
	failing                  // answers at once with errUnavailable
	hanging                  // never answers: the call waits for its context to end
)

func (b behaviour) String() string {
	switch b {
	case healthy:
		return "healthy"
	case failing:
		return "failing"
	case hanging:
		return "hanging"
	}
	return fmt.Sprintf("behaviour(%d)", int32(b))
}

// errUnavailable is what a failing dependency answers.
var errUnavailable = errors.New("unavailable")

// dependency is what the clients call: in a real service a gRPC or HTTP
// backend; here an in-process fake whose behaviour the chaos schedule sets.
// It is safe for concurrent use.
type dependency struct {
	latency time.Duration // how long a healthy answer takes
	mode    atomic.Int32  // a behaviour
}

func newDependency(latency time.Duration) *dependency {
	return &dependency{latency: latency}
}

// set changes how the dependency answers the calls that start from now on.
func (d *dependency) set(b behaviour) { d.mode.Store(int32(b)) }

// Call is one request to the dependency. It honours ctx as a well-behaved
// client library does: when ctx ends first, Call returns ctx.Err().
func (d *dependency) Call(ctx context.Context) error {
	switch behaviour(d.mode.Load()) {
	case failing:
		return errUnavailable
	case hanging:
		<-ctx.Done()
		return ctx.Err()
	}
	t := time.NewTimer(d.latency)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// phase is one step of the chaos schedule.
type phase struct {
	Behaviour behaviour
	Duration  time.Duration
}

func (p phase) String() string { return p.Behaviour.String() }

// describe says, for the story, what the dependency does in the phase.
func (p phase) describe(latency time.Duration) string {
	switch p.Behaviour {
	case healthy:
		return fmt.Sprintf("the dependency answers in %v", latency)
	case failing:
		return fmt.Sprintf("the dependency answers %q at once", errUnavailable)
	case hanging:
		return "the dependency accepts calls and never answers"
	}
	return ""
}

// schedule is the sequence of phases, run one after the other.
type schedule []phase

// at returns the index of the phase that runs at elapsed since the start, or
// len(s) once the schedule is over. Phases of zero length are skipped.
func (s schedule) at(elapsed time.Duration) int {
	var end time.Duration
	for i, p := range s {
		end += p.Duration
		if elapsed < end {
			return i
		}
	}
	return len(s)
}

// total is the length of the whole schedule.
func (s schedule) total() time.Duration {
	var d time.Duration
	for _, p := range s {
		d += p.Duration
	}
	return d
}

// lengthOf is how long the schedule has the dependency behave as b.
func (s schedule) lengthOf(b behaviour) time.Duration {
	var d time.Duration
	for _, p := range s {
		if p.Behaviour == b {
			d += p.Duration
		}
	}
	return d
}

// client is one way of calling the dependency: a column of the story.
// Adding a client (retries, a bulkhead...) is adding one to newClients.
type client struct {
	name  string
	about string           // one line for the story's header
	dep   *dependency      // its own instance, so that its load is its own
	chain resilience.Chain // the policies around each call, outermost first
	st    *stats
}

// newClients builds the clients; obs receives their policies' events.
func newClients(cfg config, obs resilience.Observer) ([]*client, error) {
	cb, err := circuitbreaker.New(append(cfg.Breaker.options(),
		circuitbreaker.WithName("meshless"),
		circuitbreaker.WithObserver(obs),
	)...)
	if err != nil {
		return nil, err
	}
	n := len(cfg.Schedule)
	return []*client{{
		name:  "bare",
		about: fmt.Sprintf("a %v timeout per call, nothing else", cfg.Timeout),
		dep:   newDependency(cfg.Latency),
		chain: resilience.NewChain(),
		st:    newStats(n),
	}, {
		name:  "meshless",
		about: "the same, behind a meshless circuit breaker",
		dep:   newDependency(cfg.Latency),
		chain: resilience.NewChain(cb),
		st:    newStats(n),
	}}, nil
}

// call makes one call through c's policies, with a deadline of timeout on
// the call to the dependency itself, and records it under phase p.
func (c *client) call(ctx context.Context, p int, timeout time.Duration) {
	defer c.st.end()
	reached := false
	start := time.Now()
	err := c.chain.Execute(ctx, func(ctx context.Context) error {
		reached = true
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return c.dep.Call(ctx)
	})
	c.st.record(p, time.Since(start), reached, err)
}

// tally counts calls. Calls = Reached + Rejected once every call is over;
// Reached = OK + Failed.
type tally struct {
	Calls    int // started
	Reached  int // got to the dependency
	OK       int
	Failed   int
	Rejected int // refused by a policy without reaching the dependency
}

func (t *tally) add(u tally) {
	t.Calls += u.Calls
	t.Reached += u.Reached
	t.OK += u.OK
	t.Failed += u.Failed
	t.Rejected += u.Rejected
}

// stats is one client's record of its calls, per phase of the schedule.
type stats struct {
	mu       sync.Mutex
	phases   []tally
	lat      [][]time.Duration // per phase, every call's latency
	interval tally             // since the last status line
	inflight int               // calls started and not over: their goroutines
	peak     int
}

func newStats(phases int) *stats {
	return &stats{phases: make([]tally, phases), lat: make([][]time.Duration, phases)}
}

// begin counts a call about to start in phase p.
func (s *stats) begin(p int) {
	s.mu.Lock()
	s.phases[p].Calls++
	s.interval.Calls++
	s.inflight++
	s.peak = max(s.peak, s.inflight)
	s.mu.Unlock()
}

// record counts how a call started in phase p ended.
func (s *stats) record(p int, d time.Duration, reached bool, err error) {
	var t tally
	switch {
	case err == nil:
		t.OK = 1
	case resilience.IsRejection(err):
		t.Rejected = 1
	default:
		t.Failed = 1
	}
	if reached {
		t.Reached = 1
	}
	s.mu.Lock()
	s.phases[p].add(t)
	s.interval.add(t)
	s.lat[p] = append(s.lat[p], d)
	s.mu.Unlock()
}

// end is the call's goroutine returning.
func (s *stats) end() {
	s.mu.Lock()
	s.inflight--
	s.mu.Unlock()
}

// take returns the counts since the last take and the calls in flight now.
func (s *stats) take() (tally, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.interval
	s.interval = tally{}
	return t, s.inflight
}

// inFlight returns the calls in flight now.
func (s *stats) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight
}
