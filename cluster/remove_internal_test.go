package cluster

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A breaker removed while Redis comes back (the sync goroutine hands every
// breaker the coordination of a cluster that answers) decides alone from
// then on. It could be handed that coordination after Remove, from a list
// of the breakers taken before: leasing its probes from a cluster that
// no longer knew it, it stayed HALF_OPEN, rejecting every call, for ever.
func TestABreakerRemovedWhileRedisComesBackDecidesAlone(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	clk := resiliencetest.NewClock(time.Unix(1e9, 0))
	c, err := New(rdb, WithClock(clk), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := circuitbreaker.DefaultConfig()
	cfg.SlidingWindowSize, cfg.MinimumNumberOfCalls = 2, 2
	cfg.WaitDurationInOpenState = time.Second
	others := make([]*circuitbreaker.Breaker, 100) // a longer list to hand out
	for i := range others {
		others[i], _ = circuitbreaker.New(circuitbreaker.WithConfig(cfg), circuitbreaker.WithName("other"+string(rune('a'+i%26))))
		c.Add(others[i])
	}
	failed := resilience.Result{Outcome: resilience.Failure}
	for i := range 200 {
		b, err := circuitbreaker.New(circuitbreaker.WithConfig(cfg), circuitbreaker.WithClock(clk), circuitbreaker.WithName("svc"))
		if err != nil {
			t.Fatal(err)
		}
		c.Add(b)
		c.health.Store(healthDown)
		var wg sync.WaitGroup
		wg.Go(func() { c.switchHealth(nil) }) // Redis answers again
		for c.health.Load() != healthUp {     // switchHealth's first step: its list comes next
			runtime.Gosched()
		}
		c.Remove(b)
		wg.Wait()
		for range 2 {
			if _, pm, err := b.Enter(context.Background()); err == nil {
				_ = b.Exit(context.Background(), pm, failed)
			}
		}
		clk.Advance(time.Second)
		if _, _, err := b.Enter(context.Background()); err != nil {
			t.Fatalf("try %d: a removed breaker's probe: %v", i, err)
		}
		b.Close()
	}
}
