package grpcmw

import (
	"context"

	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
)

// RateLimiterSection is the rateLimiter section; see docs/ratelimiter.md.
// Unlike the other sections it is off unless some level writes it: a
// written section is on unless it says enabled: false.
type RateLimiterSection struct {
	Enabled            *bool     `yaml:"enabled,omitempty"`
	LimitForPeriod     *int      `yaml:"limitForPeriod,omitempty"`
	LimitRefreshPeriod *Duration `yaml:"limitRefreshPeriod,omitempty"`
	TimeoutDuration    *Duration `yaml:"timeoutDuration,omitempty"`
}

// rateLimiterOn reports whether the levels turn the rate limiter on: one of
// them writes the section, and the last enabled written is not false.
func rateLimiterOn(levels ...*Policies) bool {
	written, on := false, true
	for _, p := range levels {
		if p == nil || p.RateLimiter == nil {
			continue
		}
		written = true
		if e := p.RateLimiter.Enabled; e != nil {
			on = *e
		}
	}
	return written && on
}

// rateLimiterConfig maps a resolved rateLimiter section onto the limiter's
// Config, once, and checks it.
func rateLimiterConfig(r *RateLimiterSection, name string) (ratelimiter.Config, error) {
	c := ratelimiter.Config{
		Name:               name,
		LimitForPeriod:     *r.LimitForPeriod,
		LimitRefreshPeriod: r.LimitRefreshPeriod.D(),
		TimeoutDuration:    r.TimeoutDuration.D(),
	}
	return c, c.Validate()
}

type limiterEntry struct {
	l   *ratelimiter.Limiter
	cfg ratelimiter.Config
	rej rejectionCache
}

// limiter returns the rate limiter of key, kept across reloads while its
// settings do not change (its period's count with it).
func (c *Chain) limiter(st *state, key string, r *RateLimiterSection) *limiterEntry {
	cfg, _ := rateLimiterConfig(r, key) // validated with the config
	if e, ok := st.limiters[key]; ok && e.cfg == cfg {
		return e
	}
	l, err := ratelimiter.New(ratelimiter.WithConfig(cfg), ratelimiter.WithObserver(c.opts.observer))
	if err != nil {
		return nil // cannot happen: the config was validated
	}
	e := &limiterEntry{l: l, cfg: cfg}
	st.limiters[key] = e
	return e
}

// Enter admits an attempt through the rate limiter; a refusal is the
// limiter's error on the wire.
func (e *limiterEntry) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	ctx, p, err := e.l.Enter(ctx)
	if err != nil {
		return ctx, p, e.rej.wrap(err)
	}
	return ctx, p, nil
}

// Exit ends the attempt; a rate limiter's permit is spent, nothing goes back.
func (e *limiterEntry) Exit(ctx context.Context, p resilience.Permit, r resilience.Result) error {
	return e.l.Exit(ctx, p, r)
}

// Limiter returns the rate limiter of key ("pkg.Svc" or "pkg.Svc/Method"),
// once a call has created it.
func (c *Chain) Limiter(key string) (*ratelimiter.Limiter, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.state.Load().limiters[key]
	if !ok {
		return nil, false
	}
	return e.l, true
}
