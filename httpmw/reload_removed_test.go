package httpmw_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/resilience"
)

// released counts, by kind and name, the breakers and bulkheads whose
// gauges an observer was told to let go (resilience.Releaser).
type released struct {
	mu sync.Mutex
	n  map[string]int
}

type releasedRecorder struct {
	r   *released
	key string
}

func (releasedRecorder) Record(context.Context, resilience.Event) {}
func (x releasedRecorder) Release() {
	x.r.mu.Lock()
	defer x.r.mu.Unlock()
	x.r.n[x.key]++
}

func (r *released) observer() resilience.Observer {
	return resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		if src.Kind != resilience.KindCircuitBreaker && src.Kind != resilience.KindBulkhead {
			return nil
		}
		return releasedRecorder{r: r, key: src.Kind.String() + " " + src.Name}
	})
}

func (r *released) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[key]
}

func reloadHTTP(t *testing.T, chain *httpmw.Chain, yaml string) {
	t.Helper()
	cfg, err := httpmw.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.Reload(cfg); err != nil {
		t.Fatal(err)
	}
}

// A reload that removes a host from the YAML, or a route of a host whose
// breaker is keyed by route, closes the breaker and the bulkhead of that
// key: the host's requests now run on the unknown hosts' entry (the
// route's on its host's own), and nothing calls the old key again. Before,
// Reload kept them, because the settings the removed host or route
// resolves to, read as if it were still named, still give it its key: an
// OPEN breaker kept its gauges — OPEN on the dashboard, its alert firing —
// for the life of the chain.
func TestAReloadClosesTheBreakersOfARemovedHostOrRoute(t *testing.T) {
	const other = "  other.test: {}\n"
	tests := []struct {
		name, key, path, before, after string
	}{
		{
			name: "host removed", key: "api.test", path: "/v1/x",
			before: "hosts:\n  api.test: {}\n" + other,
			after:  "hosts:\n" + other,
		},
		{
			name: "route removed, keyBy: method", key: "api.test/GET /v1/", path: "/v1/x",
			before: "hosts:\n  api.test:\n    circuitBreaker: { keyBy: method }\n    routes:\n      \"GET /v1/\": {}\n" + other,
			after:  "hosts:\n  api.test:\n    circuitBreaker: { keyBy: method }\n" + other,
		},
	}
	const defaults = `
defaults:
  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2 }
  bulkhead: { maxConcurrentCalls: 5 }
  retry: { enabled: false }
  adaptiveThrottling: { enabled: false }
`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rel := &released{n: map[string]int{}}
				chain := newChain(t, defaults+tt.before, "", httpmw.WithObserver(rel.observer()))
				next := &fakeNext{answer: answering(http.StatusServiceUnavailable)}
				e := &httpMatrixEnv{path: tt.path, next: next, chain: chain, client: chain.Client(next)}
				if got := e.send(t, context.Background(), 3, http.MethodGet); got["CIRCUIT_OPEN"] != 1 {
					t.Fatalf("before the reload: %v, want the key's breaker open", got)
				}
				if cb, ok := chain.Breaker(tt.key); !ok || cb.State() != circuitbreaker.StateOpen {
					t.Fatalf("the breaker of %s: %v", tt.key, ok)
				}
				reloadHTTP(t, chain, defaults+tt.after)
				if _, ok := chain.Breaker(tt.key); ok {
					t.Errorf("after a reload that removed it, %s still has its breaker", tt.key)
				}
				if b, k := rel.count("circuit_breaker "+tt.key), rel.count("bulkhead "+tt.key); b != 1 || k != 1 {
					t.Errorf("released the breaker of %s %d times and its bulkhead %d times, want once each", tt.key, b, k)
				}
				if got := e.send(t, context.Background(), 1, http.MethodGet); got["Service Unavailable"] != 1 {
					t.Errorf("after the reload: %v, want the request sent on the entry the new configuration gives it", got)
				}
			})
		})
	}
}
