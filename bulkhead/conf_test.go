package bulkhead_test

import (
	"github.com/meshless/meshless/bulkhead"
)

// bulkheadConf returns bulkhead.DefaultConfig() with edit applied: the tests' way to set
// a few fields of a bulkhead.Config.
func bulkheadConf(edit func(*bulkhead.Config)) bulkhead.Config {
	c := bulkhead.DefaultConfig()
	edit(&c)
	return c
}
