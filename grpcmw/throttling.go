package grpcmw

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/codes"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/throttler"
)

// This file wires client-side adaptive throttling (package throttler, the
// Google SRE book's) into the chain: the adaptiveThrottling section, its
// gate and its verdict on an attempt's result. order.go puts the gate
// inside the circuit breaker and outside the bulkhead.

// AdaptiveThrottlingSection is the adaptiveThrottling section (client-side
// adaptive throttling, docs/overload.md). It is keyed like the circuit
// breaker: one throttler per service by default.
type AdaptiveThrottlingSection struct {
	Enabled *bool `yaml:"enabled,omitempty"`
	// Multiplier is K: requests the backend may get per request it accepts.
	Multiplier       *float64  `yaml:"multiplier,omitempty"`
	Window           *Duration `yaml:"window,omitempty"`
	MinimumRequests  *int      `yaml:"minimumRequests,omitempty"`
	MaxRejectionRate *float64  `yaml:"maxRejectionRate,omitempty"` // percent
}

// builtinThrottling is the section's documented defaults.
func builtinThrottling() *AdaptiveThrottlingSection {
	d := throttler.DefaultConfig()
	return &AdaptiveThrottlingSection{
		Enabled:          Ptr(true),
		Multiplier:       Ptr(d.Multiplier),
		Window:           Dur(d.Window),
		MinimumRequests:  Ptr(d.MinimumRequests),
		MaxRejectionRate: Ptr(d.MaxRejectionRate),
	}
}

// throttlerConfig maps a resolved adaptiveThrottling section onto the
// throttler's Config and checks it.
func throttlerConfig(s *AdaptiveThrottlingSection, name string) (throttler.Config, error) {
	c := throttler.Config{Name: name, Multiplier: *s.Multiplier, Window: s.Window.D(),
		MinimumRequests: *s.MinimumRequests, MaxRejectionRate: *s.MaxRejectionRate}
	return c, c.Validate()
}

type throttlerEntry struct {
	t   *throttler.Throttler
	cfg throttler.Config
	rej rejectionCache
	// breaker is the circuit breaker of the same key, in front of the
	// throttler; nil when it is off. stoodAside is set while the breaker is
	// not closed.
	breaker    *circuitbreaker.Breaker
	stoodAside atomic.Bool
}

// Enter admits an attempt through the throttler; a refusal is the
// throttler's error on the wire. While the breaker in front is not closed
// (open, half-open: it already holds the calls back, and lets its probes
// through to learn whether the backend is back), the throttler stands aside:
// it admits the attempt and counts nothing. When the breaker closes again,
// its probes having passed, the throttler starts afresh: it does not hold
// back, as after an overload, a backend the probes just showed healthy.
func (e *throttlerEntry) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	if e.breaker != nil {
		if s := e.breaker.State(); s == circuitbreaker.StateOpen || s == circuitbreaker.StateHalfOpen || s == circuitbreaker.StateForcedOpen {
			e.stoodAside.Store(true)
			return ctx, resilience.Permit{}, nil
		}
		if e.stoodAside.Load() && e.stoodAside.CompareAndSwap(true, false) {
			e.t.Reset()
		}
	}
	ctx, p, err := e.t.Enter(ctx)
	if err != nil {
		return ctx, p, e.rej.wrap(err)
	}
	return ctx, p, nil
}

// Exit counts the attempt's result in the throttler.
func (e *throttlerEntry) Exit(ctx context.Context, p resilience.Permit, r resilience.Result) error {
	return e.t.Exit(ctx, p, r)
}

func (c *Chain) throttler(st *state, key string, s *AdaptiveThrottlingSection, breaker *breakerEntry) *throttlerEntry {
	cfg, _ := throttlerConfig(s, key) // validated with the config
	var b *circuitbreaker.Breaker
	if breaker != nil {
		b = breaker.b
	}
	if e, ok := st.throttlers[key]; ok && e.cfg == cfg && e.breaker == b {
		return e
	}
	t, err := throttler.New(throttler.WithConfig(cfg), throttler.WithClock(c.opts.clock), throttler.WithVerdict(throttleVerdict))
	if err != nil {
		return nil // cannot happen: the config was validated
	}
	e := &throttlerEntry{t: t, cfg: cfg, breaker: b}
	st.throttlers[key] = e
	return e
}

// throttleVerdict says what an attempt's result tells the throttler: an
// answer from a backend that did its work (OK, NOT_FOUND…) is an accept; a
// failure (UNAVAILABLE, DEADLINE_EXCEEDED…) or RESOURCE_EXHAUSTED (a backend
// that sheds, or a meshless one hop down that rejected) is a refusal; a
// local rejection inside the throttler or a call the caller gave up is not
// counted.
func throttleVerdict(r resilience.Result) throttler.Verdict {
	if r.Err == nil {
		return throttler.Accepted
	}
	if resilience.IsRejection(r.Err) {
		return throttler.Uncounted
	}
	if code, ok := codeOf(r.Err); ok && code == codes.ResourceExhausted {
		return throttler.Refused
	}
	return throttler.DefaultVerdict(r)
}
