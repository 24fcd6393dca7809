package retry

import (
	"math"
	"time"

	"github.com/meshless/meshless/internal/opterr"
	"github.com/meshless/meshless/resilience"
)

// Config is a retry policy's settings, named after gRPC's retryPolicy keys
// (see docs/retry.md). Start from [DefaultConfig]. A Config is a plain
// comparable value.
type Config struct {
	// Name names the policy for observers; grpcmw uses the method. Default "".
	Name string
	// MaxAttempts is the most calls made, the first one included, as in
	// gRPC (1 turns retries off). Default 3.
	MaxAttempts int
	// InitialBackoff is the wait before the first retry. Default 100ms.
	InitialBackoff time.Duration
	// MaxBackoff: no wait is longer, jitter included. Default 2s.
	MaxBackoff time.Duration
	// BackoffMultiplier: each wait is the previous one times this. Default 2.
	BackoffMultiplier float64
	// Jitter spreads each wait by a random ±fraction, in [0, 1) (0.2 is
	// ±20 %). Default 0.2.
	Jitter float64
}

// DefaultConfig returns the defaults of docs/retry.md.
func DefaultConfig() Config {
	return Config{MaxAttempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second, BackoffMultiplier: 2, Jitter: 0.2}
}

// WithConfig sets the policy's settings, every one of them (the name
// included: a [WithName] after it renames the policy). Start c from
// [DefaultConfig]. Without it a policy has [DefaultConfig]'s settings.
func WithConfig(c Config) Option { return optionFunc(func(cfg *config) { cfg.Config = c }) }

// Validate reports every invalid setting, each error naming its key
// (errors.Is [resilience.ErrInvalidOption]).
func (c Config) Validate() error {
	var errs opterr.Errors
	c.check(errs.Add)
	return errs.Err()
}

type config struct {
	Config
	retryable func(error) bool
	classify  resilience.Classifier
	pushback  func(error) (time.Duration, bool)
	throttle  *Throttle
	clock     resilience.Clock
	observer  resilience.Observer
	rand      func() float64
	observe   bool
}

func defaultConfig() config {
	return config{
		Config:    DefaultConfig(),
		retryable: defaultRetryable,
		classify:  resilience.DefaultClassifier,
		clock:     resilience.SystemClock(),
	}
}

// defaultRetryable retries what the default classifier calls a failure.
func defaultRetryable(err error) bool { return resilience.DefaultClassifier(err) == resilience.Failure }

// MaxMaxAttempts bounds maxAttempts: more attempts than this turn an outage
// into a retry storm whatever the backoff.
const MaxMaxAttempts = 100

func (c *config) validate() error {
	var errs opterr.Errors
	c.check(errs.Add)
	if c.retryable == nil {
		errs.Add("retryable", nil, "must not be nil")
	}
	if c.classify == nil {
		errs.Add("classifier", nil, "must not be nil")
	}
	if c.clock == nil {
		errs.Add("clock", nil, "must not be nil")
	}
	return errs.Err()
}

func (c *Config) check(bad func(option string, value any, problem string)) {
	if c.MaxAttempts < 1 || c.MaxAttempts > MaxMaxAttempts {
		bad("maxAttempts", c.MaxAttempts, "must be in [1, 100] (it counts the first call)")
	}
	if c.InitialBackoff <= 0 {
		bad("initialBackoff", c.InitialBackoff, "must be positive")
	}
	if c.MaxBackoff <= 0 {
		bad("maxBackoff", c.MaxBackoff, "must be positive")
	} else if c.InitialBackoff > c.MaxBackoff {
		bad("maxBackoff", c.MaxBackoff, "must be at least initialBackoff ("+c.InitialBackoff.String()+")")
	}
	if !(c.BackoffMultiplier >= 1) || math.IsInf(c.BackoffMultiplier, 0) {
		bad("backoffMultiplier", c.BackoffMultiplier, "must be at least 1")
	}
	if !(c.Jitter >= 0 && c.Jitter < 1) {
		bad("jitter", c.Jitter, "must be in [0, 1)")
	}
}

// Option configures a [Retry]: its settings ([WithConfig]) and what is not a
// setting (its name, predicates, throttle, clock and observer).
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithName names the retry policy for observers; grpcmw uses the method.
// Default "".
func WithName(name string) Option { return optionFunc(func(c *config) { c.Name = name }) }

// WithRetryable sets which errors are worth another attempt. grpcmw passes
// the configured retryableStatusCodes. Whatever it says, a
// [resilience.Rejection] is never retried, and neither is any error once
// the caller's context is done. Default: the errors
// [resilience.DefaultClassifier] calls failures.
func WithRetryable(f func(err error) bool) Option {
	return optionFunc(func(c *config) { c.retryable = f })
}

// WithClassifier sets the Outcome reported to observers for each attempt
// (EventAttempt) and for the call as a whole (EventRetryDone); it does not
// decide retries. Default [resilience.DefaultClassifier].
func WithClassifier(cl resilience.Classifier) Option {
	return optionFunc(func(c *config) { c.classify = cl })
}

// WithPushback sets a hook that reads a delay the server asked for from an
// attempt's error (grpcmw reads the grpc-retry-pushback-ms trailer). When it
// returns ok, its delay replaces the backoff and the backoff starts again
// from initialBackoff, as in gRPC; a negative delay stops retrying and, as
// gRFC A6 says, counts as a failure for the throttle whatever the error. A
// delay longer than 300s is not waited, deadline or not: the call ends at
// once with the attempt's error (reason pushback), as one past the deadline
// does. Default none.
func WithPushback(f func(err error) (delay time.Duration, ok bool)) Option {
	return optionFunc(func(c *config) { c.pushback = f })
}

// WithThrottle shares a retry [Throttle] (gRPC's token bucket) with this
// policy, which then moves it for each of its attempts. Policies of one
// client should share one, and the client's RPCs that no retry policy runs
// should move it too ([Throttle.RecordSuccess], [Throttle.RecordFailure]):
// gRFC A6 counts every RPC. Default none.
func WithThrottle(t *Throttle) Option { return optionFunc(func(c *config) { c.throttle = t }) }

// WithClock sets the clock that backoffs wait on. Whether a backoff fits
// before the context's deadline is judged in real time, the time context
// deadlines are in. Default [resilience.SystemClock].
func WithClock(clk resilience.Clock) Option { return optionFunc(func(c *config) { c.clock = clk }) }

// WithObserver sets the observer that receives the policy's events.
// Default none.
func WithObserver(o resilience.Observer) Option {
	return optionFunc(func(c *config) { c.observer = o })
}

// WithObserve makes the policy observe only (observe mode): it decides as
// usual — the throttle moves as usual — and reports the retry it decides
// on (resilience.EventRetry), then ends the call instead of making it
// (resilience.EventRetryDone with ReasonObserved). Begin it with an
// observed context (resilience.Observe) so that observers tell the
// reported retry apart. Default off.
func WithObserve() Option { return optionFunc(func(c *config) { c.observe = true }) }
