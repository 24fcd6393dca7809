package circuitbreaker

import (
	"strconv"
	"strings"
	"time"

	"github.com/meshless/meshless/internal/opterr"
	"github.com/meshless/meshless/resilience"
)

// WindowType is the kind of sliding window a breaker decides on.
type WindowType uint8

const (
	// CountBased: the window is the last slidingWindowSize calls.
	CountBased WindowType = iota
	// TimeBased: the window is the calls of the last slidingWindowSize
	// seconds, in one-second buckets.
	TimeBased
)

// String returns "COUNT_BASED" or "TIME_BASED".
func (t WindowType) String() string {
	switch t {
	case CountBased:
		return "COUNT_BASED"
	case TimeBased:
		return "TIME_BASED"
	}
	return "WindowType(" + strconv.Itoa(int(t)) + ")"
}

// ParseWindowType parses "COUNT_BASED" or "TIME_BASED" (any case).
func ParseWindowType(s string) (WindowType, error) {
	switch strings.ToUpper(s) {
	case "COUNT_BASED":
		return CountBased, nil
	case "TIME_BASED":
		return TimeBased, nil
	}
	return 0, &resilience.OptionError{Option: "slidingWindowType", Value: s, Problem: "must be COUNT_BASED or TIME_BASED"}
}

// Mode is how a breaker works, as set in configuration.
type Mode uint8

const (
	// ModeNormal: the breaker opens, probes and closes on its thresholds.
	ModeNormal Mode = iota
	// ModeDisabled: always closed; records nothing, reports nothing.
	ModeDisabled
	// ModeMetricsOnly: records and reports, never rejects a call (shadow mode,
	// for rolling a breaker out).
	ModeMetricsOnly
	// ModeForcedOpen: rejects every call until the mode changes.
	ModeForcedOpen
)

var modeNames = [...]string{"NORMAL", "DISABLED", "METRICS_ONLY", "FORCED_OPEN"}

// String returns "NORMAL", "DISABLED", "METRICS_ONLY" or "FORCED_OPEN".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode parses a mode's name (any case).
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if strings.EqualFold(s, n) {
			return Mode(i), nil
		}
	}
	return 0, &resilience.OptionError{Option: "mode", Value: s, Problem: "must be NORMAL, DISABLED, METRICS_ONLY or FORCED_OPEN"}
}

// Limits on window sizes: a window's memory grows with its size.
const (
	MaxCountWindowSize = 1 << 20 // calls; one byte each
	MaxTimeWindowSize  = 3600    // seconds; 32 bytes each
)

// Config is a breaker's settings, each named after its Resilience4j key
// (see docs/circuitbreaker.md). Start from [DefaultConfig]. A Config is a
// plain comparable value: two equal Configs configure equal breakers, so
// callers that keep configurations compare them with ==.
type Config struct {
	// Name names the breaker, in rejections and for observers. Default "".
	Name string
	// SlidingWindowType is the kind of window. Default [CountBased].
	SlidingWindowType WindowType
	// SlidingWindowSize is calls for a [CountBased] window, seconds for a
	// [TimeBased] one. Default 100.
	SlidingWindowSize int
	// MinimumNumberOfCalls: the breaker makes no decision while its window
	// holds fewer calls. Default 20.
	MinimumNumberOfCalls int
	// FailureRateThreshold, in percent in (0, 100]: the breaker opens when the
	// failure rate is at or above it. Default 50.
	FailureRateThreshold float64
	// SlowCallDurationThreshold: a call that takes longer is slow, whatever
	// its outcome. Default 2s.
	SlowCallDurationThreshold time.Duration
	// SlowCallRateThreshold, in percent in (0, 100]: the breaker opens when
	// the share of slow calls is at or above it. Default 100.
	SlowCallRateThreshold float64
	// WaitDurationInOpenState is how long the breaker stays open before it
	// lets probes through. Default 30s.
	WaitDurationInOpenState time.Duration
	// MaxWaitDurationInOpenState: each consecutive re-open (probes failed)
	// doubles the open wait, up to this cap, which the jitter never passes
	// either. 0 turns the growth off. Default 5m.
	MaxWaitDurationInOpenState time.Duration
	// OpenStateJitter spreads each open wait by a random ±fraction, in
	// [0, 1) (0.1 is ±10%), so that many clients that opened together do
	// not probe together. It has no YAML key. Default 0.
	OpenStateJitter float64
	// PermittedNumberOfCallsInHalfOpenState is how many probes run in the
	// half-open state; the breaker decides once they have all reported.
	// Default 2.
	PermittedNumberOfCallsInHalfOpenState int
	// MaxWaitDurationInHalfOpenState: when the probes take longer than this
	// to report, the breaker opens again. 0 waits for them however long they
	// take. Default 0.
	MaxWaitDurationInHalfOpenState time.Duration
	// Mode is how the breaker works. Default [ModeNormal].
	Mode Mode
}

// DefaultConfig returns the defaults of docs/circuitbreaker.md.
func DefaultConfig() Config {
	return Config{
		SlidingWindowType:                     CountBased,
		SlidingWindowSize:                     100,
		MinimumNumberOfCalls:                  20,
		FailureRateThreshold:                  50,
		SlowCallDurationThreshold:             2 * time.Second,
		SlowCallRateThreshold:                 100,
		WaitDurationInOpenState:               30 * time.Second,
		MaxWaitDurationInOpenState:            5 * time.Minute,
		PermittedNumberOfCallsInHalfOpenState: 2,
		Mode:                                  ModeNormal,
	}
}

// WithConfig sets the breaker's settings, every one of them (the name
// included: a [WithName] after it renames the breaker). Start c from
// [DefaultConfig]. Without it a breaker has [DefaultConfig]'s settings.
func WithConfig(c Config) Option { return optionFunc(func(cfg *config) { cfg.Config = c }) }

type config struct {
	Config
	classify resilience.Classifier
	clock    resilience.Clock
	system   bool // clock is the system clock (set by New: a comparison of interfaces is a call)
	observer resilience.Observer
}

func defaultConfig() config {
	return config{Config: DefaultConfig(), classify: resilience.DefaultClassifier, clock: resilience.SystemClock()}
}

// Validate reports every invalid setting, each error naming its key
// (errors.Is [resilience.ErrInvalidOption]).
func (c Config) Validate() error {
	var errs opterr.Errors
	c.check(errs.Add)
	return errs.Err()
}

func (c *config) validate() error {
	var errs opterr.Errors
	c.check(errs.Add)
	if c.clock == nil {
		errs.Add("clock", nil, "must not be nil")
	}
	if c.classify == nil {
		errs.Add("classifier", nil, "must not be nil")
	}
	return errs.Err()
}

func (c *Config) check(bad func(option string, value any, problem string)) {
	switch c.SlidingWindowType {
	case CountBased:
		if c.SlidingWindowSize < 1 || c.SlidingWindowSize > MaxCountWindowSize {
			bad("slidingWindowSize", c.SlidingWindowSize, "must be in [1, "+strconv.Itoa(MaxCountWindowSize)+"] calls for COUNT_BASED")
		}
	case TimeBased:
		if c.SlidingWindowSize < 1 || c.SlidingWindowSize > MaxTimeWindowSize {
			bad("slidingWindowSize", c.SlidingWindowSize, "must be in [1, "+strconv.Itoa(MaxTimeWindowSize)+"] seconds for TIME_BASED")
		}
	default:
		bad("slidingWindowType", c.SlidingWindowType, "must be COUNT_BASED or TIME_BASED")
	}
	if c.MinimumNumberOfCalls < 1 {
		bad("minimumNumberOfCalls", c.MinimumNumberOfCalls, "must be at least 1")
	} else if c.SlidingWindowType == CountBased && c.SlidingWindowSize >= 1 && c.MinimumNumberOfCalls > c.SlidingWindowSize {
		bad("minimumNumberOfCalls", c.MinimumNumberOfCalls, "must not exceed slidingWindowSize ("+strconv.Itoa(c.SlidingWindowSize)+") for a COUNT_BASED window, which could then never decide")
	}
	if !(c.FailureRateThreshold > 0 && c.FailureRateThreshold <= 100) {
		bad("failureRateThreshold", c.FailureRateThreshold, "must be in (0, 100]")
	}
	if !(c.SlowCallRateThreshold > 0 && c.SlowCallRateThreshold <= 100) {
		bad("slowCallRateThreshold", c.SlowCallRateThreshold, "must be in (0, 100]")
	}
	if c.SlowCallDurationThreshold <= 0 {
		bad("slowCallDurationThreshold", c.SlowCallDurationThreshold, "must be positive")
	}
	if c.WaitDurationInOpenState <= 0 {
		bad("waitDurationInOpenState", c.WaitDurationInOpenState, "must be positive")
	}
	if c.MaxWaitDurationInOpenState != 0 && c.MaxWaitDurationInOpenState < c.WaitDurationInOpenState {
		bad("maxWaitDurationInOpenState", c.MaxWaitDurationInOpenState, "must be 0 (no growth) or at least waitDurationInOpenState ("+c.WaitDurationInOpenState.String()+")")
	}
	if !(c.OpenStateJitter >= 0 && c.OpenStateJitter < 1) {
		bad("openStateJitter", c.OpenStateJitter, "must be in [0, 1)")
	}
	if c.PermittedNumberOfCallsInHalfOpenState < 1 {
		bad("permittedNumberOfCallsInHalfOpenState", c.PermittedNumberOfCallsInHalfOpenState, "must be at least 1")
	}
	if c.MaxWaitDurationInHalfOpenState < 0 {
		bad("maxWaitDurationInHalfOpenState", c.MaxWaitDurationInHalfOpenState, "must not be negative")
	}
	if int(c.Mode) >= len(modeNames) {
		bad("mode", c.Mode, "must be NORMAL, DISABLED, METRICS_ONLY or FORCED_OPEN")
	}
}

// Option configures a [Breaker]: its settings ([WithConfig]) and what is
// not a setting (its name, clock, classifier and observer).
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithName names the breaker, in rejections and for observers. Default "".
func WithName(name string) Option { return optionFunc(func(c *config) { c.Name = name }) }

// WithClassifier sets how [Breaker.Execute] turns a call's
// error into an outcome. A nil error is always a success and a
// [resilience.Rejection] is always ignored, whatever the classifier says.
// Default [resilience.DefaultClassifier].
func WithClassifier(cl resilience.Classifier) Option {
	return optionFunc(func(c *config) { c.classify = cl })
}

// WithClock sets the clock. Default [resilience.SystemClock].
func WithClock(clk resilience.Clock) Option { return optionFunc(func(c *config) { c.clock = clk }) }

// WithObserver sets the observer that receives the breaker's events.
// Default none.
func WithObserver(o resilience.Observer) Option {
	return optionFunc(func(c *config) { c.observer = o })
}
