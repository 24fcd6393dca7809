package bulkhead

import (
	"strconv"
	"time"

	"github.com/meshless/meshless/internal/opterr"
	"github.com/meshless/meshless/resilience"
)

// The defaults of docs/bulkhead.md.
const (
	// DefaultMaxConcurrentCalls is maxConcurrentCalls when it is not set.
	DefaultMaxConcurrentCalls = 100
	// DefaultMinLimit, DefaultMaxLimit and DefaultInitialLimit are the
	// adaptive limit's bounds and starting point when they are not set
	// (failsafe-go's own defaults).
	DefaultMinLimit     = 1
	DefaultMaxLimit     = 200
	DefaultInitialLimit = 20
)

// Adaptive configures an adaptive concurrency limit (the YAML block
// `adaptive: { minLimit, maxLimit, initialLimit }`), used instead of the
// fixed maxConcurrentCalls. A zero field takes its default: MinLimit 1,
// MaxLimit 200, and InitialLimit 20 kept within [MinLimit, MaxLimit] (so
// Adaptive{MaxLimit: 10} starts at 10). Values that are set must satisfy
// 1 <= MinLimit <= InitialLimit <= MaxLimit.
type Adaptive struct {
	MinLimit     int // minLimit: the limit never goes below it
	MaxLimit     int // maxLimit: the limit never goes above it
	InitialLimit int // initialLimit: the limit to start from
}

// withDefaults fills the zero fields.
func (a Adaptive) withDefaults() Adaptive {
	if a.MinLimit == 0 {
		a.MinLimit = DefaultMinLimit
	}
	if a.MaxLimit == 0 {
		a.MaxLimit = DefaultMaxLimit
	}
	if a.InitialLimit == 0 {
		a.InitialLimit = min(max(DefaultInitialLimit, a.MinLimit), a.MaxLimit)
	}
	return a
}

// Config is a bulkhead's settings, named after their configuration keys
// (see docs/bulkhead.md). Start from [DefaultConfig]. A Config is a plain
// comparable value: two equal Configs configure equal bulkheads.
type Config struct {
	// Name names the bulkhead, in rejections and for observers. Default "".
	Name string
	// MaxConcurrentCalls is how many calls may be in flight at once through
	// a bulkhead with a fixed limit, at least 1. It is checked but not used
	// when Adaptive is set. Default 100.
	MaxConcurrentCalls int
	// MaxWaitDuration is how long a call waits for a permit when the
	// bulkhead is full before it is rejected; the wait also ends when the
	// call's context ends. 0 rejects at once. Default 0.
	MaxWaitDuration time.Duration
	// Adaptive replaces the fixed limit with an adaptive one within
	// AdaptiveLimits (zero fields take their defaults).
	Adaptive       bool
	AdaptiveLimits Adaptive
}

// DefaultConfig returns the defaults of docs/bulkhead.md: a fixed limit of
// [DefaultMaxConcurrentCalls], no wait.
func DefaultConfig() Config { return Config{MaxConcurrentCalls: DefaultMaxConcurrentCalls} }

// WithConfig sets the bulkhead's settings, every one of them (the name
// included: a [WithName] after it renames the bulkhead). Start c from
// [DefaultConfig]. Without it a bulkhead has [DefaultConfig]'s settings.
func WithConfig(c Config) Option { return optionFunc(func(cfg *config) { cfg.Config = c }) }

type config struct {
	Config
	clock    resilience.Clock
	observer resilience.Observer
}

func defaultConfig() config {
	return config{Config: DefaultConfig(), clock: resilience.SystemClock()}
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
	return errs.Err()
}

func (c *Config) check(bad func(option string, value any, problem string)) {
	if c.MaxConcurrentCalls < 1 {
		bad("maxConcurrentCalls", c.MaxConcurrentCalls, "must be at least 1")
	}
	if c.MaxWaitDuration < 0 {
		bad("maxWaitDuration", c.MaxWaitDuration, "must not be negative (0 rejects at once when full)")
	}
	if a := c.AdaptiveLimits; c.Adaptive {
		ok := true
		for _, f := range []struct {
			key string
			v   int
		}{{"adaptive.minLimit", a.MinLimit}, {"adaptive.maxLimit", a.MaxLimit}, {"adaptive.initialLimit", a.InitialLimit}} {
			if f.v < 0 {
				bad(f.key, f.v, "must be at least 1 (or 0 for the default)")
				ok = false
			}
		}
		if ok {
			d := a.withDefaults()
			switch {
			case d.MinLimit > d.MaxLimit:
				bad("adaptive.minLimit", d.MinLimit, "must not exceed adaptive.maxLimit ("+strconv.Itoa(d.MaxLimit)+")")
			case d.InitialLimit < d.MinLimit || d.InitialLimit > d.MaxLimit:
				bad("adaptive.initialLimit", d.InitialLimit, "must be within [adaptive.minLimit, adaptive.maxLimit] = ["+
					strconv.Itoa(d.MinLimit)+", "+strconv.Itoa(d.MaxLimit)+"]")
			}
		}
	}
}

// Option configures a [Bulkhead]: its settings ([WithConfig]) and what is
// not a setting (its name, clock and observer).
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithName names the bulkhead, in rejections and for observers. Default "".
func WithName(name string) Option { return optionFunc(func(c *config) { c.Name = name }) }

// WithClock sets the clock that measures how long calls wait for a permit
// (the Duration of [resilience.EventAcquired] and
// [resilience.EventRejection]). The wait itself is timed by failsafe-go with
// the runtime's timers, and the adaptive limit measures latency with
// [time.Now]: in tests, drive both with testing/synctest and use
// [resilience.SystemClock]. Default [resilience.SystemClock].
func WithClock(clk resilience.Clock) Option { return optionFunc(func(c *config) { c.clock = clk }) }

// WithObserver sets the observer that receives the bulkhead's events.
// Default none.
func WithObserver(o resilience.Observer) Option {
	return optionFunc(func(c *config) { c.observer = o })
}
