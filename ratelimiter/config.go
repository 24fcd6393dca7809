package ratelimiter

import "time"

// Config is a limiter's settings, named after their configuration keys (see
// docs/ratelimiter.md). Start from [DefaultConfig]. A Config is a plain
// comparable value: two equal Configs configure equal limiters (package
// grpcmw maps its YAML onto one, once, and compares them on Reload).
type Config struct {
	Name               string
	LimitForPeriod     int
	LimitRefreshPeriod time.Duration
	TimeoutDuration    time.Duration
	Mode               Mode
}

// DefaultConfig returns the defaults of docs/ratelimiter.md: 50 calls per
// second, bursty, no wait.
func DefaultConfig() Config {
	return Config{LimitForPeriod: DefaultLimitForPeriod, LimitRefreshPeriod: DefaultLimitRefreshPeriod}
}

// WithConfig sets every setting of c at once; options after it override
// single settings.
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
