package httpmw_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"

	"github.com/meshless/meshless/httpmw"
)

// A sweep of httpmw's Server: each gate (bulkhead at 1, with and without a
// wait; rate limiter at its limit), enforce and observe, against each thing
// a handler does, with the gate free and full. Only the server's own
// rejections carry Meshless-Rejection and Retry-After; a handler's answer
// reaches the caller as it wrote it; every permit comes back, panics too.
// sweepKey is the bulkhead key of a host the configuration does not name.
const sweepKey = "_OTHER"

func TestHTTPServerSweep(t *testing.T) {
	gates := []struct {
		name, yaml string
		full       int // the status a request past the gate gets in enforce mode
		limiter    bool
	}{
		{"bulkhead-1", "bulkhead: { maxConcurrentCalls: 1 }", 503, false},
		{"bulkhead-1-wait", "bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 50ms }", 503, false},
		{"ratelimiter-1", "bulkhead: { maxConcurrentCalls: 100 }, rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h }", 429, true},
	}
	handlers := []struct {
		name  string
		h     http.HandlerFunc
		want  int
		panic bool
	}{
		{"ok", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hi")) }, 200, false},
		{"404", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, 404, false},
		{"500", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }, 500, false},
		{"503-own", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", 503) }, 503, false},
		{"panic", func(w http.ResponseWriter, r *http.Request) { panic("boom") }, 200, true},
		{"partial-then-abort", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			w.Write([]byte("part"))
			panic(http.ErrAbortHandler)
		}, 200, true},
	}
	for _, g := range gates {
		for _, mode := range []string{"", "mode: observe, "} {
			for _, hb := range handlers {
				t.Run(g.name+"/"+mode+hb.name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						srv := newServer(t, "defaults: { "+mode+g.yaml+" }")
						hold, release := make(chan struct{}), make(chan struct{})
						h := srv.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
							if r.URL.Path == "/hold" {
								close(hold)
								<-release
								return
							}
							hb.h(w, r)
						}))
						serve := func(path string) (rec *httptest.ResponseRecorder, panicked bool) {
							rec = httptest.NewRecorder()
							defer func() {
								if p := recover(); p != nil {
									panicked = true
								}
							}()
							h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://svc.local"+path, nil))
							return rec, false
						}
						check := func(rec *httptest.ResponseRecorder, panicked bool, what string) {
							t.Helper()
							if panicked != hb.panic {
								t.Errorf("%s: panicked %v, want %v", what, panicked, hb.panic)
							}
							if !panicked && rec.Code != hb.want {
								t.Errorf("%s: status %d, want %d", what, rec.Code, hb.want)
							}
							if v := rec.Header().Get(httpmw.ReasonHeader); v != "" {
								t.Errorf("%s: the handler's answer carries %s: %q", what, httpmw.ReasonHeader, v)
							}
						}
						// The gate free.
						rec, p := serve("/x")
						check(rec, p, "free")
						// The gate full: a request holds the bulkhead (or the
						// limiter's only permit is spent above).
						if !g.limiter {
							go serve("/hold")
							<-hold
						}
						rec, p = serve("/x")
						if mode == "" {
							if p || rec.Code != g.full || rec.Header().Get(httpmw.ReasonHeader) == "" || rec.Header().Get("Retry-After") == "" {
								t.Errorf("full: panicked %v, status %d, headers %v; want %d with the markers", p, rec.Code, rec.Header(), g.full)
							}
						} else {
							check(rec, p, "full, observed")
						}
						if !g.limiter {
							close(release)
							synctest.Wait()
						}
						if b, ok := srv.Bulkhead(sweepKey); !ok || b.Active() != 0 {
							t.Errorf("%d permits still held", b.Active())
						}
					})
				})
			}
		}
	}
}
