package httpmw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// A server's adaptive bulkhead takes no sample from a request whose
// context ended while its handler ran (its client went away, or a deadline
// an outer middleware set passed): its duration measured the caller's
// patience (docs/bulkhead.md, "Which calls are samples"), as a gRPC
// server's CANCELLED answer does. Before, every request was a sample, and
// a wave of slow requests whose clients had gone pulled the limit down as
// if the server had become slow.
func TestAServerAdaptiveBulkheadDropsRequestsWhoseClientWentAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t, "defaults: { bulkhead: { adaptive: {} } }")
		run := func(d time.Duration, latency func(time.Duration) time.Duration, gone bool) {
			start := time.Now()
			for time.Since(start) < d {
				lat := latency(time.Since(start))
				var wg sync.WaitGroup
				for range 10 {
					wg.Go(func() {
						ctx, cancel := context.WithCancel(context.Background())
						defer cancel()
						h := srv.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
							time.Sleep(lat)
							if gone {
								cancel() // the client hangs up
								<-r.Context().Done()
							}
						}))
						rec := httptest.NewRecorder()
						h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://svc.local/x", nil).WithContext(ctx))
						if rec.Code != http.StatusOK {
							t.Errorf("status %d", rec.Code)
						}
					})
				}
				wg.Wait()
			}
		}
		run(20*time.Second, func(time.Duration) time.Duration { return 10 * time.Millisecond }, false)
		b, ok := srv.Bulkhead(sweepKey)
		if !ok {
			t.Fatal("no bulkhead")
		}
		steady := b.Limit()
		rising := func(elapsed time.Duration) time.Duration {
			lat := 10 * time.Millisecond
			for range int(elapsed / time.Second) {
				lat = lat * 12 / 10
			}
			return lat
		}
		run(15*time.Second, rising, true)
		if got := b.Limit(); got < steady-1 {
			t.Errorf("limit %d after 15s of slow requests whose clients went away, want about %d: they were samples", got, steady)
		}
		if b.Active() != 0 {
			t.Errorf("%d permits held", b.Active())
		}
	})
}
