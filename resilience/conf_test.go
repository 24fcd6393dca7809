package resilience_test

import (
	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/retry"
)

// bulkheadConf returns bulkhead.DefaultConfig() with edit applied: the tests' way to set
// a few fields of a bulkhead.Config.
func bulkheadConf(edit func(*bulkhead.Config)) bulkhead.Config {
	c := bulkhead.DefaultConfig()
	edit(&c)
	return c
}

// breakerConf returns circuitbreaker.DefaultConfig() with edit applied: the tests' way to set
// a few fields of a circuitbreaker.Config.
func breakerConf(edit func(*circuitbreaker.Config)) circuitbreaker.Config {
	c := circuitbreaker.DefaultConfig()
	edit(&c)
	return c
}

// retryConf returns retry.DefaultConfig() with edit applied: the tests' way to set
// a few fields of a retry.Config.
func retryConf(edit func(*retry.Config)) retry.Config {
	c := retry.DefaultConfig()
	edit(&c)
	return c
}
