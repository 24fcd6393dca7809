package otelmw

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/meshless/meshless/circuitbreaker"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/meshless/meshless/resilience"
)

// ScopeName is the instrumentation scope of the Observer's meter: the
// package's import path.
const ScopeName = "github.com/meshless/meshless/otelmw"

// The metric names of the catalogue (docs/metrics.md).
const (
	metricBreakerState       = "meshless.circuit_breaker.state"
	metricBreakerTransitions = "meshless.circuit_breaker.transitions"
	metricBreakerCalls       = "meshless.circuit_breaker.calls"
	metricBreakerFailure     = "meshless.circuit_breaker.failure_ratio"
	metricBreakerSlow        = "meshless.circuit_breaker.slow_call_ratio"
	metricRetryCalls         = "meshless.retry.calls"
	metricRetryAttempts      = "meshless.retry.attempts"
	metricBulkheadActive     = "meshless.bulkhead.call.active"
	metricBulkheadLimit      = "meshless.bulkhead.limit"
	metricBulkheadCalls      = "meshless.bulkhead.calls"
	metricBulkheadWait       = "meshless.bulkhead.wait.duration"
	metricTimeoutCalls       = "meshless.timeout.calls"
	metricCallDuration       = "meshless.call.duration"
	metricRateLimiterCalls   = "meshless.rate_limiter.calls"
	metricHedgingAttempts    = "meshless.hedging.attempts"
)

// durationBuckets are the explicit bucket boundaries, in seconds, of the
// duration histograms: OpenTelemetry's advice for RPC durations, as
// otelgrpc uses.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// Observer records what meshless's policies do as OpenTelemetry metrics (the
// catalogue of docs/metrics.md) and adds span events for retries and
// rejections to the caller's span. Install it with each policy's
// WithObserver option, or once for a whole client with grpcmw.WithObserver.
//
// Attach builds, once per policy instance, every attribute set and option
// slice its events need, so that recording an event allocates nothing.
// Breakers and bulkheads are also read, through their Source.Snapshot, by
// one callback for the observable instruments; [Observer.Close] unregisters
// it.
//
// An Observer is safe for concurrent use.
type Observer struct {
	cfg config

	breakerState        metric.Int64ObservableUpDownCounter
	breakerTransitions  metric.Int64Counter
	breakerCalls        metric.Int64Counter
	breakerFailureRatio metric.Float64ObservableGauge
	breakerSlowRatio    metric.Float64ObservableGauge
	retryCalls          metric.Int64Counter
	retryAttempts       metric.Int64Counter
	bulkheadActive      metric.Int64UpDownCounter
	bulkheadLimit       metric.Int64ObservableUpDownCounter
	bulkheadCalls       metric.Int64Counter
	bulkheadWait        metric.Float64Histogram
	timeoutCalls        metric.Int64Counter
	callDuration        metric.Float64Histogram
	rateLimiterCalls    metric.Int64Counter
	hedgingAttempts     metric.Int64Counter
	throttlerCalls      metric.Int64Counter
	observeDecisions    metric.Int64Counter

	reg metric.Registration // nil if registering the callback failed

	mp       metric.MeterProvider
	outliers struct {
		once sync.Once
		l    *OutlierListener
	}

	mu      sync.Mutex
	closed  bool
	methods map[string]struct{} // rpc.method values in use, at most cfg.maxMethods
	gauges  atomic.Pointer[[]*gauged]
}

var _ resilience.Observer = (*Observer)(nil)

// gauged is a breaker or bulkhead that the callback reads.
type gauged struct {
	kind     resilience.Kind
	key      string // the instance's name
	snapshot func() resilience.Snapshot
	name     []metric.ObserveOption                             // the instance's name alone
	states   [len(circuitbreaker.States)][]metric.ObserveOption // breaker: name + each state
}

// New returns an Observer that records with a meter named [ScopeName] from
// mp; a nil mp means otel.GetMeterProvider(). It creates every instrument
// of the catalogue and registers one callback for the observable ones.
//
// An invalid option is an error. An error from the meter provider while
// creating an instrument or registering the callback is not: it goes to
// otel.Handle, and the Observer records what it can.
func New(mp metric.MeterProvider, opts ...Option) (*Observer, error) {
	cfg := defaultConfig()
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("otelmw: %w", err)
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName)
	o := &Observer{cfg: cfg, methods: map[string]struct{}{}, mp: mp}

	o.breakerState = instrument(m.Int64ObservableUpDownCounter(metricBreakerState,
		metric.WithUnit("{circuit_breaker}"),
		metric.WithDescription("The state of each circuit breaker, one-hot: 1 for its current state, 0 for every other state.")),
	)(noop.Int64ObservableUpDownCounter{})
	o.breakerTransitions = instrument(m.Int64Counter(metricBreakerTransitions,
		metric.WithUnit("{transition}"),
		metric.WithDescription("State changes of circuit breakers, by previous and new state.")),
	)(noop.Int64Counter{})
	o.breakerCalls = instrument(m.Int64Counter(metricBreakerCalls,
		metric.WithUnit("{call}"),
		metric.WithDescription("Calls through circuit breakers, by outcome (success, failure, ignored, rejected) and whether they were slow.")),
	)(noop.Int64Counter{})
	o.breakerFailureRatio = instrument(m.Float64ObservableGauge(metricBreakerFailure,
		metric.WithUnit("1"),
		metric.WithDescription("The failure rate of each circuit breaker's window, 0 to 1; not reported below the minimum number of calls.")),
	)(noop.Float64ObservableGauge{})
	o.breakerSlowRatio = instrument(m.Float64ObservableGauge(metricBreakerSlow,
		metric.WithUnit("1"),
		metric.WithDescription("The slow-call rate of each circuit breaker's window, 0 to 1; not reported below the minimum number of calls.")),
	)(noop.Float64ObservableGauge{})
	o.retryCalls = instrument(m.Int64Counter(metricRetryCalls,
		metric.WithUnit("{call}"),
		metric.WithDescription("Logical calls made by retry policies, by outcome.")),
	)(noop.Int64Counter{})
	o.retryAttempts = instrument(m.Int64Counter(metricRetryAttempts,
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts made by retry policies, the first attempt of each call included.")),
	)(noop.Int64Counter{})
	o.bulkheadActive = instrument(m.Int64UpDownCounter(metricBulkheadActive,
		metric.WithUnit("{call}"),
		metric.WithDescription("Calls holding a bulkhead's permit.")),
	)(noop.Int64UpDownCounter{})
	o.bulkheadLimit = instrument(m.Int64ObservableUpDownCounter(metricBulkheadLimit,
		metric.WithUnit("{call}"),
		metric.WithDescription("How many calls each bulkhead admits at once (an adaptive bulkhead's limit moves).")),
	)(noop.Int64ObservableUpDownCounter{})
	o.bulkheadCalls = instrument(m.Int64Counter(metricBulkheadCalls,
		metric.WithUnit("{call}"),
		metric.WithDescription("Calls that bulkheads admitted or rejected.")),
	)(noop.Int64Counter{})
	o.bulkheadWait = instrument(m.Float64Histogram(metricBulkheadWait,
		metric.WithUnit("s"),
		metric.WithDescription("How long calls that queued for a bulkhead's permit waited, by outcome."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)),
	)(noop.Float64Histogram{})
	o.timeoutCalls = instrument(m.Int64Counter(metricTimeoutCalls,
		metric.WithUnit("{call}"),
		metric.WithDescription("Calls run under a timeout, by kind (attempt, overall) and outcome (completed, timed_out).")),
	)(noop.Int64Counter{})
	o.callDuration = instrument(m.Float64Histogram(metricCallDuration,
		metric.WithUnit("s"),
		metric.WithDescription("The duration of logical client calls, gRPC and HTTP: every attempt and backoff, as the caller saw it."),
		metric.WithExplicitBucketBoundaries(durationBuckets...)),
	)(noop.Float64Histogram{})

	o.rateLimiterCalls = instrument(m.Int64Counter(metricRateLimiterCalls,
		metric.WithUnit("{call}"),
		metric.WithDescription("Calls that rate limiters permitted or rejected.")),
	)(noop.Int64Counter{})

	o.hedgingAttempts = instrument(m.Int64Counter(metricHedgingAttempts,
		metric.WithUnit("{attempt}"),
		metric.WithDescription("Copies sent by hedging policies, the first of each call included, by which copy's answer the call returned (first, hedge, none).")),
	)(noop.Int64Counter{})

	o.throttlerCalls = instrument(m.Int64Counter(metricThrottlerCalls,
		metric.WithUnit("{call}"),
		metric.WithDescription("Requests that adaptive throttlers admitted or rejected locally.")),
	)(noop.Int64Counter{})
	o.observeDecisions = instrument(m.Int64Counter(metricObserveDecisions,
		metric.WithUnit("{decision}"),
		metric.WithDescription("What policies in observe mode decided and did not do: a call they would have rejected, timed out, retried or hedged.")),
	)(noop.Int64Counter{})

	reg, err := m.RegisterCallback(o.observe, o.breakerState, o.breakerFailureRatio, o.breakerSlowRatio, o.bulkheadLimit)
	if err != nil {
		otel.Handle(err)
	} else {
		o.reg = reg
	}
	return o, nil
}

// instrument hands an instrument creation error to otel.Handle and returns
// a function that replaces a missing instrument with a no-op one.
func instrument[T any](inst T, err error) func(fallback T) T {
	if err != nil {
		otel.Handle(err)
	}
	return func(fallback T) T {
		if any(inst) == nil {
			return fallback
		}
		return inst
	}
}

// Close unregisters the callback of the observable instruments (breaker
// state and ratios, bulkhead limit): nothing is observed for them after
// Close returns, and the Observer no longer holds the breakers and
// bulkheads it was attached to. Recorders already attached keep recording
// to the synchronous instruments (counters, histograms), so that an
// up-down counter such as meshless.bulkhead.call.active stays consistent;
// shut the MeterProvider down to stop those. Close is idempotent.
func (o *Observer) Close() error {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return nil
	}
	o.closed = true
	o.gauges.Store(nil)
	reg := o.reg
	o.mu.Unlock()
	var errs []error
	if reg != nil {
		errs = append(errs, reg.Unregister())
	}
	o.outliers.once.Do(func() {}) // no listener made after Close
	if o.outliers.l != nil {
		errs = append(errs, o.outliers.l.Close())
	}
	return errors.Join(errs...)
}

// Attach returns the recorder of one policy instance's events, with every
// attribute set they need built now. It returns nil for kinds it records
// nothing for (resilience.KindOther).
//
// Breakers and bulkheads are kept for the observable instruments by kind
// and name. Every instance attached is observed until its recorder is
// released (resilience.Releaser: a policy's Close, grpcmw's Close and
// Reload do it); instances that share a name — a client and a server, or two
// chains, with the same service — share its series: the one-hot states and
// the limits are summed, the ratios are the highest. None hides another.
//
// Attach creates the source's counter series at zero, so that Prometheus's
// rate and increase count the first increment (they ignore a series' first
// sample: without this, a breaker's first trip would show as no trip).
func (o *Observer) Attach(src resilience.Source) resilience.Recorder {
	switch src.Kind {
	case resilience.KindCircuitBreaker:
		r := newBreakerRecorder(o, src.Name)
		r.zero()
		if src.Snapshot != nil {
			g := &gauged{kind: src.Kind, key: src.Name, snapshot: src.Snapshot, name: observeOpts(r.base)}
			for i, st := range circuitbreaker.States {
				g.states[i] = observeOpts(r.base, attrState.String(stateValue(st)))
			}
			r.g = g
			o.observeInstance(g)
		}
		return r
	case resilience.KindBulkhead:
		r := newBulkheadRecorder(o, src.Name)
		r.zero()
		r.queues = src.Queues
		if src.Snapshot != nil {
			r.g = &gauged{kind: src.Kind, key: src.Name, snapshot: src.Snapshot, name: observeOpts(r.base)}
			o.observeInstance(r.g)
		}
		return r
	case resilience.KindRetry:
		r := newRetryRecorder(o, src.Name)
		r.zero()
		return r
	case resilience.KindTimeout:
		r := newTimeoutRecorder(o, src.Name, src.Scope)
		r.zero()
		return r
	case resilience.KindCall:
		if src.Scope == HTTPScope {
			return newHTTPCallRecorder(o, src.Name)
		}
		return newCallRecorder(o, src.Name)
	case resilience.KindOutlier:
		if l := o.outlierListener(); l != nil {
			return outlierRecorder{l}
		}
	case resilience.KindRateLimiter:
		r := newRateLimiterRecorder(o, src.Name)
		r.zero()
		return r
	case resilience.KindHedging:
		r := newHedgingRecorder(o, src.Name)
		r.zero()
		return r
	case resilience.KindThrottler:
		r := newThrottlerRecorder(o, src.Name)
		r.zero()
		return r
	}
	return nil
}

// outlierListener returns the listener that records the outlier balancers'
// events, made on first use: a process without outlier detection gets no
// meshless.outlier.* instruments.
func (o *Observer) outlierListener() *OutlierListener {
	o.outliers.once.Do(func() { o.outliers.l, _ = NewOutlierListener(o.mp) })
	return o.outliers.l
}

// observeInstance adds an instance the callback reads.
func (o *Observer) observeInstance(g *gauged) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	var cur []*gauged
	if p := o.gauges.Load(); p != nil {
		cur = *p
	}
	next := make([]*gauged, len(cur), len(cur)+1)
	copy(next, cur)
	next = append(next, g)
	o.gauges.Store(&next)
}

// release stops observing g.
func (o *Observer) release(g *gauged) {
	if g == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.gauges.Load()
	if p == nil {
		return
	}
	next := make([]*gauged, 0, len(*p))
	for _, x := range *p {
		if x != g {
			next = append(next, x)
		}
	}
	o.gauges.Store(&next)
}

// observe is the one callback of the observable instruments. Instances
// that share a name share its series (see Attach).
func (o *Observer) observe(_ context.Context, ob metric.Observer) error {
	p := o.gauges.Load()
	if p == nil {
		return nil
	}
	type sums struct {
		g            *gauged // the first instance of the name: its option slices
		states       [len(circuitbreaker.States)]int64
		failure, slo float64
		limit        int64
	}
	byName := map[gaugeKey]*sums{}
	var order []gaugeKey
	for _, g := range *p {
		k := gaugeKey{g.kind, g.key}
		a := byName[k]
		if a == nil {
			a = &sums{g: g, failure: -1, slo: -1}
			byName[k] = a
			order = append(order, k)
		}
		s := g.snapshot()
		switch g.kind {
		case resilience.KindCircuitBreaker:
			for i, st := range circuitbreaker.States {
				if s.State == st {
					a.states[i]++
				}
			}
			a.failure, a.slo = max(a.failure, s.FailureRate), max(a.slo, s.SlowCallRate)
		case resilience.KindBulkhead:
			a.limit += int64(s.Limit)
		}
	}
	for _, k := range order {
		a := byName[k]
		switch k.kind {
		case resilience.KindCircuitBreaker:
			for i := range circuitbreaker.States {
				ob.ObserveInt64(o.breakerState, a.states[i], a.g.states[i]...)
			}
			if a.failure >= 0 {
				ob.ObserveFloat64(o.breakerFailureRatio, a.failure/100, a.g.name...)
			}
			if a.slo >= 0 {
				ob.ObserveFloat64(o.breakerSlowRatio, a.slo/100, a.g.name...)
			}
		case resilience.KindBulkhead:
			ob.ObserveInt64(o.bulkheadLimit, a.limit, a.g.name...)
		}
	}
	return nil
}

type gaugeKey struct {
	kind resilience.Kind
	name string
}
