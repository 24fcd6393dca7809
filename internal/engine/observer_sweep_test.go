package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/resilience"
)

// A unary call whose observer panics at any one of its events, on every
// unary path, a first success and a success after a retry, goes on up
// with the observer's panic, and on its way every permit is given back,
// every context derived from the caller's is released, the call is
// recorded once (and so are its overall timeout's and its attempt
// policy's ends), and the breaker counts each attempt made as it ended —
// also when the panic is at the per-attempt timeout's event, which
// deadline.AttemptDeadline.EndIn reports before the gates exit: it was
// taken for the attempt's own panic, and the breaker counted a success as
// a failure. (The other regressions it guards:
// TestAPanicAsTheRetryIsToldOfTheLastAttemptEndsTheCall and
// TestAPanicAtTheOverallTimeoutsEventEndsTheCall.)
func TestAnObserverPanickingAtAnyEventOfAUnaryCall(t *testing.T) {
	for _, path := range []string{"plain", "call", "once", "hedged"} {
		for _, retried := range []bool{false, true} {
			if retried && (path == "hedged" || path == "once") {
				continue
			}
			run := func(t *testing.T, panicAt int) (log []string, r any, m *Method, ctx *watched, a *scripted) {
				cfg := panicPolicies(t, path)
				if cfg.Defaults.Bulkhead == nil {
					cfg.Defaults.Bulkhead = &config.BulkheadSection{MaxConcurrentCalls: config.Ptr(4)}
				}
				cfg.Defaults.CircuitBreaker = &config.CircuitBreakerSection{}
				if err := cfg.Validate(); err != nil {
					t.Fatal(err)
				}
				var (
					mu sync.Mutex
					on bool
				)
				obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
					return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
						mu.Lock()
						if !on {
							mu.Unlock()
							return
						}
						log = append(log, fmt.Sprintf("%v/%s %v", src.Kind, src.Scope, ev.Type))
						p := len(log)-1 == panicAt
						mu.Unlock()
						if p {
							panic("observer")
						}
					})
				})
				e, err := New(cfg, fakeTransport{}, Options{MaxKeys: 10, Observer: obs})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(e.Close)
				m = lookup(e, "/a.B/C")
				mu.Lock()
				on = true
				mu.Unlock()
				a = &scripted{script: func(n int) error {
					if n == 1 && retried {
						return &codeError{code: 14} // UNAVAILABLE: retried
					}
					return nil
				}}
				ctx = &watched{Context: context.Background(), done: make(chan struct{})}
				r = recovered(func() {
					if path == "once" {
						_ = m.RunOnce(ctx, a)
						return
					}
					_, _ = m.Run(ctx, a)
				})
				mu.Lock()
				defer mu.Unlock()
				on = false
				return append([]string(nil), log...), r, m, ctx, a
			}
			var base []string
			t.Run(fmt.Sprintf("%s/retried=%v", path, retried), func(t *testing.T) {
				var r any
				if base, r, _, _, _ = run(t, -1); r != nil {
					t.Fatalf("the call panicked with %v", r)
				}
			})
			for i, ev := range base {
				t.Run(fmt.Sprintf("%s/retried=%v/%d:%s", path, retried, i, ev), func(t *testing.T) {
					log, r, m, ctx, a := run(t, i)
					if r != "observer" {
						t.Fatalf("recovered %v, want the observer's panic", r)
					}
					if b := m.Bulkhead(); b.Active() != 0 {
						t.Errorf("%d bulkhead permits out after the panic, want 0", b.Active())
					}
					if n := ctx.live.Load(); n != 0 {
						t.Errorf("%d contexts derived from the caller's are live after the panic, want 0", n)
					}
					policy := "retry/ retry_done"
					if path == "hedged" {
						policy = "hedging/ hedge_done"
					}
					for _, once := range []string{"call/ call", "timeout/overall call", policy} {
						if n := countPrefix(log, once); n != 1 {
							t.Errorf("%d events %q, want 1; events:\n%s", n, once, strings.Join(log, "\n"))
						}
					}
					made := int64(len(a.marks))
					fails := int64(0)
					if retried && made > 0 {
						fails = 1
					}
					if got := m.Breaker().Metrics(); got.SuccessfulCalls != made-fails || got.FailedCalls != fails {
						t.Errorf("breaker counts %+v, want %d successes and %d failures: the attempts made", got, made-fails, fails)
					}
				})
			}
		}
	}
}
