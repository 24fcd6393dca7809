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
	Name               string
	MaxConcurrentCalls int           // the fixed limit; checked but unused when Adaptive is set
	MaxWaitDuration    time.Duration // 0: reject at once when full
	// Adaptive replaces the fixed limit with an adaptive one within
	// AdaptiveLimits (zero fields take their defaults).
	Adaptive       bool
	AdaptiveLimits Adaptive
}

// DefaultConfig returns the defaults of docs/bulkhead.md: a fixed limit of
// [DefaultMaxConcurrentCalls], no wait.
func DefaultConfig() Config { return Config{MaxConcurrentCalls: DefaultMaxConcurrentCalls} }

// WithConfig sets every setting of c at once; options after it override
// single settings.
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

// Option configures a [Bulkhead]. Each option is named after the
// configuration key it sets (see docs/bulkhead.md).
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithName names the bulkhead, in rejections and for observers. Default "".
func WithName(name string) Option { return optionFunc(func(c *config) { c.Name = name }) }

// WithMaxConcurrentCalls sets maxConcurrentCalls: how many calls may be in
// flight at once through a bulkhead with a fixed limit. It must be at least 1.
// It is not used (but still checked) when [WithAdaptive] is given.
// Default 100.
func WithMaxConcurrentCalls(n int) Option {
	return optionFunc(func(c *config) { c.MaxConcurrentCalls = n })
}

// WithMaxWaitDuration sets maxWaitDuration: how long a call waits for a
// permit when the bulkhead is full before it is rejected. 0 rejects at once.
// The wait also ends when the call's context ends (see [Bulkhead.Acquire]).
// Default 0.
func WithMaxWaitDuration(d time.Duration) Option {
	return optionFunc(func(c *config) { c.MaxWaitDuration = d })
}

// WithAdaptive replaces the fixed limit with an adaptive one that moves
// between a.MinLimit and a.MaxLimit with the calls' latency (failsafe-go's
// adaptivelimiter; see the package documentation). Zero fields take their
// defaults. Default: no adaptive limit, the fixed maxConcurrentCalls.
func WithAdaptive(a Adaptive) Option {
	return optionFunc(func(c *config) { c.Adaptive, c.AdaptiveLimits = true, a })
}

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
