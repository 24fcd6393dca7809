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

type config struct {
	name            string
	windowType      WindowType
	windowSize      int
	minCalls        int
	failureRate     float64
	slowThreshold   time.Duration
	slowRate        float64
	openWait        time.Duration
	maxOpenWait     time.Duration
	openJitter      float64
	halfOpenPermits int
	maxHalfOpenWait time.Duration
	mode            Mode
	classify        resilience.Classifier
	clock           resilience.Clock
	observer        resilience.Observer
}

func defaultConfig() config {
	return config{
		windowType:      CountBased,
		windowSize:      100,
		minCalls:        20,
		failureRate:     50,
		slowThreshold:   2 * time.Second,
		slowRate:        100,
		openWait:        30 * time.Second,
		maxOpenWait:     5 * time.Minute,
		halfOpenPermits: 2,
		mode:            ModeNormal,
		classify:        resilience.DefaultClassifier,
		clock:           resilience.SystemClock(),
	}
}

func (c *config) validate() error {
	var errs opterr.Errors
	bad := errs.Add
	switch c.windowType {
	case CountBased:
		if c.windowSize < 1 || c.windowSize > MaxCountWindowSize {
			bad("slidingWindowSize", c.windowSize, "must be in [1, "+strconv.Itoa(MaxCountWindowSize)+"] calls for COUNT_BASED")
		}
	case TimeBased:
		if c.windowSize < 1 || c.windowSize > MaxTimeWindowSize {
			bad("slidingWindowSize", c.windowSize, "must be in [1, "+strconv.Itoa(MaxTimeWindowSize)+"] seconds for TIME_BASED")
		}
	default:
		bad("slidingWindowType", c.windowType, "must be COUNT_BASED or TIME_BASED")
	}
	if c.minCalls < 1 {
		bad("minimumNumberOfCalls", c.minCalls, "must be at least 1")
	} else if c.windowType == CountBased && c.windowSize >= 1 && c.minCalls > c.windowSize {
		bad("minimumNumberOfCalls", c.minCalls, "must not exceed slidingWindowSize ("+strconv.Itoa(c.windowSize)+") for a COUNT_BASED window, which could then never decide")
	}
	if !(c.failureRate > 0 && c.failureRate <= 100) {
		bad("failureRateThreshold", c.failureRate, "must be in (0, 100]")
	}
	if !(c.slowRate > 0 && c.slowRate <= 100) {
		bad("slowCallRateThreshold", c.slowRate, "must be in (0, 100]")
	}
	if c.slowThreshold <= 0 {
		bad("slowCallDurationThreshold", c.slowThreshold, "must be positive")
	}
	if c.openWait <= 0 {
		bad("waitDurationInOpenState", c.openWait, "must be positive")
	}
	if c.maxOpenWait != 0 && c.maxOpenWait < c.openWait {
		bad("maxWaitDurationInOpenState", c.maxOpenWait, "must be 0 (no growth) or at least waitDurationInOpenState ("+c.openWait.String()+")")
	}
	if !(c.openJitter >= 0 && c.openJitter < 1) {
		bad("openStateJitter", c.openJitter, "must be in [0, 1)")
	}
	if c.halfOpenPermits < 1 {
		bad("permittedNumberOfCallsInHalfOpenState", c.halfOpenPermits, "must be at least 1")
	}
	if c.maxHalfOpenWait < 0 {
		bad("maxWaitDurationInHalfOpenState", c.maxHalfOpenWait, "must not be negative")
	}
	if int(c.mode) >= len(modeNames) {
		bad("mode", c.mode, "must be NORMAL, DISABLED, METRICS_ONLY or FORCED_OPEN")
	}
	if c.clock == nil {
		bad("clock", nil, "must not be nil")
	}
	if c.classify == nil {
		bad("classifier", nil, "must not be nil")
	}
	return errs.Err()
}

// Option configures a [Breaker]. Each option is named after the
// configuration key it sets (see docs/circuitbreaker.md).
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithName names the breaker, in rejections and for observers. Default "".
func WithName(name string) Option { return optionFunc(func(c *config) { c.name = name }) }

// WithSlidingWindowType sets slidingWindowType. Default [CountBased].
func WithSlidingWindowType(t WindowType) Option {
	return optionFunc(func(c *config) { c.windowType = t })
}

// WithSlidingWindowSize sets slidingWindowSize: calls for a [CountBased]
// window, seconds for a [TimeBased] one. Default 100.
func WithSlidingWindowSize(n int) Option { return optionFunc(func(c *config) { c.windowSize = n }) }

// WithMinimumNumberOfCalls sets minimumNumberOfCalls: the breaker makes no
// decision while its window holds fewer calls. Default 20.
func WithMinimumNumberOfCalls(n int) Option { return optionFunc(func(c *config) { c.minCalls = n }) }

// WithFailureRateThreshold sets failureRateThreshold, in percent: the
// breaker opens when the failure rate is at or above it. Default 50.
func WithFailureRateThreshold(pct float64) Option {
	return optionFunc(func(c *config) { c.failureRate = pct })
}

// WithSlowCallDurationThreshold sets slowCallDurationThreshold: a call that
// takes longer is slow, whatever its outcome. Default 2s.
func WithSlowCallDurationThreshold(d time.Duration) Option {
	return optionFunc(func(c *config) { c.slowThreshold = d })
}

// WithSlowCallRateThreshold sets slowCallRateThreshold, in percent: the
// breaker opens when the share of slow calls is at or above it. Default 100.
func WithSlowCallRateThreshold(pct float64) Option {
	return optionFunc(func(c *config) { c.slowRate = pct })
}

// WithWaitDurationInOpenState sets waitDurationInOpenState: how long the
// breaker stays open before it lets probes through. Default 30s.
func WithWaitDurationInOpenState(d time.Duration) Option {
	return optionFunc(func(c *config) { c.openWait = d })
}

// WithMaxWaitDurationInOpenState sets maxWaitDurationInOpenState: each
// consecutive re-open (probes failed) doubles the open wait, up to this cap,
// which the jitter never passes either. 0 turns the growth off. Default 5m.
func WithMaxWaitDurationInOpenState(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxOpenWait = d })
}

// WithOpenStateJitter spreads each open wait by a random ±fraction (0.1 is
// ±10%), so that many clients that opened together do not probe together.
// It has no YAML key. Default 0.
func WithOpenStateJitter(fraction float64) Option {
	return optionFunc(func(c *config) { c.openJitter = fraction })
}

// WithPermittedNumberOfCallsInHalfOpenState sets
// permittedNumberOfCallsInHalfOpenState: how many probes run in the half-open
// state; the breaker decides once they have all reported. Default 2.
func WithPermittedNumberOfCallsInHalfOpenState(n int) Option {
	return optionFunc(func(c *config) { c.halfOpenPermits = n })
}

// WithMaxWaitDurationInHalfOpenState sets maxWaitDurationInHalfOpenState:
// when the probes take longer than this to report, the breaker opens again.
// 0 waits for them however long they take. Default 0.
func WithMaxWaitDurationInHalfOpenState(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxHalfOpenWait = d })
}

// WithMode sets mode. Default [ModeNormal].
func WithMode(m Mode) Option { return optionFunc(func(c *config) { c.mode = m }) }

// WithClassifier sets how [Permit.Done] and [Breaker.Execute] turn a call's
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
