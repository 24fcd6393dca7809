package config

import (
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
)

// Config is one client's resilience configuration: the YAML document of
// docs/configuration.md. Every field is optional; a nil field inherits from
// the level above (method → service → defaults → built-in defaults). Build
// one with [Parse] or [ReadFile] and Parse, or in Go; a transport validates
// it when it builds its chain.
type Config struct {
	Defaults        Policies                `yaml:"defaults,omitempty"`
	RetryThrottling *RetryThrottlingSection `yaml:"retryThrottling,omitempty"`
	Services        map[string]*Service     `yaml:"services,omitempty"`
	// Hosts is HTTP's section (httpmw): per host, as a request's URL writes
	// it, and per route.
	Hosts map[string]*Host `yaml:"hosts,omitempty"`
	// OutlierDetection turns on per-endpoint ejection in the load balancer
	// that DialOptions installs (docs/outlier.md).
	OutlierDetection *OutlierDetectionSection `yaml:"outlierDetection,omitempty"`
	// HealthCheck turns on gRPC's client-side health checking.
	HealthCheck *HealthCheckSection `yaml:"healthCheck,omitempty"`
	// Cluster shares breaker decisions with the client's other instances
	// through Redis (docs/cluster.md).
	Cluster *ClusterSection `yaml:"cluster,omitempty"`
}

// Service configures one gRPC service, by its full name
// ("payment.PaymentService"), and its methods by their short names
// ("Charge").
type Service struct {
	Policies `yaml:",inline"`
	Methods  map[string]*Policies `yaml:"methods,omitempty"`
}

// Host configures one HTTP host, by host[:port] as a request's URL writes
// it ("api.weather.example", "127.0.0.1:8080"), and its routes by net/http
// ServeMux pattern ("GET /v1/current/{city}"). Its status codes are HTTP
// status numbers.
type Host struct {
	Policies `yaml:",inline"`
	Routes   map[string]*Policies `yaml:"routes,omitempty"`
}

// Policies is one level's settings for each policy.
type Policies struct {
	// Mode is enforce (the default) or observe: every policy decides and
	// reports as usual, and none acts — no call is rejected, delayed,
	// retried or hedged because of one (docs/configuration.md, "Observe
	// mode").
	Mode           *string                `yaml:"mode,omitempty"`
	CircuitBreaker *CircuitBreakerSection `yaml:"circuitBreaker,omitempty"`
	Retry          *RetrySection          `yaml:"retry,omitempty"`
	Bulkhead       *BulkheadSection       `yaml:"bulkhead,omitempty"`
	Timeout        *TimeoutSection        `yaml:"timeout,omitempty"`
	// AdaptiveThrottling is client-side adaptive throttling (docs/overload.md).
	AdaptiveThrottling *AdaptiveThrottlingSection `yaml:"adaptiveThrottling,omitempty"`
	// RateLimiter is off unless a level writes it (docs/ratelimiter.md).
	RateLimiter *RateLimiterSection `yaml:"rateLimiter,omitempty"`
	// Hedging is off unless a level writes it (docs/hedging.md).
	Hedging *HedgingSection `yaml:"hedging,omitempty"`
	// DeadLetter is off unless a level writes it (docs/deadletter.md).
	DeadLetter *DeadLetterSection `yaml:"deadLetter,omitempty"`
}

// CircuitBreaker is the circuitBreaker section; see docs/circuitbreaker.md
// for each key.
type CircuitBreakerSection struct {
	Enabled                               *bool     `yaml:"enabled,omitempty"`
	KeyBy                                 *string   `yaml:"keyBy,omitempty"`
	SlidingWindowType                     *string   `yaml:"slidingWindowType,omitempty"`
	SlidingWindowSize                     *int      `yaml:"slidingWindowSize,omitempty"`
	MinimumNumberOfCalls                  *int      `yaml:"minimumNumberOfCalls,omitempty"`
	FailureRateThreshold                  *float64  `yaml:"failureRateThreshold,omitempty"`
	SlowCallDurationThreshold             *Duration `yaml:"slowCallDurationThreshold,omitempty"`
	SlowCallRateThreshold                 *float64  `yaml:"slowCallRateThreshold,omitempty"`
	WaitDurationInOpenState               *Duration `yaml:"waitDurationInOpenState,omitempty"`
	MaxWaitDurationInOpenState            *Duration `yaml:"maxWaitDurationInOpenState,omitempty"`
	PermittedNumberOfCallsInHalfOpenState *int      `yaml:"permittedNumberOfCallsInHalfOpenState,omitempty"`
	MaxWaitDurationInHalfOpenState        *Duration `yaml:"maxWaitDurationInHalfOpenState,omitempty"`
	FailureStatusCodes                    Codes     `yaml:"failureStatusCodes,omitempty"`
	IgnoredStatusCodes                    Codes     `yaml:"ignoredStatusCodes,omitempty"`
	Mode                                  *string   `yaml:"mode,omitempty"`
}

// Retry is the retry section; see docs/retry.md.
type RetrySection struct {
	Enabled              *bool     `yaml:"enabled,omitempty"`
	MaxAttempts          *int      `yaml:"maxAttempts,omitempty"`
	InitialBackoff       *Duration `yaml:"initialBackoff,omitempty"`
	MaxBackoff           *Duration `yaml:"maxBackoff,omitempty"`
	BackoffMultiplier    *float64  `yaml:"backoffMultiplier,omitempty"`
	Jitter               *float64  `yaml:"jitter,omitempty"`
	RetryableStatusCodes Codes     `yaml:"retryableStatusCodes,omitempty"`
}

// Bulkhead is the bulkhead section; see docs/bulkhead.md.
type BulkheadSection struct {
	Enabled            *bool            `yaml:"enabled,omitempty"`
	MaxConcurrentCalls *int             `yaml:"maxConcurrentCalls,omitempty"`
	MaxWaitDuration    *Duration        `yaml:"maxWaitDuration,omitempty"`
	Adaptive           *AdaptiveSection `yaml:"adaptive,omitempty"`
}

// Adaptive replaces a bulkhead's fixed limit with an adaptive one.
type AdaptiveSection struct {
	MinLimit     *int `yaml:"minLimit,omitempty"`
	MaxLimit     *int `yaml:"maxLimit,omitempty"`
	InitialLimit *int `yaml:"initialLimit,omitempty"`
}

// Timeout is the timeout section; see docs/timeout.md.
type TimeoutSection struct {
	Enabled    *bool     `yaml:"enabled,omitempty"`
	PerAttempt *Duration `yaml:"perAttempt,omitempty"`
	Overall    *Duration `yaml:"overall,omitempty"`
}

// RetryThrottling is gRPC's retry throttling, per client.
type RetryThrottlingSection struct {
	Enabled    *bool    `yaml:"enabled,omitempty"`
	MaxTokens  *float64 `yaml:"maxTokens,omitempty"`
	TokenRatio *float64 `yaml:"tokenRatio,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("100ms").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalYAML writes d as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Dur returns a pointer to d as a Duration, for building a [Config] in Go.
func Dur(d time.Duration) *Duration { v := Duration(d); return &v }

// Ptr returns a pointer to v, for building a [Config] in Go.
func Ptr[T any](v T) *T { return &v }

// Names is a list of names (rejection reasons, metadata keys). A nil list
// inherits; an empty, non-nil list means "none".
type Names []string

// IsZero reports whether the list is unset (nil).
func (ns Names) IsZero() bool { return ns == nil }

// Codes is a list of status codes: gRPC codes (0–16), written by their
// canonical names, in a gRPC scope (defaults, services); HTTP status numbers
// (100–599) in an HTTP scope (hosts). A nil list inherits; an empty, non-nil
// list means "none".
type Codes []codes.Code

// IsZero reports whether the list is unset (nil), so that an explicit empty
// list ("none") is written out and survives a round trip.
func (cs Codes) IsZero() bool { return cs == nil }

// MarshalYAML writes gRPC codes by their canonical names and HTTP statuses
// as numbers.
func (cs Codes) MarshalYAML() (any, error) {
	out := make([]any, len(cs))
	for i, c := range cs {
		if isHTTPStatus(c) {
			out[i] = int(c)
		} else {
			out[i] = CodeName(c)
		}
	}
	return out, nil
}

// String writes the list as [UNAVAILABLE INTERNAL] or [500 503].
func (cs Codes) String() string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = CodeName(c)
	}
	return "[" + strings.Join(names, " ") + "]"
}

// Has reports whether c is in the list.
func (cs Codes) Has(c codes.Code) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

var codeNames = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
	"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
	"ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
	"UNAUTHENTICATED",
}

// CodeName returns the canonical name of a gRPC code ("UNAVAILABLE"), or
// the number of an HTTP status ("503").
func CodeName(c codes.Code) string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	if isHTTPStatus(c) {
		return strconv.Itoa(int(c))
	}
	return "CODE_" + strconv.Itoa(int(c))
}

// parseCode reads a canonical name (any case) or a number 0–16.
func parseCode(s string) (codes.Code, bool) {
	for i, n := range codeNames {
		if strings.EqualFold(s, n) {
			return codes.Code(i), true
		}
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 && n < len(codeNames) {
		return codes.Code(n), true
	}
	return 0, false
}
