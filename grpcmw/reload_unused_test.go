package grpcmw_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
)

// releases counts, by kind and name, the policy instances an observer was
// told are gone (their gauges released).
type releases struct {
	mu sync.Mutex
	n  map[string]int
}

type releasing struct {
	r   *releases
	key string
}

func (releasing) Record(context.Context, resilience.Event) {}
func (x releasing) Release() {
	x.r.mu.Lock()
	defer x.r.mu.Unlock()
	x.r.n[x.key]++
}

func (r *releases) observer() resilience.Observer {
	return resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		if src.Kind != resilience.KindCircuitBreaker && src.Kind != resilience.KindBulkhead {
			return nil
		}
		return releasing{r: r, key: src.Kind.String() + " " + src.Name}
	})
}

func (r *releases) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[key]
}

// A reload whose configuration no longer gives a key its breaker or
// bulkhead (keyBy changed, here from method to service) closes them: an
// OPEN breaker nothing would call again kept its gauges — OPEN on the
// dashboard, its alert firing — until the chain was closed. The key the
// new configuration gives is built by the next call; a reload that keeps
// the key keeps the breaker, its state too.
func TestAReloadClosesTheBreakersAndBulkheadsNoKeyUses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rel := &releases{n: map[string]int{}}
		f := new(faultServer)
		f.setUnary(failing(codes.Unavailable))
		const base = `
defaults:
  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2, keyBy: %s }
  bulkhead: { maxConcurrentCalls: 5 }
  retry: { enabled: false }
  adaptiveThrottling: { enabled: false }
`
		client, chain, stop := inBubbleWith(t, f, fmt.Sprintf(base, "method"), []grpcmw.Option{grpcmw.WithObserver(rel.observer())})
		defer stop()
		const old = "grpc.testing.TestService/UnaryCall"
		for range 2 {
			_, _ = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}) // opens the method's breaker
		}
		if cb, ok := chain.Breaker(old); !ok || cb.State() != circuitbreaker.StateOpen {
			t.Fatalf("the method's breaker: %v", ok)
		}
		reload := func(keyBy string) {
			t.Helper()
			cfg, err := grpcmw.ParseConfig([]byte(fmt.Sprintf(base, keyBy)))
			if err != nil {
				t.Fatal(err)
			}
			if err := chain.Reload(cfg); err != nil {
				t.Fatal(err)
			}
		}
		reload("method") // the same key: kept, OPEN
		if cb, ok := chain.Breaker(old); !ok || cb.State() != circuitbreaker.StateOpen || rel.count("circuit_breaker "+old) != 0 {
			t.Fatalf("a reload that keeps the key dropped its breaker (%v) or released it (%d)", ok, rel.count("circuit_breaker "+old))
		}
		reload("service")
		if _, ok := chain.Breaker(old); ok {
			t.Errorf("the method's breaker is still the chain's after keyBy: service")
		}
		if b, k := rel.count("circuit_breaker "+old), rel.count("bulkhead "+old); b != 1 || k != 1 {
			t.Errorf("released the method's breaker %d times and its bulkhead %d times, want once each", b, k)
		}
		_, _ = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		if cb, ok := chain.Breaker("grpc.testing.TestService"); !ok || cb.State() != circuitbreaker.StateClosed {
			t.Errorf("the service's breaker after its first call: %v", ok)
		}
	})
}
