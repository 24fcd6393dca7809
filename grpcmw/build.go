package grpcmw

import (
	"errors"
	"sort"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/retry"
)

// breakerConfig maps a resolved circuitBreaker section onto the breaker's
// Config, once, and checks it.
func breakerConfig(cb *CircuitBreakerSection, name string) (circuitbreaker.Config, error) {
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

// retryConfig maps a resolved retry section onto the policy's Config and
// checks it, with its status codes.
func retryConfig(r *RetrySection) (retry.Config, error) {
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
	if r.RetryableStatusCodes.has(0) {
		errs = append(errs, &PathError{Path: "retryableStatusCodes", Problem: "OK cannot be retried"})
	}
	return c, errors.Join(errs...)
}

// bulkheadConfig maps a resolved bulkhead section onto the bulkhead's
// Config and checks it.
func bulkheadConfig(b *BulkheadSection, name string) (bulkhead.Config, error) {
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
				errs = append(errs, &PathError{Path: f.key, Problem: "must be at least 1"})
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

// throttleSettings is retryThrottling resolved: a comparable value.
type throttleSettings struct {
	on                    bool
	maxTokens, tokenRatio float64
}

// resolveThrottle resolves retryThrottling against its defaults.
func resolveThrottle(t *RetryThrottlingSection) throttleSettings {
	s := throttleSettings{on: true, maxTokens: 10, tokenRatio: 0.1}
	if t != nil {
		if t.Enabled != nil && !*t.Enabled {
			return throttleSettings{}
		}
		if t.MaxTokens != nil {
			s.maxTokens = *t.MaxTokens
		}
		if t.TokenRatio != nil {
			s.tokenRatio = *t.TokenRatio
		}
	}
	return s
}

// throttleOf builds the client's retry throttle; nil when it is off.
func throttleOf(t *RetryThrottlingSection) (*retry.Throttle, error) {
	s := resolveThrottle(t)
	if !s.on {
		return nil, nil
	}
	return retry.NewThrottle(s.maxTokens, s.tokenRatio)
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
