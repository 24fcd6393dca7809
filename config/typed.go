package config

import (
	"errors"
	"fmt"
	"sort"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/retry"
)

// BreakerConfig maps a resolved circuitBreaker section onto the breaker's
// Config, once, and checks it.
func BreakerConfig(cb *CircuitBreakerSection, name string) (circuitbreaker.Config, error) {
	c := circuitbreaker.DefaultConfig()
	wt, werr := circuitbreaker.ParseWindowType(*cb.SlidingWindowType)
	mode, merr := circuitbreaker.ParseMode(*cb.Mode)
	c.Name = name
	c.SlidingWindowType = wt
	c.SlidingWindowSize = *cb.SlidingWindowSize
	c.MinimumNumberOfCalls = *cb.MinimumNumberOfCalls
	c.FailureRateThreshold = *cb.FailureRateThreshold
	c.SlowCallDurationThreshold = cb.SlowCallDurationThreshold.D()
	c.SlowCallRateThreshold = *cb.SlowCallRateThreshold
	c.WaitDurationInOpenState = cb.WaitDurationInOpenState.D()
	c.MaxWaitDurationInOpenState = cb.MaxWaitDurationInOpenState.D()
	c.PermittedNumberOfCallsInHalfOpenState = *cb.PermittedNumberOfCallsInHalfOpenState
	c.MaxWaitDurationInHalfOpenState = cb.MaxWaitDurationInHalfOpenState.D()
	c.Mode = mode
	if err := errors.Join(werr, merr); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// RetryConfig maps a resolved retry section onto the policy's Config and
// checks it, with its status codes.
func RetryConfig(r *RetrySection) (retry.Config, error) {
	c := retry.Config{
		MaxAttempts:       *r.MaxAttempts,
		InitialBackoff:    r.InitialBackoff.D(),
		MaxBackoff:        r.MaxBackoff.D(),
		BackoffMultiplier: *r.BackoffMultiplier,
		Jitter:            *r.Jitter,
	}
	errs := []error{c.Validate()}
	if len(r.RetryableStatusCodes) == 0 {
		errs = append(errs, &PathError{Path: "retryableStatusCodes", Problem: "must name at least one code (turn retries off with enabled: false or maxAttempts: 1)"})
	}
	if r.RetryableStatusCodes.Has(0) {
		errs = append(errs, &PathError{Path: "retryableStatusCodes", Problem: "OK cannot be retried"})
	}
	return c, errors.Join(errs...)
}

// BulkheadConfig maps a resolved bulkhead section onto the bulkhead's
// Config and checks it.
func BulkheadConfig(b *BulkheadSection, name string) (bulkhead.Config, error) {
	c := bulkhead.Config{Name: name, MaxConcurrentCalls: *b.MaxConcurrentCalls, MaxWaitDuration: b.MaxWaitDuration.D()}
	var errs []error
	if a := b.Adaptive; a != nil {
		// The bulkhead package reads a zero limit as "the default"; in YAML a
		// written 0 is a mistake.
		for _, f := range []struct {
			key string
			v   *int
		}{{"adaptive.minLimit", a.MinLimit}, {"adaptive.maxLimit", a.MaxLimit}, {"adaptive.initialLimit", a.InitialLimit}} {
			if f.v != nil && *f.v < 1 {
				errs = append(errs, &PathError{Path: f.key, Problem: fmt.Sprintf("must be at least 1, got %d", *f.v)})
			}
		}
		c.Adaptive = true
		c.AdaptiveLimits = bulkhead.Adaptive{MinLimit: deref(a.MinLimit), MaxLimit: deref(a.MaxLimit), InitialLimit: deref(a.InitialLimit)}
	}
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// RetryThrottling is the retryThrottling section resolved against its
// defaults: a comparable value. The zero value is throttling off.
type RetryThrottling struct {
	On                    bool
	MaxTokens, TokenRatio float64
}

// Throttling returns the retryThrottling section resolved.
func (c *Config) Throttling() RetryThrottling {
	s := RetryThrottling{On: true, MaxTokens: RetryThrottlingMaxTokens, TokenRatio: RetryThrottlingTokenRatio}
	if t := c.RetryThrottling; t != nil {
		if t.Enabled != nil && !*t.Enabled {
			return RetryThrottling{}
		}
		if t.MaxTokens != nil {
			s.MaxTokens = *t.MaxTokens
		}
		if t.TokenRatio != nil {
			s.TokenRatio = *t.TokenRatio
		}
	}
	return s
}

// NewThrottle builds the client's retry throttle; nil when it is off.
func (s RetryThrottling) NewThrottle() (*retry.Throttle, error) {
	if !s.On {
		return nil, nil
	}
	return retry.NewThrottle(s.MaxTokens, s.TokenRatio)
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortStrings(s []string) { sort.Strings(s) }
