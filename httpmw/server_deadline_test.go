package httpmw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/httpmw"
)

// A request waiting in the server's bulkhead queue (maxWaitDuration 10s),
// or for its rate limiter's permit (timeoutDuration 10s), whose own context
// ends gives up then, without running the handler, and is answered as a
// request whose context ended, not as a rejection: 504 Gateway Timeout for
// a deadline (the context's deadline, as an outer middleware sets one), 499
// Client Closed Request for a client that went away, as Envoy and
// grpc-gateway map DEADLINE_EXCEEDED and CANCELLED, and without
// Meshless-Rejection. It was answered 503 (429) with Meshless-Rejection:
// BULKHEAD_FULL (RATE_LIMITED) and Retry-After, a shedding the server's
// own middleware and logs saw, and which a client still there would have
// read as one (never retried, ignored by its breaker).
func TestAServerRequestWhoseContextEndsInTheQueueIsNotARejection(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		cancel     bool
		want       int
	}{
		{"bulkhead, deadline", "bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 10s }", false, http.StatusGatewayTimeout},
		{"bulkhead, cancelled", "bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 10s }", true, 499},
		{"rate limiter, cancelled", "rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 5s, timeoutDuration: 10s }", true, 499},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				srv := newServer(t, "defaults: { "+tc.yaml+" }")
				release := make(chan struct{})
				var handled atomic.Int32
				h := srv.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if handled.Add(1) == 1 {
						<-release // holds the one permit
					}
				}))
				held := make(chan struct{})
				go func() {
					defer close(held)
					h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "http://svc.local/x", nil))
				}()
				synctest.Wait()

				var ctx context.Context
				var cancel context.CancelFunc
				wantAt := time.Second
				if tc.cancel {
					ctx, cancel = context.WithCancel(context.Background())
					time.AfterFunc(500*time.Millisecond, cancel)
					wantAt = 500 * time.Millisecond
				} else {
					ctx, cancel = context.WithTimeout(context.Background(), time.Second)
				}
				defer cancel()
				w := httptest.NewRecorder()
				start := time.Now()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://svc.local/x", nil).WithContext(ctx))
				took := time.Since(start)
				close(release)
				<-held
				if w.Code != tc.want || w.Header().Get(httpmw.ReasonHeader) != "" || took != wantAt {
					t.Errorf("answered %d, %s: %q after %v; want %d without it at %v",
						w.Code, httpmw.ReasonHeader, w.Header().Get(httpmw.ReasonHeader), took, tc.want, wantAt)
				}
				if n := handled.Load(); n != 1 {
					t.Errorf("%d handlers ran; want 1, the permit holder's", n)
				}
			})
		})
	}
}

// On the server the Host header, which the client writes, picks the entry
// a request draws on (docs/http.md, "Which budget a request draws on is the
// client's choice"): with a.example's one permit held, a request naming
// a.example is refused, one naming a host the file does not list runs on
// the entry unknown hosts share, and so does one naming another.
func TestAServerRequestsHostHeaderPicksItsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, err := httpmw.ParseConfig([]byte(`
defaults: { bulkhead: { maxConcurrentCalls: 1 } }
hosts:
  a.example: { bulkhead: { maxConcurrentCalls: 1 } }
`))
		if err != nil {
			t.Fatal(err)
		}
		srv, err := httpmw.NewServer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		release := make(chan struct{})
		h := srv.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Hold") != "" {
				<-release
			}
		}))
		held := make(chan struct{})
		go func() {
			defer close(held)
			r := httptest.NewRequest(http.MethodGet, "http://a.example/x", nil)
			r.Header.Set("Hold", "1")
			h.ServeHTTP(httptest.NewRecorder(), r)
		}()
		synctest.Wait()
		for host, want := range map[string]int{"a.example": 503, "b.example": 200, "A.EXAMPLE:80": 200} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://"+host+"/x", nil))
			if w.Code != want {
				t.Errorf("Host: %s answered %d, want %d", host, w.Code, want)
			}
		}
		close(release)
		<-held
	})
}
