package grpcmw

import (
	"errors"
	"sort"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/retry"
)

// breakerOptions turns a resolved circuitBreaker section into options, and
// checks them by building a breaker.
func breakerOptions(cb *CircuitBreaker, name string) ([]circuitbreaker.Option, error) {
	var errs []error
	wt, err := circuitbreaker.ParseWindowType(*cb.SlidingWindowType)
	errs = append(errs, err)
	mode, err := circuitbreaker.ParseMode(*cb.Mode)
	errs = append(errs, err)
	opts := []circuitbreaker.Option{
		circuitbreaker.WithName(name),
		circuitbreaker.WithSlidingWindowType(wt),
		circuitbreaker.WithSlidingWindowSize(*cb.SlidingWindowSize),
		circuitbreaker.WithMinimumNumberOfCalls(*cb.MinimumNumberOfCalls),
		circuitbreaker.WithFailureRateThreshold(*cb.FailureRateThreshold),
		circuitbreaker.WithSlowCallDurationThreshold(cb.SlowCallDurationThreshold.D()),
		circuitbreaker.WithSlowCallRateThreshold(*cb.SlowCallRateThreshold),
		circuitbreaker.WithWaitDurationInOpenState(cb.WaitDurationInOpenState.D()),
		circuitbreaker.WithMaxWaitDurationInOpenState(cb.MaxWaitDurationInOpenState.D()),
		circuitbreaker.WithPermittedNumberOfCallsInHalfOpenState(*cb.PermittedNumberOfCallsInHalfOpenState),
		circuitbreaker.WithMaxWaitDurationInHalfOpenState(cb.MaxWaitDurationInHalfOpenState.D()),
		circuitbreaker.WithMode(mode),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if _, err := circuitbreaker.New(opts...); err != nil {
		return nil, err
	}
	return opts, nil
}

// retryOptions turns a resolved retry section into options and checks them.
func retryOptions(r *Retry) ([]retry.Option, error) {
	opts := []retry.Option{
		retry.WithMaxAttempts(*r.MaxAttempts),
		retry.WithInitialBackoff(r.InitialBackoff.D()),
		retry.WithMaxBackoff(r.MaxBackoff.D()),
		retry.WithBackoffMultiplier(*r.BackoffMultiplier),
		retry.WithJitter(*r.Jitter),
	}
	var errs []error
	if _, err := retry.New(opts...); err != nil {
		errs = append(errs, err)
	}
	if len(r.RetryableStatusCodes) == 0 {
		errs = append(errs, &PathError{Path: "retryableStatusCodes", Problem: "must name at least one code (turn retries off with enabled: false or maxAttempts: 1)"})
	}
	if r.RetryableStatusCodes.has(0) {
		errs = append(errs, &PathError{Path: "retryableStatusCodes", Problem: "OK cannot be retried"})
	}
	return opts, errors.Join(errs...)
}

// bulkheadOptions turns a resolved bulkhead section into options and checks
// them by building a bulkhead.
func bulkheadOptions(b *Bulkhead, name string) ([]bulkhead.Option, error) {
	opts := []bulkhead.Option{
		bulkhead.WithName(name),
		bulkhead.WithMaxConcurrentCalls(*b.MaxConcurrentCalls),
		bulkhead.WithMaxWaitDuration(b.MaxWaitDuration.D()),
	}
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
		opts = append(opts, bulkhead.WithAdaptive(bulkhead.Adaptive{
			MinLimit: deref(a.MinLimit), MaxLimit: deref(a.MaxLimit), InitialLimit: deref(a.InitialLimit),
		}))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if _, err := bulkhead.New(opts...); err != nil {
		return nil, err
	}
	return opts, nil
}

// throttleSettings resolves retryThrottling: whether it is on, maxTokens
// and tokenRatio.
func throttleSettings(t *RetryThrottling) (on bool, maxTokens, ratio float64) {
	on, maxTokens, ratio = true, 10, 0.1
	if t != nil {
		if t.Enabled != nil && !*t.Enabled {
			return false, 0, 0
		}
		if t.MaxTokens != nil {
			maxTokens = *t.MaxTokens
		}
		if t.TokenRatio != nil {
			ratio = *t.TokenRatio
		}
	}
	return on, maxTokens, ratio
}

// throttleOf builds the client's retry throttle; nil when it is off.
func throttleOf(t *RetryThrottling) (*retry.Throttle, bool, error) {
	on, maxTokens, ratio := throttleSettings(t)
	if !on {
		return nil, false, nil
	}
	th, err := retry.NewThrottle(maxTokens, ratio)
	return th, err == nil, err
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
