package grpcmw_test

import (
	"fmt"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/codes"
)

// A reload whose configuration no longer gives a key its rate limiter
// (keyBy changed, here from service to method, or rateLimiter switched
// off) drops it, as it drops the key's breaker and bulkhead: before,
// chain.Limiter of the old key still returned it, and every key a chain
// ever had kept its limiter (and throttler) across all later reloads.
func TestAReloadDropsTheRateLimitersNoKeyUses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const base = `
defaults:
  circuitBreaker: { keyBy: %s }
  rateLimiter: { limitForPeriod: 5, limitRefreshPeriod: 1h }
  retry: { enabled: false }
`
		e := &reloadEnv{t: t, f: new(faultServer), release: make(chan codes.Code)}
		e.f.setUnary(e.serve)
		client, chain, stop := inBubble(t, e.f, fmt.Sprintf(base, "service"))
		defer stop()
		e.client, e.chain = client, chain
		e.want("a call", e.call(), "OK")
		if _, ok := chain.Limiter(testService); !ok {
			t.Fatal("no limiter for the service after its first call")
		}
		e.reload(fmt.Sprintf(base, "method"))
		if _, ok := chain.Limiter(testService); ok {
			t.Error("the service's limiter is still the chain's after keyBy: method")
		}
		e.want("a call under keyBy: method", e.call(), "OK")
		if _, ok := chain.Limiter(testService + "/UnaryCall"); !ok {
			t.Error("no limiter for the method after its first call")
		}
		e.reload("defaults:\n  retry: { enabled: false }\n")
		if _, ok := chain.Limiter(testService + "/UnaryCall"); ok {
			t.Error("the method's limiter is still the chain's after rateLimiter was switched off")
		}
	})
}
