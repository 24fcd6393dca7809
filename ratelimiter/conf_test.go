package ratelimiter_test

import (
	"github.com/meshless/meshless/ratelimiter"
)

// limiterConf returns ratelimiter.DefaultConfig() with edit applied: the tests' way to set
// a few fields of a ratelimiter.Config.
func limiterConf(edit func(*ratelimiter.Config)) ratelimiter.Config {
	c := ratelimiter.DefaultConfig()
	edit(&c)
	return c
}
