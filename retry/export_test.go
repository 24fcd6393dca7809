package retry

// WithRandom sets the source of the jitter, a function returning values in
// [0, 1), for tests that want exact waits.
func WithRandom(f func() float64) Option { return optionFunc(func(c *config) { c.rand = f }) }
