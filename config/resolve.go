package config

import (
	"reflect"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/throttler"
)

// The built-in defaults are each policy package's own DefaultConfig, so that
// a key means the same in YAML and in Go, except where the YAML's default
// differs on purpose; each such difference is named here with its reason
// (docs/configuration.md lists them, and those that differ from
// Resilience4j's and gRFC A6's).
const (
	// FailureRateThreshold is circuitBreaker.failureRateThreshold's YAML
	// default, 80 (package circuitbreaker's is 50, Resilience4j's): a backend
	// that sheds part of its load under overload fails some calls while it
	// serves most, and a breaker that opens at 50 % turns that partial
	// overload into a full outage (docs/overload.md).
	FailureRateThreshold = 80.0
	// PerAttemptTimeout and OverallTimeout are the timeout section's
	// defaults; the timeout package has none (a Timeout is built with its
	// duration).
	PerAttemptTimeout = time.Second
	OverallTimeout    = 3 * time.Second
	// RetryThrottlingMaxTokens and RetryThrottlingTokenRatio are
	// retryThrottling's defaults. gRFC A6 has no defaults (a service config
	// turns throttling on by writing both); meshless turns it on with
	// grpc-go's example values, so that retries can never multiply an outage.
	RetryThrottlingMaxTokens  = 10.0
	RetryThrottlingTokenRatio = 0.1
)

// grpcFailureCodes and grpcRetryableCodes are the gRPC scopes' default
// failureStatusCodes and retryableStatusCodes (and nonFatalStatusCodes).
var (
	grpcFailureCodes   = Codes{codes.Unavailable, codes.Internal, codes.Unknown, codes.DeadlineExceeded, codes.DataLoss}
	grpcIgnoredCodes   = Codes{codes.Canceled}
	grpcRetryableCodes = Codes{codes.Unavailable}
)

// builtin holds the documented defaults of every key (docs/configuration.md).
func builtin() Policies {
	cb := circuitbreaker.DefaultConfig()
	r := retry.DefaultConfig()
	bh := bulkhead.DefaultConfig()
	rl := ratelimiter.DefaultConfig()
	th := throttler.DefaultConfig()
	h := retry.DefaultHedgeConfig()
	return Policies{
		Mode: Ptr(ModeEnforce),
		CircuitBreaker: &CircuitBreakerSection{
			Enabled:                               Ptr(true),
			KeyBy:                                 Ptr(KeyByService),
			SlidingWindowType:                     Ptr(cb.SlidingWindowType.String()),
			SlidingWindowSize:                     Ptr(cb.SlidingWindowSize),
			MinimumNumberOfCalls:                  Ptr(cb.MinimumNumberOfCalls),
			FailureRateThreshold:                  Ptr(FailureRateThreshold),
			SlowCallDurationThreshold:             Dur(cb.SlowCallDurationThreshold),
			SlowCallRateThreshold:                 Ptr(cb.SlowCallRateThreshold),
			WaitDurationInOpenState:               Dur(cb.WaitDurationInOpenState),
			MaxWaitDurationInOpenState:            Dur(cb.MaxWaitDurationInOpenState),
			PermittedNumberOfCallsInHalfOpenState: Ptr(cb.PermittedNumberOfCallsInHalfOpenState),
			MaxWaitDurationInHalfOpenState:        Dur(cb.MaxWaitDurationInHalfOpenState),
			FailureStatusCodes:                    grpcFailureCodes,
			IgnoredStatusCodes:                    grpcIgnoredCodes,
			Mode:                                  Ptr(cb.Mode.String()),
		},
		Retry: &RetrySection{
			Enabled:              Ptr(true),
			MaxAttempts:          Ptr(r.MaxAttempts),
			InitialBackoff:       Dur(r.InitialBackoff),
			MaxBackoff:           Dur(r.MaxBackoff),
			BackoffMultiplier:    Ptr(r.BackoffMultiplier),
			Jitter:               Ptr(r.Jitter),
			RetryableStatusCodes: grpcRetryableCodes,
		},
		Bulkhead: &BulkheadSection{
			Enabled:            Ptr(true),
			MaxConcurrentCalls: Ptr(bh.MaxConcurrentCalls),
			MaxWaitDuration:    Dur(bh.MaxWaitDuration),
		},
		Timeout: &TimeoutSection{
			Enabled:    Ptr(true),
			PerAttempt: Dur(PerAttemptTimeout),
			Overall:    Dur(OverallTimeout),
		},
		AdaptiveThrottling: &AdaptiveThrottlingSection{
			Enabled:          Ptr(true),
			Multiplier:       Ptr(th.Multiplier),
			Window:           Dur(th.Window),
			MinimumRequests:  Ptr(th.MinimumRequests),
			MaxRejectionRate: Ptr(th.MaxRejectionRate),
		},
		// Off unless a level writes it (rateLimiterOn); these are the values
		// a written section starts from.
		RateLimiter: &RateLimiterSection{
			LimitForPeriod:     Ptr(rl.LimitForPeriod),
			LimitRefreshPeriod: Dur(rl.LimitRefreshPeriod),
			TimeoutDuration:    Dur(rl.TimeoutDuration),
		},
		// Off unless a level writes it (hedgingOn).
		Hedging: &HedgingSection{
			MaxAttempts:         Ptr(h.MaxAttempts),
			HedgingDelay:        Dur(h.HedgingDelay),
			NonFatalStatusCodes: grpcRetryableCodes,
		},
	}
}

// The values of mode.
const (
	ModeEnforce = "enforce"
	ModeObserve = "observe"
)

// The values of circuitBreaker.keyBy.
const (
	KeyByService = "service"
	KeyByMethod  = "method"
)

// level is one place settings are written: defaults, a service, a method.
type level struct {
	path string
	p    *Policies
}

// resolve merges levels field by field, the last one winning, over the
// built-in defaults.
func resolve(levels ...level) Policies { return resolveFrom(builtin(), levels...) }

// resolveFrom merges levels field by field, the last one winning, over out.
func resolveFrom(out Policies, levels ...level) Policies {
	for _, l := range levels {
		if l.p != nil {
			mergeInto(reflect.ValueOf(&out).Elem(), reflect.ValueOf(l.p).Elem())
		}
	}
	return out
}

// mergeInto copies every set (non-nil) field of src over dst, descending
// into structs.
func mergeInto(dst, src reflect.Value) {
	for i := range src.NumField() {
		s, d := src.Field(i), dst.Field(i)
		switch {
		case s.Kind() == reflect.Pointer && s.Type().Elem().Kind() == reflect.Struct && s.Type().Elem() != durationType:
			if s.IsNil() {
				continue
			}
			if d.IsNil() {
				d.Set(reflect.New(s.Type().Elem()))
			}
			mergeInto(d.Elem(), s.Elem())
		case s.Kind() == reflect.Pointer || s.Kind() == reflect.Slice:
			if !s.IsNil() {
				d.Set(s)
			}
		}
	}
}
