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

type config struct {
	name          string
	maxConcurrent int
	maxWait       time.Duration
	adaptive      *Adaptive // nil: the fixed limit
	clock         resilience.Clock
	observer      resilience.Observer
}

func defaultConfig() config {
	return config{
		maxConcurrent: DefaultMaxConcurrentCalls,
		clock:         resilience.SystemClock(),
	}
}

func (c *config) validate() error {
	var errs opterr.Errors
	bad := errs.Add
	if c.maxConcurrent < 1 {
		bad("maxConcurrentCalls", c.maxConcurrent, "must be at least 1")
	}
	if c.maxWait < 0 {
		bad("maxWaitDuration", c.maxWait, "must not be negative (0 rejects at once when full)")
	}
	if a := c.adaptive; a != nil {
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
	if c.clock == nil {
		bad("clock", nil, "must not be nil")
	}
	return errs.Err()
}

// Option configures a [Bulkhead]. Each option is named after the
// configuration key it sets (see docs/bulkhead.md).
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithName names the bulkhead, in rejections and for observers. Default "".
func WithName(name string) Option { return optionFunc(func(c *config) { c.name = name }) }

// WithMaxConcurrentCalls sets maxConcurrentCalls: how many calls may be in
// flight at once through a bulkhead with a fixed limit. It must be at least 1.
// It is not used (but still checked) when [WithAdaptive] is given.
// Default 100.
func WithMaxConcurrentCalls(n int) Option {
	return optionFunc(func(c *config) { c.maxConcurrent = n })
}

// WithMaxWaitDuration sets maxWaitDuration: how long a call waits for a
// permit when the bulkhead is full before it is rejected. 0 rejects at once.
// The wait also ends when the call's context ends (see [Bulkhead.Acquire]).
// Default 0.
func WithMaxWaitDuration(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxWait = d })
}

// WithAdaptive replaces the fixed limit with an adaptive one that moves
// between a.MinLimit and a.MaxLimit with the calls' latency (failsafe-go's
// adaptivelimiter; see the package documentation). Zero fields take their
// defaults. Default: no adaptive limit, the fixed maxConcurrentCalls.
func WithAdaptive(a Adaptive) Option {
	return optionFunc(func(c *config) { cp := a; c.adaptive = &cp })
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
