package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/pipeline"
	"github.com/meshless/meshless/internal/pushback"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/throttler"
	"github.com/meshless/meshless/timeout"
)

// diffRec is what one run saw, in order.
type diffRec struct {
	mu   sync.Mutex
	base time.Time
	log  []string
	took []string // Timed's, apart: the order against the gates' exits differs
}

func (r *diffRec) rel(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	return t.Sub(r.base).String()
}

func (r *diffRec) dl(ctx context.Context) string {
	if dl, ok := ctx.Deadline(); ok {
		return r.rel(dl)
	}
	return "none"
}

func (r *diffRec) add(format string, args ...any) {
	r.mu.Lock()
	r.log = append(r.log, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// errChain describes err and every error it wraps, by type.
func errChain(err error) string {
	if err == nil {
		return "<nil>"
	}
	var b strings.Builder
	for e := err; e != nil; e = errors.Unwrap(e) {
		fmt.Fprintf(&b, "%T", e)
		if te, ok := e.(*timeout.Error); ok {
			fmt.Fprintf(&b, "{scope=%v timeout=%v}", te.Scope, te.Timeout)
		}
		b.WriteString(" > ")
	}
	fmt.Fprintf(&b, "%q", err.Error())
	return b.String()
}

// spyGate stands for gate i of a pipeline (its Gates), noting what it is
// told; it may refuse, or panic in its Enter or after its Exit.
type spyGate struct {
	g          pipeline.Gates
	i          int
	rec        *diffRec
	refuse     func(k int) error // at the k-th Enter; nil: never
	panicEnter int               // at the k-th Enter; 0: never
	panicExit  int               // after the k-th Exit; 0: never
	enters     int
	exits      int
}

func (s *spyGate) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	return s.EnterAt(ctx, time.Now())
}

func (s *spyGate) EnterAt(ctx context.Context, now time.Time) (context.Context, resilience.Permit, error) {
	s.rec.add("gate%d enter now=%s dl=%s", s.i, s.rec.rel(now), s.rec.dl(ctx))
	s.enters++
	if s.enters == s.panicEnter {
		panic(fmt.Sprintf("gate%d Enter", s.i))
	}
	var next context.Context
	var pm resilience.Permit
	var err error
	if s.refuse != nil {
		if err = s.refuse(s.enters); err != nil {
			next = ctx
		}
	}
	if err == nil {
		if t := s.g.Timed[s.i]; t != nil {
			next, pm, err = t.EnterAt(ctx, now)
		} else {
			next, pm, err = s.g.Enters[s.i].Enter(ctx)
		}
	}
	if err != nil {
		if w := s.g.Refused[s.i]; w != nil {
			err = w.Refused(err)
		}
		s.rec.add("gate%d refused %s", s.i, errChain(err))
	}
	return next, pm, err
}

func (s *spyGate) Exit(ctx context.Context, p resilience.Permit, r resilience.Result) error {
	s.rec.add("gate%d exit err=%s outcome=%v took=%v end=%s dl=%s", s.i, errChain(r.Err), r.Outcome, r.Duration, s.rec.rel(r.End), s.rec.dl(ctx))
	e := s.g.Exits[s.i].Exit(ctx, p, r)
	s.rec.add("gate%d exit returns %s", s.i, errChain(e))
	s.exits++
	if s.exits == s.panicExit {
		panic(fmt.Sprintf("gate%d Exit", s.i))
	}
	return e
}

// diffCase is one call, made on a plain method and on the same method
// through a Call.
type diffCase struct {
	name   string
	policy func(p *config.Policies) // changes the defaults
	caller time.Duration            // the caller's own timeout; 0: none
	timed  bool
	// script is attempt n; it may sleep (bubble time) and wait on ctx.
	script func(ctx context.Context, n int) error
	// setup runs before the call.
	setup func(m *Method, e *Engine)
	// refuse, panicEnter, panicExit: gate i, at its k-th Enter (from 1), or Exit.
	refuse     map[int]func(k int) error
	panicEnter map[int]int
	panicExit  map[int]int
	// calls is the number of calls made one after another (1 when 0).
	calls int
	// obsPanic, when set, makes a new decider for a run: the observer
	// panics at the events it says true for.
	obsPanic func() func(resilience.Kind, resilience.EventType) bool
	// tookPanic: a Timed attempt's Took panics at attempt n (0: never).
	tookPanic int
	// deadLetter turns the dead-letter queue on, deferring calls on these.
	deadLetter []string
	// retryThrottling turns the client's retry throttle on with these tokens.
	throttleTokens float64
}

// diffEnv is what a run varies besides the case: the clock, the observer.
type diffEnv struct {
	clock    func() resilience.Clock // nil: the system clock
	observer bool
	uncoded  bool // Options.RetryUncoded (httpmw's rule)
	stepping bool // every read moves the clock, the dead-letter replay goroutine's too: no dead-letter case
}

type timedRec struct {
	rec       *diffRec
	s         func(ctx context.Context, n int) error
	tookPanic int
}

func (a *timedRec) Attempt(ctx context.Context, n int) error {
	a.rec.add("attempt %d at=%s dl=%s mark=%v", n, a.rec.rel(time.Now()), a.rec.dl(ctx), ctx.Value(attemptsKey{}))
	err := a.s(ctx, n)
	a.rec.add("attempt %d returns %s at=%s", n, errChain(err), a.rec.rel(time.Now()))
	return err
}

func (a *timedRec) Took(n int, err error, took time.Duration) {
	a.rec.mu.Lock()
	a.rec.took = append(a.rec.took, fmt.Sprintf("took %d %s %v", n, errChain(err), took))
	a.rec.mu.Unlock()
	if n == a.tookPanic {
		panic("Took")
	}
}

type untimedRec struct{ t *timedRec }

// dlTransport is fakeTransport that replays deferred calls (a Replayer).
type dlTransport struct{ fakeTransport }

func (dlTransport) Replay(ctx context.Context, e deadletter.Entry) error { return nil }

// deferrable is an attempt whose calls can be kept.
type deferrable struct{ a Attempt }

func (d deferrable) Attempt(ctx context.Context, n int) error { return d.a.Attempt(ctx, n) }

func (deferrable) Entry(ctx context.Context) (deadletter.Entry, bool) {
	return deadletter.Entry{ID: "id1", Method: "/a.B/C", Payload: []byte("x")}, true
}

func (a untimedRec) Attempt(ctx context.Context, n int) error { return a.t.Attempt(ctx, n) }

func runDiff(t *testing.T, tc diffCase, env diffEnv, plain bool) string {
	var out string
	synctest.Test(t, func(t *testing.T) {
		rec := &diffRec{base: time.Now()}
		pol := config.Policies{
			Retry: &config.RetrySection{Jitter: config.Ptr(0.0)},
		}
		if tc.policy != nil {
			tc.policy(&pol)
		}
		var tr Transport = fakeTransport{}
		if tc.deadLetter != nil {
			pol.DeadLetter = &config.DeadLetterSection{On: tc.deadLetter, Path: config.Ptr(t.TempDir() + "/dl.db")}
			tr = dlTransport{}
		}
		cfg := &config.Config{Defaults: pol}
		if tc.throttleTokens > 0 {
			cfg.RetryThrottling = &config.RetryThrottlingSection{MaxTokens: config.Ptr(tc.throttleTokens), TokenRatio: config.Ptr(0.1)}
		}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		var panics func(resilience.Kind, resilience.EventType) bool
		if tc.obsPanic != nil {
			panics = tc.obsPanic()
		}
		obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
			return resilience.RecorderFunc(func(ctx context.Context, ev resilience.Event) {
				rec.add("event %v/%s %v outcome=%v took=%v timedOut=%v attempt=%d backoff=%v err=%s reason=%v state=%v from=%v to=%v slow=%v etype=%q at=%s",
					src.Kind, src.Name, ev.Type, ev.Outcome, ev.Duration, ev.TimedOut, ev.Attempt, ev.Backoff, errChain(ev.Err), ev.Reason, ev.State, ev.From, ev.To, ev.Slow, ev.ErrorType, rec.rel(time.Now()))
				if panics != nil && panics(src.Kind, ev.Type) {
					rec.add("observer panics")
					panic(fmt.Sprintf("observer at %v %v", src.Kind, ev.Type))
				}
			})
		})
		opts := Options{MaxKeys: 10, TimedAttempts: tc.timed, RetryUncoded: env.uncoded}
		if env.clock != nil {
			opts.Clock = env.clock()
		}
		if env.observer {
			opts.Observer = obs
		}
		e, err := New(cfg, tr, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		m := lookup(e, "/a.B/C")
		if !m.plain {
			t.Fatalf("the method is not plain")
		}
		m.plain = plain
		g := *m.unary.Gates()
		var spies []resilience.Gate
		for i := range g.N {
			spies = append(spies, &spyGate{g: g, i: i, rec: rec, refuse: tc.refuse[i], panicEnter: tc.panicEnter[i], panicExit: tc.panicExit[i]})
		}
		p, err := pipeline.NewPipeline(g.Classify, e.opts.Clock, spies...)
		if err != nil {
			t.Fatal(err)
		}
		m.unary, m.stream = p, p
		if tc.setup != nil {
			tc.setup(m, e)
		}
		rec.add("gates %d", g.N)
		calls := max(tc.calls, 1)
		for call := range calls {
			rec.add("--- call %d", call+1)
			ctx := context.Background()
			if tc.caller > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.caller)
				defer cancel()
			} else if tc.caller < 0 { // cancelled already
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				cancel()
			}
			ta := &timedRec{rec: rec, s: tc.script, tookPanic: tc.tookPanic}
			var a Attempt = ta
			if !tc.timed {
				a = untimedRec{ta}
			}
			if tc.deadLetter != nil {
				a = deferrable{a}
			}
			start := time.Now()
			var n int
			var cerr error
			r := recovered(func() { n, cerr = m.Run(ctx, a) })
			rec.add("n=%d err=%s panic=%v took=%v", n, errChain(cerr), r, time.Since(start))
			if b := m.Bulkhead(); b != nil {
				rec.add("bulkhead active=%d", b.Active())
			}
			if b := m.Breaker(); b != nil {
				rec.add("breaker %v", b.State())
			}
			if th := e.Throttle(); th != nil {
				rec.add("throttle %v", th)
			}
			synctest.Wait()
		}
		rec.mu.Lock()
		out = strings.Join(append(rec.log, rec.took...), "\n")
		rec.mu.Unlock()
	})
	return out
}

// nth panics at the n-th event of kind and type.
func nth(kind resilience.Kind, typ resilience.EventType, n int) func() func(resilience.Kind, resilience.EventType) bool {
	return func() func(resilience.Kind, resilience.EventType) bool {
		seen := 0
		return func(k resilience.Kind, t resilience.EventType) bool {
			if k == kind && t == typ {
				seen++
				return seen == n
			}
			return false
		}
	}
}

func diffCases() []diffCase {
	unavailable := func(int) error { return &codeError{code: 14} }
	waitCtx := func(ctx context.Context, n int) error { // until the attempt's context ends
		<-ctx.Done()
		return &codeError{code: 14}
	}
	timeouts := func(per, overall time.Duration) func(*config.Policies) {
		return func(p *config.Policies) {
			p.Timeout = &config.TimeoutSection{PerAttempt: config.Dur(per), Overall: config.Dur(overall)}
		}
	}
	both := func(fs ...func(*config.Policies)) func(*config.Policies) {
		return func(p *config.Policies) {
			for _, f := range fs {
				f(p)
			}
		}
	}
	backoff := func(d time.Duration, attempts int) func(*config.Policies) {
		return func(p *config.Policies) {
			p.Retry.InitialBackoff, p.Retry.MaxBackoff = config.Dur(d), config.Dur(10*d)
			p.Retry.MaxAttempts = config.Ptr(attempts)
		}
	}
	return []diffCase{
		{name: "success", script: func(context.Context, int) error { return nil }},
		{name: "success timed", timed: true, script: func(context.Context, int) error { return nil }},
		{name: "not found", script: func(context.Context, int) error { return &codeError{code: 5} }},
		{name: "retried then success", timed: true, script: func(_ context.Context, n int) error {
			if n == 1 {
				return &codeError{code: 14}
			}
			return nil
		}},
		{name: "retries exhausted", script: func(_ context.Context, n int) error { return unavailable(n) }},
		{name: "uncoded error", script: func(context.Context, int) error { return errors.New("boom") }},
		{name: "breaker open", setup: func(m *Method, _ *Engine) { m.Breaker().ForceOpen() },
			script: func(context.Context, int) error { return nil }},
		{name: "bulkhead full", policy: func(p *config.Policies) { p.Bulkhead = &config.BulkheadSection{MaxConcurrentCalls: config.Ptr(1)} },
			setup: func(m *Method, _ *Engine) {
				if _, _, err := m.Bulkhead().Enter(context.Background()); err != nil {
					panic(err)
				}
			},
			script: func(context.Context, int) error { return nil }},
		{name: "throttled at first", refuse: map[int]func(int) error{1: func(int) error { return throttler.ErrThrottled }},
			script: func(context.Context, int) error { return nil }},
		{name: "throttled on retry", refuse: map[int]func(int) error{1: func(k int) error {
			if k > 1 {
				return throttler.ErrThrottled
			}
			return nil
		}}, script: func(_ context.Context, n int) error { return unavailable(n) }},
		{name: "per-attempt timeout then success", timed: true, script: func(ctx context.Context, n int) error {
			if n == 1 {
				return waitCtx(ctx, n)
			}
			return nil
		}},
		{name: "per-attempt timeout every time", script: waitCtx},
		{name: "per-attempt timeout ctx err", script: func(ctx context.Context, n int) error { <-ctx.Done(); return ctx.Err() }},
		{name: "overall during backoff", policy: both(timeouts(time.Second, 2500*time.Millisecond), backoff(time.Second, 5)), script: waitCtx},
		{name: "overall during later attempt", policy: both(timeouts(time.Second, 2500*time.Millisecond), backoff(100*time.Millisecond, 5)), script: waitCtx},
		{name: "overall first", policy: timeouts(5*time.Second, 2*time.Second), script: waitCtx},
		{name: "equal timeouts", policy: timeouts(2*time.Second, 2*time.Second), script: waitCtx},
		{name: "no overall", policy: timeouts(time.Second, 0), script: waitCtx},
		{name: "no per-attempt", policy: timeouts(0, 2*time.Second), script: waitCtx},
		{name: "no timeouts", policy: func(p *config.Policies) { p.Timeout = &config.TimeoutSection{Enabled: config.Ptr(false)} },
			script: func(_ context.Context, n int) error { return unavailable(n) }},
		{name: "caller first", caller: 500 * time.Millisecond, script: waitCtx},
		{name: "caller between", caller: 2 * time.Second, script: waitCtx},
		{name: "caller after", caller: 10 * time.Second, script: waitCtx},
		{name: "caller between success", caller: 2 * time.Second, script: func(ctx context.Context, n int) error { return nil }},
		{name: "slow success past per-attempt", script: func(ctx context.Context, n int) error { time.Sleep(1500 * time.Millisecond); return nil }},
		{name: "slow error past per-attempt", script: func(ctx context.Context, n int) error {
			time.Sleep(1500 * time.Millisecond)
			return &codeError{code: 14}
		}},
		{name: "panic in attempt", script: func(context.Context, int) error { panic("attempt") }},
		{name: "panic in second attempt", script: func(_ context.Context, n int) error {
			if n == 2 {
				panic("attempt")
			}
			return unavailable(n)
		}},
		{name: "panic in Enter 0", panicEnter: map[int]int{0: 1}, script: func(context.Context, int) error { return nil }},
		{name: "panic in Enter 2", panicEnter: map[int]int{2: 1}, script: func(context.Context, int) error { return nil }},
		{name: "panic in Enter 2 on retry", panicEnter: map[int]int{2: 2}, script: func(_ context.Context, n int) error { return unavailable(n) }},
		{name: "panic in Exit 0", panicExit: map[int]int{0: 1}, script: func(context.Context, int) error { return nil }},
		{name: "panic in Exit 1", panicExit: map[int]int{1: 1}, script: func(context.Context, int) error { return unavailable(1) }},
		{name: "panic in Exit 2", panicExit: map[int]int{2: 1}, timed: true, script: func(context.Context, int) error { return nil }},
		{name: "relayed rejection", script: func(context.Context, int) error {
			return &codeError{code: 14, relayed: resilience.KindCircuitBreaker}
		}},
		{name: "relayed bulkhead", script: func(context.Context, int) error {
			return &codeError{code: 8, relayed: resilience.KindBulkhead}
		}},
		{name: "overloaded", script: func(context.Context, int) error { return &codeError{code: 8} }},
		{name: "local rejection from attempt", script: func(context.Context, int) error { return throttler.ErrThrottled }},
		{name: "cancelled", script: func(context.Context, int) error { return &codeError{code: 1} }},
		{name: "pushback then success", script: func(_ context.Context, n int) error {
			if n == 1 {
				return pushback.With(&codeError{code: 14}, 700*time.Millisecond)
			}
			return nil
		}},
		{name: "pushback stop", script: func(_ context.Context, n int) error {
			return pushback.With(&codeError{code: 14}, -1)
		}},
		{name: "pushback on business answer", script: func(_ context.Context, n int) error {
			return pushback.With(&codeError{code: 5}, time.Second)
		}},
		{name: "pushback past overall", script: func(_ context.Context, n int) error {
			return pushback.With(&codeError{code: 14}, 5*time.Second)
		}},
		{name: "breaker opens over calls", calls: 6, policy: func(p *config.Policies) {
			p.CircuitBreaker = &config.CircuitBreakerSection{SlidingWindowSize: config.Ptr(4), MinimumNumberOfCalls: config.Ptr(2),
				WaitDurationInOpenState: config.Dur(500 * time.Millisecond), PermittedNumberOfCallsInHalfOpenState: config.Ptr(1)}
			p.Retry.MaxAttempts = config.Ptr(2)
		}, script: func(_ context.Context, n int) error { time.Sleep(300 * time.Millisecond); return unavailable(n) }},
		{name: "breaker half-open probe succeeds", calls: 5, policy: func(p *config.Policies) {
			p.CircuitBreaker = &config.CircuitBreakerSection{SlidingWindowSize: config.Ptr(2), MinimumNumberOfCalls: config.Ptr(2),
				WaitDurationInOpenState: config.Dur(250 * time.Millisecond), PermittedNumberOfCallsInHalfOpenState: config.Ptr(1)}
			p.Retry.MaxAttempts = config.Ptr(3)
		}, script: func(_ context.Context, n int) error {
			if n < 3 {
				return unavailable(n)
			}
			return nil
		}},
		{name: "slow calls", calls: 3, policy: func(p *config.Policies) {
			p.CircuitBreaker = &config.CircuitBreakerSection{SlidingWindowSize: config.Ptr(2), MinimumNumberOfCalls: config.Ptr(2),
				SlowCallDurationThreshold: config.Dur(500 * time.Millisecond), SlowCallRateThreshold: config.Ptr(50.0)}
		}, script: func(context.Context, int) error { time.Sleep(600 * time.Millisecond); return nil }},
		{name: "retry throttle", calls: 4, throttleTokens: 2, script: func(_ context.Context, n int) error { return unavailable(n) }},
		{name: "breaker off bulkhead off throttler off", policy: func(p *config.Policies) {
			p.CircuitBreaker = &config.CircuitBreakerSection{Enabled: config.Ptr(false)}
			p.Bulkhead = &config.BulkheadSection{Enabled: config.Ptr(false)}
			p.AdaptiveThrottling = &config.AdaptiveThrottlingSection{Enabled: config.Ptr(false)}
		}, script: func(ctx context.Context, n int) error {
			if n == 1 {
				return waitCtx(ctx, n)
			}
			return nil
		}},
		{name: "no gates panic", policy: func(p *config.Policies) {
			p.CircuitBreaker = &config.CircuitBreakerSection{Enabled: config.Ptr(false)}
			p.Bulkhead = &config.BulkheadSection{Enabled: config.Ptr(false)}
			p.AdaptiveThrottling = &config.AdaptiveThrottlingSection{Enabled: config.Ptr(false)}
		}, script: func(ctx context.Context, n int) error { panic("x") }},
		{name: "retry off", policy: func(p *config.Policies) { p.Retry = &config.RetrySection{Enabled: config.Ptr(false)} },
			throttleTokens: 10, script: func(ctx context.Context, n int) error { return waitCtx(ctx, n) }},
		{name: "per-attempt 1ns", policy: timeouts(time.Nanosecond, time.Second), script: func(ctx context.Context, n int) error {
			return waitCtx(ctx, n)
		}},
		{name: "caller expired", caller: time.Nanosecond, script: func(ctx context.Context, n int) error {
			return waitCtx(ctx, n)
		}},
		{name: "caller cancelled", caller: -1, script: func(ctx context.Context, n int) error { return &codeError{code: 1} }},
		{name: "caller cancelled, unavailable", caller: -1, script: func(ctx context.Context, n int) error { return unavailable(n) }},
		{name: "caller equals per-attempt", caller: time.Second, script: waitCtx},
		{name: "caller equals overall", caller: 3 * time.Second, policy: backoff(100*time.Millisecond, 5), script: waitCtx},
		{name: "caller after overall success late", caller: 5 * time.Second, policy: backoff(100*time.Millisecond, 5), script: func(ctx context.Context, n int) error {
			if n < 3 {
				return waitCtx(ctx, n)
			}
			return nil
		}},
		{name: "error at the per-attempt deadline, not its ctx", script: func(ctx context.Context, n int) error {
			time.Sleep(time.Second)
			return &codeError{code: 14}
		}},
		{name: "took panics on success", timed: true, tookPanic: 1, script: func(context.Context, int) error { return nil }},
		{name: "took panics on failure", timed: true, tookPanic: 1, script: func(_ context.Context, n int) error { return unavailable(n) }},
		{name: "observer panics at the per-attempt timeout's event", timed: true, obsPanic: nth(resilience.KindTimeout, resilience.EventCall, 1),
			script: func(context.Context, int) error { return nil }},
		{name: "observer panics at the per-attempt timeout's event, failing", timed: true, obsPanic: nth(resilience.KindTimeout, resilience.EventCall, 1),
			script: func(_ context.Context, n int) error { return unavailable(n) }},
		{name: "observer panics at the breaker's event", timed: true, obsPanic: nth(resilience.KindCircuitBreaker, resilience.EventCall, 1),
			script: func(context.Context, int) error { return nil }},
		{name: "observer panics at the bulkhead's release", timed: true, obsPanic: nth(resilience.KindBulkhead, resilience.EventReleased, 1),
			script: func(context.Context, int) error { return nil }},
		{name: "observer panics at the bulkhead's acquire", timed: true, obsPanic: nth(resilience.KindBulkhead, resilience.EventAcquired, 1),
			script: func(context.Context, int) error { return nil }},
		{name: "observer panics at the throttler's acquire", timed: true, obsPanic: nth(resilience.KindThrottler, resilience.EventAcquired, 1),
			script: func(context.Context, int) error { return nil }},
		{name: "observer panics at the retry's attempt", timed: true, obsPanic: nth(resilience.KindRetry, resilience.EventAttempt, 1),
			script: func(context.Context, int) error { return nil }},
		{name: "observer panics at the call's event", timed: true, obsPanic: nth(resilience.KindCall, resilience.EventCall, 1),
			script: func(_ context.Context, n int) error { return unavailable(n) }},
		{name: "rate limited on retry", policy: func(p *config.Policies) {
			p.RateLimiter = &config.RateLimiterSection{LimitForPeriod: config.Ptr(1), LimitRefreshPeriod: config.Dur(time.Minute), TimeoutDuration: config.Dur(0)}
		}, script: func(_ context.Context, n int) error { return unavailable(n) }},
		{name: "rate limited at first", calls: 2, policy: func(p *config.Policies) {
			p.RateLimiter = &config.RateLimiterSection{LimitForPeriod: config.Ptr(1), LimitRefreshPeriod: config.Dur(time.Minute), TimeoutDuration: config.Dur(0)}
		}, script: func(_ context.Context, n int) error { return nil }},
		{name: "adaptive bulkhead", calls: 3, policy: func(p *config.Policies) {
			p.Bulkhead = &config.BulkheadSection{Adaptive: &config.AdaptiveSection{MinLimit: config.Ptr(1), MaxLimit: config.Ptr(4), InitialLimit: config.Ptr(2)}}
		}, script: func(ctx context.Context, n int) error {
			if n == 1 {
				return waitCtx(ctx, n)
			}
			return nil
		}},
		{name: "adaptive bulkhead panic", policy: func(p *config.Policies) {
			p.Bulkhead = &config.BulkheadSection{Adaptive: &config.AdaptiveSection{MinLimit: config.Ptr(1), MaxLimit: config.Ptr(4), InitialLimit: config.Ptr(2)}}
		}, script: func(ctx context.Context, n int) error { panic("x") }},
		{name: "dead letter on open", deadLetter: []string{"CIRCUIT_OPEN"}, setup: func(m *Method, _ *Engine) { m.Breaker().ForceOpen() },
			script: func(context.Context, int) error { return nil }},
		{name: "dead letter on exhausted", deadLetter: []string{"RETRIES_EXHAUSTED"}, script: func(_ context.Context, n int) error { return unavailable(n) }},
		{name: "dead letter on exhausted, not found", deadLetter: []string{"RETRIES_EXHAUSTED"}, script: func(_ context.Context, n int) error { return &codeError{code: 5} }},
		{name: "dead letter on exhausted, timeouts", deadLetter: []string{"RETRIES_EXHAUSTED"}, script: waitCtx},
		{name: "error exactly at overall", policy: both(timeouts(0, 2*time.Second), backoff(100*time.Millisecond, 2)), script: func(ctx context.Context, n int) error {
			if n == 1 {
				time.Sleep(1900 * time.Millisecond)
				return &codeError{code: 14}
			}
			time.Sleep(200 * time.Millisecond)
			return &codeError{code: 14}
		}},
	}
}

// A plain method's call and the same call through a Call see and do the
// same, everywhere.
func TestDiffPlainAndCall(t *testing.T) {
	for _, env := range []struct {
		name string
		diffEnv
	}{
		{"system observed", diffEnv{observer: true}},
		{"system unobserved", diffEnv{}},
		{"system observed, uncoded retried", diffEnv{observer: true, uncoded: true}},
		{"wallclock observed", diffEnv{clock: func() resilience.Clock { return wallClock{} }, observer: true}},
		{"wallclock unobserved", diffEnv{clock: func() resilience.Clock { return wallClock{} }}},
		{"stepping observed", diffEnv{clock: func() resilience.Clock {
			return &steppingClock{Clock: resilience.SystemClock(), now: time.Now(), step: 7 * time.Millisecond}
		}, observer: true, stepping: true}},
	} {
		t.Run(env.name, func(t *testing.T) { diffAll(t, env.diffEnv) })
	}
}

func diffAll(t *testing.T, env diffEnv) {
	for _, tc := range diffCases() {
		if env.stepping && tc.deadLetter != nil { // see diffEnv.stepping
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			want := runDiff(t, tc, env, false)
			got := runDiff(t, tc, env, true)
			if got != want {
				gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
				var b strings.Builder
				for i := range max(len(gl), len(wl)) {
					var g, w string
					if i < len(gl) {
						g = gl[i]
					}
					if i < len(wl) {
						w = wl[i]
					}
					mark := "  "
					if g != w {
						mark = "!!"
					}
					fmt.Fprintf(&b, "%s plain: %s\n%s call:  %s\n", mark, g, mark, w)
				}
				t.Errorf("plain and Call differ:\n%s", b.String())
			} else if testing.Verbose() {
				t.Logf("\n%s", got)
			}
		})
	}
}
