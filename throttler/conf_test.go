package throttler_test

import (
	"github.com/meshless/meshless/throttler"
)

// throttlerConf returns throttler.DefaultConfig() with edit applied: the tests' way to set
// a few fields of a throttler.Config.
func throttlerConf(edit func(*throttler.Config)) throttler.Config {
	c := throttler.DefaultConfig()
	edit(&c)
	return c
}
