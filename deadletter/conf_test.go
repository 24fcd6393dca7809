package deadletter_test

import (
	"github.com/meshless/meshless/circuitbreaker"
)

// breakerConf returns circuitbreaker.DefaultConfig() with edit applied: the tests' way to set
// a few fields of a circuitbreaker.Config.
func breakerConf(edit func(*circuitbreaker.Config)) circuitbreaker.Config {
	c := circuitbreaker.DefaultConfig()
	edit(&c)
	return c
}
