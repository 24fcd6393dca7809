package engine

import (
	"log/slog"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/internal/breakerhooks"
	"github.com/meshless/meshless/internal/codeset"
	"github.com/meshless/meshless/internal/deadline"
	"github.com/meshless/meshless/internal/pipeline"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/throttler"
	"github.com/meshless/meshless/timeout"
)

// Method is one key's resolved policy set, immutable once built; nil fields
// are switched off.
type Method struct {
	e    *Engine
	name string              // "pkg.Svc/Method", for observers
	call resilience.Recorder // the logical call's events (KindCall); nil without an observer
	// Settings is what the configuration resolved the key to.
	Settings config.Method

	classes classes
	// The timeouts of unary calls and of streams (a stream takes only its
	// method level's own), applied with one context per attempt.
	unaryDeadlines, streamDeadlines deadline.Plan
	// waits: a gate may make an attempt wait (a bulkhead's maxWaitDuration,
	// a rate limiter's timeoutDuration), so the call's context carries the
	// overall deadline.
	waits bool
	// attempts is the method's attempt policy: its retry, or, for a method
	// that neither retries nor hedges, a one-attempt policy that moves the
	// client's retry throttle (gRFC A6 counts every RPC). Nil when neither.
	attempts  *retry.Retry
	retries   bool // attempts may retry (a stream then keeps what it sent)
	retryable matcher
	hedge     *retry.Hedge // in retry's place when the method hedges
	nonFatal  matcher
	// The attempt pipelines (order.go); a stream's is a unary call's.
	unary, stream *pipeline.Pipeline
	breaker       *circuitbreaker.Breaker
	bulkhead      *bulkhead.Bulkhead
	limiter       *ratelimiter.Limiter
	// dlq is the key's dead-letter queue, nil without one; dlOn says which
	// errors defer the method's calls.
	dlq  *deadletter.Queue
	dlOn deadletter.Trigger
	// observe is mode: observe: the call's context is observed
	// (resilience.Observe), its pipelines admit what a gate refuses, and
	// its timeouts, retry and hedging decide without acting.
	observe bool
	// plain: a unary call takes runPlain — the method has an attempt
	// policy and neither observes nor makes attempts wait, on a clock whose
	// readings are real time (the system clock's, or a test's that says so).
	plain bool
	// endFree, when not 0, is how long after its start a plain call's first
	// attempt's deadline comes at the latest (deadline.Plan.FirstBound), on
	// the system clock and with nothing that hears a call's duration: no
	// observer, no timed attempts (an outlier balancer's). An attempt that
	// succeeds while that deadline is live (its timer has not fired) took
	// less than endFree, so runPlain does not read the clock at its end
	// when the breaker's slow-call threshold is twice endFree or more
	// (breakerTrusts): the success is not slow, whatever its exact duration,
	// and the gates count it at its start, at most endFree before its end:
	// the breaker's window, which must be COUNT_BASED (a TIME_BASED one
	// places a call by its time, and would drop such a success early), and
	// the throttler's, whose slot endFree must not exceed (so that the
	// success lands in its end's slot or the one before). A timer fires late only by
	// the runtime's scheduling delay, which would have to exceed the
	// threshold minus endFree (1 s on defaults: a 1 s per-attempt timeout,
	// a 2 s threshold) to hide a slow call.
	endFree time.Duration
}

// Name returns the method's name for observers: "pkg.Svc/Method".
func (m *Method) Name() string { return m.name }

// Retries reports whether the method retries its calls: more than one
// attempt, one after another.
func (m *Method) Retries() bool { return m.retries }

// StreamRetries reports whether a stream that is not hedged may make more
// than one attempt (it then keeps what it sent, to replay it): the method
// retries, or it hedges — a client- or bidi-streaming call, which cannot be
// hedged, is retried instead.
func (m *Method) StreamRetries() bool { return m.retries || m.hedge != nil }

// ReadsPushback reports whether the method's attempt policy reads the
// server's pushback (pushback.With): it retries, hedges or counts its
// calls in the retry budget.
func (m *Method) ReadsPushback() bool { return m.attempts != nil || m.hedge != nil }

// Hedges reports whether the method hedges.
func (m *Method) Hedges() bool { return m.hedge != nil }

// Breaker returns the method's circuit breaker, nil when it has none.
func (m *Method) Breaker() *circuitbreaker.Breaker { return m.breaker }

// Bulkhead returns the method's bulkhead, nil when it has none.
func (m *Method) Bulkhead() *bulkhead.Bulkhead { return m.bulkhead }

type breakerEntry struct {
	b    *circuitbreaker.Breaker
	cfg  circuitbreaker.Config // the configuration it was built from
	gate resilience.Gate
	kept bool // carried over by Reload
	by   method
}

type bulkheadEntry struct {
	b    *bulkhead.Bulkhead
	cfg  bulkhead.Config
	gate resilience.Gate
	by   method
}

// method names the method whose first call built a policy of a key: a
// configuration that resolves it to another key, or to none, uses the key
// no more (a method may not switch a service's breaker or bulkhead off, or
// change its keyBy, alone: see dropUnused).
type method struct{ group, name string }

type throttlerEntry struct {
	cfg     throttler.Config
	breaker *circuitbreaker.Breaker
	gate    resilience.Gate
	by      method
}

type limiterEntry struct {
	l    *ratelimiter.Limiter
	cfg  ratelimiter.Config
	gate resilience.Gate
	by   method
}

// build resolves one method's policies. Called with e.mu held.
func (e *Engine) build(st *state, group, name string) *Method {
	s := st.cfg.Resolve(e.opts.Scope, group, name)
	o := &e.opts
	m := &Method{e: e, name: group + "/" + name, Settings: s, observe: s.Observe,
		classes: classes{t: e.t, failure: codeset.New(s.FailureCodes), ignored: codeset.New(s.IgnoredCodes), cl: classerOf(e.t)}}
	if !o.ServerSide {
		m.call = resilience.Attach(o.Observer, resilience.Source{Kind: resilience.KindCall, Name: m.name})
	}
	// The gates of an attempt, outer to inner (see order.go).
	var g gates
	throttleSlot := time.Duration(-1) // no throttler
	if s.Breaker != nil && !o.ServerSide {
		if be := e.breakerOf(st, s.Key, *s.Breaker, method{group, name}); be != nil {
			m.breaker, g.breaker = be.b, be.gate
		}
	}
	if s.RateLimiter != nil {
		if le := e.limiterOf(st, s.Key, *s.RateLimiter, method{group, name}); le != nil {
			m.limiter, g.limiter = le.l, le.gate
		}
	}
	if s.Throttler != nil && !o.ServerSide {
		if te := e.throttlerOf(st, s.Key, *s.Throttler, m.breaker, &m.classes, method{group, name}); te != nil {
			g.throttler, throttleSlot = te.gate, te.cfg.Window/10 // its window's 10 slots
		}
	}
	if s.Bulkhead != nil {
		if be := e.bulkheadOf(st, s.Key, *s.Bulkhead, method{group, name}); be != nil {
			m.bulkhead, g.bulkhead = be.b, be.gate
		}
	}
	m.waits = s.Bulkhead != nil && s.Bulkhead.MaxWaitDuration > 0 || s.RateLimiter != nil && s.RateLimiter.TimeoutDuration > 0
	m.unary = m.pipeline(g)
	m.stream = m.unary
	if o.ServerSide {
		return m
	}
	m.retryable = matcher{t: e.t, codes: codeset.New(s.RetryableCodes), uncoded: o.RetryUncoded, cl: classerOf(e.t)}
	switch {
	case s.Hedge != nil:
		m.nonFatal = matcher{t: e.t, codes: codeset.New(s.NonFatalCodes), uncoded: o.RetryUncoded, cl: classerOf(e.t)}
		m.hedge = e.newHedge(st, m, *s.Hedge)
		// A client- or bidi-streaming call cannot be hedged (its messages go
		// to one stream at a time): it is retried instead, as gRFC A6
		// retries a stream until it commits, with the hedging policy's
		// attempts and non-fatal codes, hedgingDelay apart.
		m.retryable = m.nonFatal
		m.attempts = e.newRetry(st, m, streamRetry(*s.Hedge), o.Observer)
	case s.Retry != nil:
		m.attempts = e.newRetry(st, m, *s.Retry, o.Observer)
		m.retries = true
	case st.throttle != nil:
		rc := retry.DefaultConfig()
		rc.MaxAttempts = 1
		m.attempts = e.newRetry(st, m, rc, nil)
	}
	if s.DeadLetter != nil && e.replays() {
		q, err := e.dl.Queue(s.Key, *s.DeadLetter)
		if err != nil {
			slog.Error("meshless: the dead-letter queue cannot be opened; the key's calls are not deferred", "key", s.Key, "error", err)
		} else {
			m.dlq, m.dlOn = q, s.DeadLetter.Config.On
		}
	}
	m.unaryDeadlines = deadline.NewPlan(m.newTimeout(s.PerAttempt, timeout.Attempt), m.newTimeout(s.Overall, timeout.Overall))
	m.plain = m.attempts != nil && !m.observe && !m.waits && e.realTime
	if m.plain && e.system && o.Observer == nil && !e.timed {
		m.endFree = m.unaryDeadlines.FirstBound()
		if throttleSlot >= 0 && m.endFree > throttleSlot {
			m.endFree = 0 // a success could be counted more than a slot before its end
		}
		if m.breaker != nil && m.breaker.Config().SlidingWindowType == circuitbreaker.TimeBased {
			// Its window holds the calls that ended in its last seconds: a
			// success placed at its start could leave it early. A running
			// breaker keeps its window type (Reconfigure refuses a new one).
			m.endFree = 0
		}
	}
	m.streamDeadlines = deadline.NewPlan(m.newTimeout(s.StreamPerAttempt, timeout.Attempt), m.newTimeout(s.StreamOverall, timeout.Overall))
	return m
}

// pipeline returns the method's attempt pipeline (order.go), in observe
// mode when the method observes.
func (m *Method) pipeline(g gates) *pipeline.Pipeline {
	p := g.inOrder(&m.classes, m.e.opts.Clock)
	if m.observe {
		p = p.Observing()
	}
	if m.waits {
		p = p.Waiting()
	}
	return p
}

// streamRetry is the retry policy of a hedging method's calls that cannot
// be hedged.
func streamRetry(h retry.HedgeConfig) retry.Config {
	d := max(h.HedgingDelay, time.Millisecond)
	return retry.Config{MaxAttempts: h.MaxAttempts, InitialBackoff: d, MaxBackoff: d, BackoffMultiplier: 1}
}

func (m *Method) newTimeout(d time.Duration, scope timeout.Scope) *timeout.Timeout {
	if d <= 0 {
		return nil
	}
	opts := []timeout.Option{timeout.WithScope(scope), timeout.WithName(m.name), timeout.WithObserver(m.e.opts.Observer)}
	if m.observe {
		opts = append(opts, timeout.WithObserve())
	}
	t, _ := timeout.New(d, opts...)
	return t
}

func (e *Engine) newRetry(st *state, m *Method, rc retry.Config, obs resilience.Observer) *retry.Retry {
	rc.Name = m.name
	opts := []retry.Option{
		retry.WithConfig(rc),
		retry.WithRetryable(m.retryable.match),
		retry.WithClassifier(m.classes.classifier()),
		retry.WithPushback(m.classes.pushbackOf),
		retry.WithClock(e.opts.Clock),
		retry.WithObserver(obs),
	}
	if st.throttle != nil {
		opts = append(opts, retry.WithThrottle(st.throttle))
	}
	if m.observe {
		opts = append(opts, retry.WithObserve())
	}
	r, _ := retry.New(opts...) // validated with the configuration
	return r
}

func (e *Engine) newHedge(st *state, m *Method, hc retry.HedgeConfig) *retry.Hedge {
	hc.Name = m.name
	opts := []retry.HedgeOption{
		retry.WithHedgeConfig(hc),
		retry.WithNonFatal(m.isNonFatal),
		retry.WithHedgePushback(m.classes.pushbackOf),
		retry.WithHedgeClock(e.opts.Clock),
		retry.WithHedgeObserver(e.opts.Observer),
	}
	if st.throttle != nil {
		opts = append(opts, retry.WithHedgeThrottle(st.throttle))
	}
	if m.observe {
		opts = append(opts, retry.WithHedgeObserve())
	}
	h, _ := retry.NewHedge(opts...)
	return h
}

// isNonFatal: a non-fatal code (and not a relayed rejection: an answer,
// never hedged); or a copy that its own attempt timeout ended: it got no
// answer, and the copies in flight may still. A copy the overall timeout
// ended is fatal: every copy after it would end at once too (an error
// without a code, as HTTP's timeouts are, would match a transport's
// uncoded errors otherwise).
func (m *Method) isNonFatal(err error) bool {
	if te, ok := timeoutOf(err); ok {
		return te.Scope == timeout.Attempt
	}
	return m.nonFatal.match(err)
}

func (e *Engine) breakerOf(st *state, key string, cfg circuitbreaker.Config, by method) *breakerEntry {
	if be, ok := st.breakers[key]; ok {
		if be.cfg == cfg {
			return be
		}
		if be.kept && be.cfg.SlidingWindowType == cfg.SlidingWindowType && be.cfg.SlidingWindowSize == cfg.SlidingWindowSize {
			// Reloaded with new thresholds and the same window: keep the
			// breaker's state and counts.
			if err := be.b.Reconfigure(circuitbreaker.WithConfig(cfg)); err == nil {
				be.cfg = cfg
				return be
			}
		}
		e.cluster.Remove(be.b)
		be.b.Close() // replaced: its gauges go
	}
	b, err := circuitbreaker.New(circuitbreaker.WithConfig(cfg), circuitbreaker.WithClock(e.opts.Clock), circuitbreaker.WithObserver(e.gauged()))
	if err != nil {
		return nil // cannot happen: the configuration was validated
	}
	e.cluster.Add(b)
	if e.replays() {
		// A breaker that closes replays its key's deferred calls: its
		// queue's, if its configuration (now or after a reload) has one.
		breakerhooks.OnClosed(b, func() { e.Kick(key) })
	}
	be := &breakerEntry{b: b, cfg: cfg, gate: wire(b, e.t), by: by}
	st.breakers[key] = be
	return be
}

// gauged is the observer of a new breaker or bulkhead, whose gauges the
// observer keeps until the policy is closed: none once the engine is
// closed, since nothing would close a policy made after Close (a call
// that still goes through a closed chain's interceptors). Called with e.mu
// held.
func (e *Engine) gauged() resilience.Observer {
	if e.closed {
		return nil
	}
	return e.opts.Observer
}

func (e *Engine) bulkheadOf(st *state, key string, cfg bulkhead.Config, by method) *bulkheadEntry {
	if be, ok := st.bulkheads[key]; ok {
		if be.cfg == cfg {
			return be
		}
		be.b.Close() // replaced: its gauges go
	}
	b, err := bulkhead.New(bulkhead.WithConfig(cfg), bulkhead.WithClock(e.opts.Clock), bulkhead.WithObserver(e.gauged()))
	if err != nil {
		return nil // cannot happen: the configuration was validated
	}
	be := &bulkheadEntry{b: b, cfg: cfg, gate: wire(b, e.t), by: by}
	st.bulkheads[key] = be
	return be
}

// limiterOf returns the rate limiter of key, kept across reloads while its
// settings do not change (its period's count with it).
func (e *Engine) limiterOf(st *state, key string, cfg ratelimiter.Config, by method) *limiterEntry {
	if le, ok := st.limiters[key]; ok && le.cfg == cfg {
		return le
	}
	l, err := ratelimiter.New(ratelimiter.WithConfig(cfg), ratelimiter.WithObserver(e.opts.Observer))
	if err != nil {
		return nil // cannot happen: the configuration was validated
	}
	le := &limiterEntry{l: l, cfg: cfg, gate: wire(l, e.t), by: by}
	st.limiters[key] = le
	return le
}

func (e *Engine) throttlerOf(st *state, key string, cfg throttler.Config, b *circuitbreaker.Breaker, c *classes, by method) *throttlerEntry {
	if te, ok := st.throttlers[key]; ok && te.cfg == cfg && te.breaker == b {
		return te
	}
	t, err := throttler.New(throttler.WithConfig(cfg), throttler.WithClock(e.opts.Clock), throttler.WithVerdict(c.verdicts()),
		throttler.WithObserver(e.opts.Observer))
	if err != nil {
		return nil // cannot happen: the configuration was validated
	}
	te := &throttlerEntry{cfg: cfg, breaker: b, gate: wire(newThrottleGate(t, e.opts.Clock, b), e.t), by: by}
	st.throttlers[key] = te
	return te
}
