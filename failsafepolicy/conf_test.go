package failsafepolicy_test

import (
	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
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
