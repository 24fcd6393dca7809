package httpmw

// Keys returns how many entries the chain's table holds.
func (c *Chain) Keys() int { return c.e.Keys() }

// RetryAfter is retryAfter, for tests.
var RetryAfter = retryAfter
