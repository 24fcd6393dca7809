package circuitbreaker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshless/meshless/internal/breakerhooks"
	"github.com/meshless/meshless/internal/coord"
	"github.com/meshless/meshless/internal/timely"
	"github.com/meshless/meshless/resilience"
)

// The engine skips a call's end reading when a deadline proves the call
// fast (internal/engine's runPlain); it asks the breaker's threshold here.
func init() {
	breakerhooks.SlowThreshold = func(b any) (time.Duration, bool) {
		br := b.(*Breaker)
		return br.config().SlowCallDurationThreshold, br.rec != nil
	}
	breakerhooks.OnClosed = func(b any, f func()) { b.(*Breaker).onClosed.Store(&f) }
	breakerhooks.Reclosed = func(b any) *atomic.Uint64 { return &b.(*Breaker).reclosed }
	timely.Register(func(p any) (timely.Role, bool) {
		b, ok := p.(*Breaker)
		if !ok || b == nil {
			return timely.Role{}, false
		}
		return timely.Role{Bound: &b.timely}, true
	})
}

// Breaker is a circuit breaker with Resilience4j's semantics: a count- or
// time-based sliding window, failure-rate and slow-call-rate thresholds,
// half-open probes, and the operational states of [Mode]. It is safe for
// concurrent use.
type Breaker struct {
	conf atomic.Pointer[config] // replaced whole by Reconfigure
	rec  resilience.Recorder
	cur  atomic.Pointer[period] // the current state and its data
	mu   sync.Mutex             // serialises transitions and window updates
	// closed: Close was called (under mu). A half-open period arms no
	// maximum wait then, so that the timers stop once the calls do.
	closed bool

	coord    atomic.Pointer[coord.Coordination] // cluster mode (cluster.go); nil alone
	onClosed atomic.Pointer[func()]             // breakerhooks.OnClosed; nil: none
	reclosed atomic.Uint64                      // breakerhooks.Reclosed
	// timely: the longest timeout inside the breaker in a chain whose live
	// deadline proves a success not slow, in nanoseconds (internal/timely):
	// half the slow-call threshold, on the system clock and without an
	// observer; 0 otherwise. Stored with each configuration.
	timely atomic.Int64
}

// period is one stay in a state. A new period starts at every transition;
// a permit remembers the period it was issued in, so the result of a call
// that started before a transition never counts after it.
type period struct {
	state   State
	reopens int // consecutive re-opens that led here (grows the open wait)

	win    window           // CLOSED, METRICS_ONLY
	reject *OpenError       // OPEN, FORCED_OPEN, HALF_OPEN (once its probes are taken)
	timer  resilience.Timer // OPEN: to HALF_OPEN; HALF_OPEN: max wait

	permits int    // HALF_OPEN: probes still to hand out (mu)
	probes  counts // HALF_OPEN: probe results (mu)
	// HALF_OPEN under a Coordination that leases probes: the probes granted
	// so far (GrantProbes); the probes decide once this many have reported.
	leased  bool
	granted int

	since time.Time // when the period began
	until time.Time // OPEN: when it moves to HALF_OPEN

	// frozen keeps the counts that tripped the breaker, so that its rates stay
	// readable while it is open, as in Resilience4j.
	frozen    counts
	frozenMin int64

	notPermitted atomic.Int64
}

// New returns a breaker configured by opts, with the defaults of
// docs/circuitbreaker.md for everything not set. An invalid option is an
// error that names it; New never panics.
func New(opts ...Option) (*Breaker, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("circuitbreaker: %w", err)
	}
	cfg.system = cfg.clock == resilience.SystemClock()
	b := new(Breaker)
	b.conf.Store(&cfg)
	b.mu.Lock()
	b.cur.Store(b.newPeriodLocked(modeState(cfg.Mode), 0))
	b.mu.Unlock()
	b.rec = resilience.Attach(cfg.observer, resilience.Source{
		Kind:     resilience.KindCircuitBreaker,
		Name:     cfg.Name,
		Snapshot: b.snapshot,
	})
	b.storeTimely(&cfg)
	return b, nil
}

// storeTimely stores b.timely for c, b's configuration.
func (b *Breaker) storeTimely(c *config) {
	var bound time.Duration
	if c.system && b.rec == nil {
		bound = c.SlowCallDurationThreshold / 2
	}
	b.timely.Store(int64(bound))
}

func modeState(m Mode) State {
	switch m {
	case ModeDisabled:
		return StateDisabled
	case ModeMetricsOnly:
		return StateMetricsOnly
	case ModeForcedOpen:
		return StateForcedOpen
	}
	return StateClosed
}

func (b *Breaker) config() *config { return b.conf.Load() }

// Reconfigure applies new options to a running breaker and keeps its state
// and the calls in its window: thresholds, the minimum number of calls,
// waits, probes, the classifier and the mode may change; the window's type
// and size may not (that is a new breaker), nor the clock or observer. Each
// option not given takes its default, as in New. A changed mode moves the
// breaker to that mode's state; an unchanged one leaves the state alone.
// The new thresholds apply from the next recorded call; a wait already
// running (open, half-open) keeps its length.
func (b *Breaker) Reconfigure(opts ...Option) error {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("circuitbreaker: %w", err)
	}
	b.mu.Lock()
	old := b.config()
	if cfg.SlidingWindowType != old.SlidingWindowType || cfg.SlidingWindowSize != old.SlidingWindowSize {
		b.mu.Unlock()
		return fmt.Errorf("circuitbreaker: Reconfigure: %w", &resilience.OptionError{
			Option: "slidingWindowSize", Value: cfg.SlidingWindowType.String() + " " + strconv.Itoa(cfg.SlidingWindowSize),
			Problem: "a running breaker keeps its window (" + old.SlidingWindowType.String() + " " + strconv.Itoa(old.SlidingWindowSize) + "); build a new breaker to change it",
		})
	}
	cfg.clock, cfg.system, cfg.observer = old.clock, old.system, old.observer
	b.conf.Store(&cfg)
	b.storeTimely(&cfg)
	b.mu.Unlock()
	if cfg.Mode != old.Mode {
		b.manual(modeState(cfg.Mode))
	}
	return nil
}

// Close ends the breaker's life: it stops the timer of its current state and
// releases its observer's gauges ([resilience.Releaser]). Calls still in
// flight may report; a closed breaker must not admit new ones. What they
// report may still open it, and its open wait half-open it, but it arms no
// maxWaitDurationInHalfOpenState: it stays HALF_OPEN. Close is for owners
// that replace breakers (grpcmw's Reload and Close).
func (b *Breaker) Close() {
	b.mu.Lock()
	b.closed = true
	if p := b.cur.Load(); p.timer != nil {
		p.timer.Stop()
	}
	b.mu.Unlock()
	resilience.Release(b.rec)
}

// Config returns the breaker's settings in force.
func (b *Breaker) Config() Config { return b.config().Config }

// Name returns the breaker's name.
func (b *Breaker) Name() string { return b.config().Name }

// State returns the breaker's state now.
func (b *Breaker) State() State { return b.cur.Load().state }

// permit is a breaker's admission of one call, for [Breaker.Execute]'s
// half-open path: report the call's result exactly once with Done or Record.
// A half-open probe's permit ignores every report after the first; a
// closed-state permit keeps no state of its own, so reporting it twice counts
// the call twice. The zero permit (a disabled breaker's) records nothing.
//
// A half-open probe whose permit is never reported gives its place back when
// the call's context ends (see acquire).
type permit struct {
	b     *Breaker
	per   *period
	probe *probe
	ctx   context.Context
	start time.Time
}

type probe struct {
	per     *period
	start   time.Time
	settled atomic.Bool
	stop    func() bool
	// recorded is closed once the probe is recorded, by whichever settled
	// it: the context's end, or the call's own report (also when its
	// recorder panicked). The report that comes second waits for it, so
	// that a call's result is recorded by the time the call returns.
	recorded chan struct{}
}

// report records the probe's result from the call itself, unless it was
// settled first — by its context's end, or by an earlier report (the
// engine gives back again, as a panic's, a probe whose commit panicked):
// then it waits until that record is made, and counts nothing.
func (pr *probe) report(record func()) {
	if !pr.settled.CompareAndSwap(false, true) {
		<-pr.recorded
		return
	}
	defer close(pr.recorded)
	pr.stop()
	record()
}

// acquire asks the breaker to admit one call. It returns a permit to report
// the call's result with, or a rejection (an [*OpenError], which errors.Is
// [ErrOpen]) when the breaker is open, forced open, or half-open with all its
// probes taken. It allocates only for a half-open probe.
//
// ctx is the call's context. A half-open probe is settled when ctx ends if its
// result has not been reported by then: as a failure when ctx's deadline passed
// (the probe did not answer in time), otherwise by giving the probe's place
// back. So a cancelled or abandoned probe never wedges the breaker in
// HALF_OPEN; maxWaitDurationInHalfOpenState covers contexts that never end.
func (b *Breaker) acquire(ctx context.Context) (permit, error) {
	p := b.cur.Load()
	switch p.state {
	case StateClosed, StateMetricsOnly:
		return permit{b: b, per: p, ctx: ctx, start: b.config().clock.Now()}, nil
	case StateDisabled:
		return permit{}, nil
	case StateHalfOpen:
		return b.acquireProbe(ctx, p)
	}
	return permit{}, b.reject(ctx, p)
}

func (b *Breaker) reject(ctx context.Context, p *period) error {
	p.notPermitted.Add(1)
	if b.rec != nil {
		b.rec.Record(ctx, resilience.Event{Type: resilience.EventRejection, State: p.state, Err: p.reject})
	}
	return p.reject
}

func (b *Breaker) acquireProbe(ctx context.Context, p *period) (permit, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	b.mu.Lock()
	if b.cur.Load() != p {
		b.mu.Unlock()
		return b.acquire(ctx) // the state moved on meanwhile
	}
	if p.permits == 0 {
		b.mu.Unlock()
		return permit{}, b.reject(ctx, p)
	}
	p.permits--
	b.mu.Unlock()

	start := b.config().clock.Now()
	pr := &probe{per: p, start: start, recorded: make(chan struct{})}
	pm := permit{b: b, per: p, ctx: ctx, start: start, probe: pr}
	pr.stop = context.AfterFunc(ctx, func() {
		if !pr.settled.CompareAndSwap(false, true) {
			return // reported already
		}
		defer close(pr.recorded)
		o := resilience.Ignored
		if ctx.Err() == context.DeadlineExceeded {
			o = resilience.Failure
		}
		now := b.config().clock.Now()
		b.finish(ctx, p, pr, o, now.Sub(start), now)
	})
	return pm, nil
}

// Done reports the result of the admitted call: err is classified with the
// breaker's classifier (nil is a success, a [resilience.Rejection] is
// ignored).
func (p permit) Done(err error) {
	if p.b == nil {
		return
	}
	p.Record(p.b.outcome(err))
}

// Record reports the admitted call's outcome directly, for callers that
// classify results themselves (as grpcmw does, per method).
func (p permit) Record(o resilience.Outcome) {
	if p.b == nil {
		return
	}
	record := func() {
		now := p.b.config().clock.Now()
		p.b.finish(p.ctx, p.per, p.probe, o, now.Sub(p.start), now)
	}
	if p.probe != nil {
		p.probe.report(record) // unless already settled by the context's end
		return
	}
	record()
}

// Commit takes a committed attempt's result now when the attempt is a
// half-open probe, so that a long-lived stream gives its probe's place back
// at its first response (an early exit, for meshless's engine); any other attempt is
// recorded when it ends.
func (b *Breaker) Commit(ctx context.Context, pm resilience.Permit, r resilience.Result) bool {
	if _, ok := pm.Ref.(*probe); !ok {
		return false
	}
	b.Exit(ctx, pm, r)
	return true
}

func (b *Breaker) recordWindow(ctx context.Context, p *period, failed, slow bool, now time.Time) {
	var ev resilience.Event
	b.mu.Lock()
	if b.cur.Load() == p {
		n := p.win.record(failed, slow, now)
		if p.state == StateClosed && !b.clusterDecides() {
			if reason, over := b.exceeded(n, int64(b.config().MinimumNumberOfCalls)); over {
				ev = b.transitionLocked(p, StateOpen, reason, 0)
			}
		}
	}
	b.mu.Unlock()
	b.emit(ctx, ev)
}

func (b *Breaker) recordProbe(ctx context.Context, p *period, o resilience.Outcome, slow bool) {
	var ev resilience.Event
	b.mu.Lock()
	switch {
	case b.cur.Load() != p:
	case o == resilience.Ignored:
		p.permits++ // an ignored probe gives its place back
	default:
		p.probes.add(o == resilience.Failure, slow, 1)
		n := int64(b.config().PermittedNumberOfCallsInHalfOpenState)
		if p.leased {
			n = int64(p.granted)
		}
		if p.probes.calls >= n {
			if reason, over := b.exceeded(p.probes, n); over {
				ev = b.transitionLocked(p, StateOpen, reason, p.reopens+1)
			} else {
				ev = b.transitionLocked(p, StateClosed, ReasonProbesSucceeded, 0)
			}
		}
	}
	b.mu.Unlock()
	b.emit(ctx, ev)
}

// exceeded applies the thresholds to n, as Resilience4j does: no decision
// below min calls, then failure rate, then slow-call rate, each opening at
// or above its threshold.
func (b *Breaker) exceeded(n counts, min int64) (Reason, bool) {
	if n.calls == 0 || n.calls < min {
		return ReasonNone, false
	}
	if float64(n.failures)*100/float64(n.calls) >= b.config().FailureRateThreshold {
		return ReasonFailureRate, true
	}
	if float64(n.slow)*100/float64(n.calls) >= b.config().SlowCallRateThreshold {
		return ReasonSlowCallRate, true
	}
	return ReasonNone, false
}

// transitionLocked replaces period from with a new period in state to and
// returns the transition's event. Called with b.mu held.
func (b *Breaker) transitionLocked(from *period, to State, reason Reason, reopens int) resilience.Event {
	return b.transitionWaitLocked(from, to, reason, reopens, 0)
}

// transitionWaitLocked is transitionLocked with the open wait given (a
// positive wait; 0 computes it from the configuration).
func (b *Breaker) transitionWaitLocked(from *period, to State, reason Reason, reopens int, wait time.Duration) resilience.Event {
	if from.timer != nil {
		from.timer.Stop()
	}
	next := b.newPeriodWaitLocked(to, reopens, wait)
	if to == StateOpen {
		next.frozen, next.frozenMin = from.counts(b)
	}
	if to == StateClosed && (from.state == StateOpen || from.state == StateHalfOpen || from.state == StateForcedOpen) {
		b.reclosed.Add(1) // before the state: see breakerhooks.Reclosed
	}
	b.cur.Store(next)
	return resilience.Event{Type: resilience.EventTransition, From: from.state, To: to, Reason: reason}
}

func (b *Breaker) newPeriodLocked(s State, reopens int) *period {
	return b.newPeriodWaitLocked(s, reopens, 0)
}

func (b *Breaker) newPeriodWaitLocked(s State, reopens int, wait time.Duration) *period {
	c := b.config()
	now := c.clock.Now()
	p := &period{state: s, reopens: reopens, since: now}
	switch s {
	case StateClosed, StateMetricsOnly:
		p.win = newWindow(c, now)
	case StateOpen:
		if wait <= 0 {
			wait = b.openWait(reopens)
		}
		p.until = now.Add(wait)
		p.reject = &OpenError{Name: c.Name, State: s, Until: p.until}
		p.timer = c.clock.AfterFunc(wait, func() { b.expire(p, StateHalfOpen, ReasonWaitElapsed, p.reopens) })
	case StateHalfOpen:
		p.permits = c.PermittedNumberOfCallsInHalfOpenState
		if co := b.coord.Load(); co != nil && co.LeaseProbes {
			p.permits, p.leased = 0, true // handed out by GrantProbes
		}
		p.reject = &OpenError{Name: c.Name, State: s}
		// A closed breaker's would open it again, which half-opens it
		// again, and so on for ever: its timers would never stop.
		if c.MaxWaitDurationInHalfOpenState > 0 && !b.closed {
			p.timer = c.clock.AfterFunc(c.MaxWaitDurationInHalfOpenState, func() { b.expire(p, StateOpen, ReasonHalfOpenTimeout, p.reopens+1) })
		}
	case StateForcedOpen:
		p.reject = &OpenError{Name: c.Name, State: s}
	}
	return p
}

// expire is a period's timer firing: it moves p on if p is still current.
func (b *Breaker) expire(p *period, to State, reason Reason, reopens int) {
	var ev resilience.Event
	b.mu.Lock()
	if b.cur.Load() == p {
		ev = b.transitionLocked(p, to, reason, reopens)
	}
	b.mu.Unlock()
	b.emit(context.Background(), ev)
}

// openWait is the wait before the next probe after reopens consecutive
// re-opens: doubled for each, spread by the jitter, and never above the cap.
func (b *Breaker) openWait(reopens int) time.Duration {
	w, limit := b.config().WaitDurationInOpenState, b.config().MaxWaitDurationInOpenState
	if limit > 0 {
		for i := 0; i < reopens && w < limit; i++ {
			if w > limit/2 {
				w = limit
				break
			}
			w *= 2
		}
	}
	if j := b.config().OpenStateJitter; j > 0 {
		w = time.Duration(float64(w) * (1 + j*(2*rand.Float64()-1)))
	}
	if limit > 0 {
		w = min(w, limit)
	}
	return max(w, time.Nanosecond)
}

func (b *Breaker) emit(ctx context.Context, ev resilience.Event) {
	if ev.Type == 0 {
		return
	}
	if b.rec != nil {
		// The breaker's own listeners hear it also when the recorder
		// panics: the other instances of a cluster learn of it.
		defer b.tell(ev)
		b.rec.Record(ctx, ev)
		return
	}
	b.tell(ev)
}

// tell tells the breaker's own listeners of ev: the OnClosed hook and the
// cluster's coordination. Called with no lock held.
func (b *Breaker) tell(ev resilience.Event) {
	b.tellClosed(ev)
	if co := b.coord.Load(); co != nil && co.OnTransition != nil && ev.Type == resilience.EventTransition && ev.Reason != ReasonManual {
		// The breaker's own events carry its own labels.
		co.OnTransition(b, uint8(ev.From.(State)), uint8(ev.To.(State)), uint8(ev.Reason.(Reason)))
	}
}

// tellClosed calls the breakerhooks.OnClosed function when ev is a
// transition to CLOSED. Called with no lock held.
func (b *Breaker) tellClosed(ev resilience.Event) {
	if ev.Type == resilience.EventTransition && ev.To == StateClosed {
		if f := b.onClosed.Load(); f != nil {
			(*f)()
		}
	}
}

// ForceOpen moves the breaker to FORCED_OPEN: every call is rejected until
// [Breaker.Reset] (or another manual transition).
func (b *Breaker) ForceOpen() { b.manual(StateForcedOpen) }

// Disable moves the breaker to DISABLED: every call passes, nothing is
// recorded or reported.
func (b *Breaker) Disable() { b.manual(StateDisabled) }

// MetricsOnly moves the breaker to METRICS_ONLY: every call passes and is
// recorded and reported, but the breaker never opens.
func (b *Breaker) MetricsOnly() { b.manual(StateMetricsOnly) }

// Reset moves the breaker to CLOSED with an empty window and forgets past
// re-opens, from whatever state it is in. Observers see a transition only
// when the state changes: resetting a closed breaker empties its window
// silently.
func (b *Breaker) Reset() { b.manual(StateClosed) }

func (b *Breaker) manual(to State) {
	var ev resilience.Event
	b.mu.Lock()
	from := b.cur.Load()
	if from.state != to || to == StateClosed {
		ev = b.transitionLocked(from, to, ReasonManual, 0)
	}
	b.mu.Unlock()
	if ev.From != ev.To {
		b.emit(context.Background(), ev)
	}
}
