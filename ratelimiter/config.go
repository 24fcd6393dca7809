package ratelimiter

import "time"

// Config is a limiter's settings, named after their configuration keys (see
// docs/ratelimiter.md). Start from [DefaultConfig]. A Config is a plain
// comparable value: two equal Configs configure equal limiters (package
// grpcmw maps its YAML onto one, once, and compares them on Reload).
type Config struct {
	// Name names the limiter, in rejections and for observers. Default "".
	Name string
	// LimitForPeriod is how many calls the limiter admits per
	// LimitRefreshPeriod, at least 1. Default 50.
	LimitForPeriod int
	// LimitRefreshPeriod is the period after which the limiter admits
	// LimitForPeriod calls again, counted from the limiter's creation.
	// Positive; default 1s.
	LimitRefreshPeriod time.Duration
	// TimeoutDuration is how long a call may wait for a permit when the
	// period's permits are spent; a call whose context has a deadline waits
	// at most until that deadline. 0 rejects at once. Default 0.
	TimeoutDuration time.Duration
	// Mode is how the limiter spreads a period's permits: [Bursty] or
	// [Smooth]. Default Bursty.
	Mode Mode
}

// DefaultConfig returns the defaults of docs/ratelimiter.md: 50 calls per
// second, bursty, no wait.
func DefaultConfig() Config {
	return Config{LimitForPeriod: DefaultLimitForPeriod, LimitRefreshPeriod: DefaultLimitRefreshPeriod}
}

// WithConfig sets the limiter's settings, every one of them (the name
// included: a [WithName] after it renames the limiter). Start c from
// [DefaultConfig]. Without it a limiter has [DefaultConfig]'s settings.
func WithConfig(c Config) Option {
	return optionFunc(func(cfg *config) {
		cfg.name, cfg.limit, cfg.period, cfg.timeout, cfg.mode = c.Name, c.LimitForPeriod, c.LimitRefreshPeriod, c.TimeoutDuration, c.Mode
	})
}

// Validate reports every invalid setting, each error naming its key
// (errors.Is [resilience.ErrInvalidOption]), as [New] would.
func (c Config) Validate() error {
	cfg := config{}
	WithConfig(c).apply(&cfg)
	return cfg.validate()
}
