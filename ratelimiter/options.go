package ratelimiter

import (
	"strconv"
	"time"

	"github.com/meshless/meshless/internal/opterr"
	"github.com/meshless/meshless/resilience"
)

// The defaults of docs/ratelimiter.md (Resilience4j's).
const (
	// DefaultLimitForPeriod is limitForPeriod when it is not set.
	DefaultLimitForPeriod = 50
	// DefaultLimitRefreshPeriod is limitRefreshPeriod when it is not set.
	DefaultLimitRefreshPeriod = time.Second
)

// Mode says how a limiter spreads a period's permits.
type Mode uint8

const (
	// Bursty hands out all of a period's limitForPeriod permits as soon as
	// they are asked for, and refreshes them at the start of each period, as
	// Resilience4j does (failsafe-go's bursty rate limiter). The default.
	Bursty Mode = iota
	// Smooth spaces the permits evenly: one every limitRefreshPeriod /
	// limitForPeriod, never two in one such interval (failsafe-go's smooth
	// rate limiter).
	Smooth
)

// String returns "bursty" or "smooth".
func (m Mode) String() string {
	switch m {
	case Bursty:
		return "bursty"
	case Smooth:
		return "smooth"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

type config struct {
	name     string
	limit    int
	period   time.Duration
	timeout  time.Duration
	mode     Mode
	observer resilience.Observer
}

func defaultConfig() config {
	return config{limit: DefaultLimitForPeriod, period: DefaultLimitRefreshPeriod}
}

func (c *config) validate() error {
	var errs opterr.Errors
	bad := errs.Add
	if c.limit < 1 {
		bad("limitForPeriod", c.limit, "must be at least 1")
	}
	if c.period <= 0 {
		bad("limitRefreshPeriod", c.period, "must be positive")
	}
	if c.timeout < 0 {
		bad("timeoutDuration", c.timeout, "must not be negative (0 rejects at once when the limit is reached)")
	}
	switch c.mode {
	case Bursty:
	case Smooth:
		if c.limit >= 1 && c.period > 0 && c.period < time.Duration(c.limit) {
			bad("limitRefreshPeriod", c.period, "must be at least limitForPeriod ("+strconv.Itoa(c.limit)+
				") nanoseconds for a smooth limiter, one nanosecond a permit")
		}
	default:
		bad("mode", c.mode, "must be bursty or smooth")
	}
	return errs.Err()
}

// Option configures a [Limiter]: its settings ([WithConfig]) and what is
// not a setting (its name and observer).
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithName names the limiter, in rejections and for observers. Default "".
func WithName(name string) Option { return optionFunc(func(c *config) { c.name = name }) }

// WithObserver sets the observer that receives the limiter's events: a
// [resilience.EventAcquired] for each admitted call (Duration: its wait for
// the permit) and a [resilience.EventRejection] for each refused one
// (Duration: the time it waited, Err: the *[LimitedError]). Default none.
func WithObserver(o resilience.Observer) Option {
	return optionFunc(func(c *config) { c.observer = o })
}
