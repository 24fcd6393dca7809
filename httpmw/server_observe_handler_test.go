package httpmw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/resilience"
)

// A server in mode: observe (a rollout of its load shedding) marks only its
// own gates' context: its handler gets the caller's, so the handler's own
// outbound policies, in enforce mode, act as set. Before, the handler got
// the observed context, and its bulkhead with maxWaitDuration refused at
// once a call that would have got a permit 10ms later.
func TestAHTTPServerInObserveModeLeavesTheHandlersCallsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newServer(t, "defaults: { mode: observe, bulkhead: { maxConcurrentCalls: 10 } }")
		out, _ := bulkhead.New(bulkhead.WithConfig(bulkhead.Config{MaxConcurrentCalls: 1, MaxWaitDuration: time.Second}))
		held, freed := make(chan struct{}), make(chan struct{})
		go out.Execute(context.Background(), func(context.Context) error {
			defer close(freed)
			close(held)
			time.Sleep(10 * time.Millisecond)
			return nil
		})
		<-held
		var observed bool
		var callErr error
		h := srv.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			observed = resilience.Observing(r.Context())
			callErr = out.Execute(r.Context(), func(context.Context) error { return nil })
		}))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "http://svc.local/x", nil))
		<-freed
		if observed {
			t.Errorf("the handler's request context is marked observed")
		}
		if callErr != nil {
			t.Errorf("the handler's enforce-mode bulkhead refused at once: %v", callErr)
		}
	})
}
