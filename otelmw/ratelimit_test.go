package otelmw_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/meshless/meshless/ratelimiter"
)

// meshless.rate_limiter.calls counts each permitted and each rejected call
// of a real limiter, by its name; both series exist at zero from Attach.
func TestRateLimiterCalls(t *testing.T) {
	obs, r := newObserver(t)
	name := attribute.Key("meshless.rate_limiter.name").String("quota")
	outcome := attribute.Key("meshless.rate_limiter.outcome")
	l, err := ratelimiter.New(ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
		c.LimitForPeriod = 2
		c.LimitRefreshPeriod = time.Hour
	})), ratelimiter.WithName("quota"), ratelimiter.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	m := collect(t, r)["meshless.rate_limiter.calls"]
	if m.Unit != "{call}" {
		t.Errorf("unit %q, want {call}", m.Unit)
	}
	sameValues(t, "at attach", values(t, m), map[string]float64{
		enc(name, outcome.String("permitted")): 0, enc(name, outcome.String("rejected")): 0,
	})
	for range 5 {
		_, _, _ = l.Enter(context.Background())
	}
	sameValues(t, "after 5 calls", values(t, collect(t, r)["meshless.rate_limiter.calls"]), map[string]float64{
		enc(name, outcome.String("permitted")): 2, enc(name, outcome.String("rejected")): 3,
	})
}
