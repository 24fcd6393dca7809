package otelmw_test

import (
	"context"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/ratelimiter"
	"github.com/meshless/meshless/resilience"
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

// limiterConf returns ratelimiter.DefaultConfig() with edit applied: the tests' way to set
// a few fields of a ratelimiter.Config.
func limiterConf(edit func(*ratelimiter.Config)) ratelimiter.Config {
	c := ratelimiter.DefaultConfig()
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

// hedgeConf returns retry.DefaultHedgeConfig() with edit applied: the tests' way to set
// a few fields of a retry.HedgeConfig.
func hedgeConf(edit func(*retry.HedgeConfig)) retry.HedgeConfig {
	c := retry.DefaultHedgeConfig()
	edit(&c)
	return c
}

// held is an admission through a policy's gate contract (Enter), for tests
// that hold it across steps; Release ends it (Exit) as a call that ran its
// course. The held of a refused Enter releases nothing.
type held struct {
	g   resilience.Gate
	ctx context.Context
	pm  resilience.Permit
	ok  bool
}

// enter asks g to admit one call.
func enter(ctx context.Context, g resilience.Gate) (held, error) {
	_, pm, err := g.Enter(ctx)
	return held{g: g, ctx: ctx, pm: pm, ok: err == nil}, err
}

func (h held) Release() {
	if h.ok {
		_ = h.g.Exit(h.ctx, h.pm, resilience.Result{})
	}
}
