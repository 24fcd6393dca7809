package grpcmw

import (
	"context"

	"google.golang.org/grpc/codes"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/throttler"
)

// This file wires client-side adaptive throttling (package throttler, the
// Google SRE book's) into the chain: the adaptiveThrottling section, its
// gate and its verdict on an attempt's result. order.go puts the gate
// inside the circuit breaker and outside the bulkhead.

// ReasonThrottled marks a call the adaptive throttler rejected locally
// (RESOURCE_EXHAUSTED): the backend had refused too many recent requests.
const ReasonThrottled = "THROTTLED"

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
}

// Enter admits an attempt through the throttler; a refusal is the
// throttler's error on the wire.
func (e *throttlerEntry) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
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

func (c *Chain) throttler(st *state, key string, s *AdaptiveThrottlingSection) *throttlerEntry {
	cfg, _ := throttlerConfig(s, key) // validated with the config
	if e, ok := st.throttlers[key]; ok && e.cfg == cfg {
		return e
	}
	t, err := throttler.New(throttler.WithConfig(cfg), throttler.WithClock(c.opts.clock), throttler.WithVerdict(throttleVerdict))
	if err != nil {
		return nil // cannot happen: the config was validated
	}
	e := &throttlerEntry{t: t, cfg: cfg}
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
