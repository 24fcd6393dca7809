package httpmw_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/internal/ctxtest"
	"github.com/meshless/meshless/resilience"
)

// A request that waited in the bulkhead's queue and got its permit just as
// its deadline passed was sent with a dead context: the transport failed
// it with the context's error without asking the backend, and the breaker
// counted that against a healthy host (docs/bulkhead.md, "Waiting and the
// caller's context"). It is not attempted: the caller gets the context's
// error, nothing counts, and the permit comes back.
func TestARequestAdmittedAfterItsDeadlineFromTheQueueIsNotAttempted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var arrived atomic.Int64
		release := make(chan struct{})
		rt := rtFunc(func(r *http.Request) (*http.Response, error) {
			if err := r.Context().Err(); err != nil {
				return nil, err // as net/http fails a request whose context has ended
			}
			if arrived.Add(1) == 1 {
				<-release
			}
			return ok(r)
		})
		waiter := ctxtest.NewEnding()
		var armed atomic.Bool
		// The waiter's deadline passes once the bulkhead handed it the
		// permit, before its attempt, on its own goroutine.
		obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
			if src.Kind != resilience.KindBulkhead {
				return nil
			}
			return recordFunc(func(_ context.Context, e resilience.Event) {
				if e.Type == resilience.EventAcquired && armed.CompareAndSwap(true, false) {
					waiter.End()
				}
			})
		})
		chain := fixChain(t, `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }
  timeout: { perAttempt: 0s, overall: 0s }
  bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 5s }
hosts:
  api.example:
    retry: { maxAttempts: 3, initialBackoff: 1s, jitter: 0 }
`, httpmw.WithObserver(obs))
		client := chain.RoundTripper(rt)
		get := func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/x", nil)
			resp, err := client.RoundTrip(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}
		held := make(chan error, 1)
		go func() { held <- get(context.Background()) }()
		synctest.Wait() // the first request holds the only permit
		armed.Store(true)
		got := make(chan error, 1)
		go func() { got <- get(waiter) }()
		synctest.Wait() // the second waits for it
		close(release)
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		if err := <-got; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %v, want the context's deadline", err)
		}
		if n := arrived.Load(); n != 1 {
			t.Errorf("the host saw %d requests, want 1", n)
		}
		cb, _ := chain.Breaker("api.example")
		if m := cb.Metrics(); m.Calls != 1 || m.FailedCalls != 0 {
			t.Errorf("breaker counted %d calls, %d failed; want the first request's success only", m.Calls, m.FailedCalls)
		}
		if err := get(context.Background()); err != nil {
			t.Errorf("a later request: %v; want it admitted", err)
		}
	})
}

type recordFunc func(ctx context.Context, e resilience.Event)

func (f recordFunc) Record(ctx context.Context, e resilience.Event) { f(ctx, e) }
