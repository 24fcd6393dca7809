package httpmw_test

import (
	"bytes"
	"context"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/resilience"
)

// A panic that goes on up from a hedged copy (a RoundTripper's below the
// chain) releases the answers the other copies hold: none is the call's,
// and a body not read to its end holds its connection (and net/http's two
// goroutines) for as long as the caller's context lives — forever for
// context.Background.
func TestAPanicInAHedgedCopyReleasesTheOtherAnswers(t *testing.T) {
	b := newBackend(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable) // non-fatal: the hedge waits for the other copy
		w.Write(bytes.Repeat([]byte("x"), 8<<10))    //nolint:errcheck // longer than what an attempt reads
	})
	// The breaker records each attempt once it has returned (its answer
	// kept): the first one it records is the second copy's.
	answered := make(chan struct{})
	var once sync.Once
	obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
			if src.Kind == resilience.KindCircuitBreaker && e.Type == resilience.EventCall {
				once.Do(func() { close(answered) })
			}
		})
	})
	chain := newChain(t, `
hosts:
  "{{host}}":
    retry: { enabled: false }
    hedging: { maxAttempts: 2, hedgingDelay: 0s }
`, b.host, httpmw.WithObserver(obs))
	tr, cs := newTransport(t)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, b.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Whichever copy comes first waits for the other's answer, then panics.
	var first sync.Once
	client := chain.Client(rtFunc(func(r *http.Request) (*http.Response, error) {
		isFirst := false
		first.Do(func() { isFirst = true })
		if isFirst {
			<-answered
			panic("a RoundTripper's panic")
		}
		return tr.RoundTrip(r)
	}))
	func() {
		defer func() {
			if p := recover(); p != "a RoundTripper's panic" {
				t.Errorf("recovered %v, want the RoundTripper's panic", p)
			}
		}()
		resp, err := client.Do(req)
		t.Errorf("the call returned %v, %v; want its panic", resp, err)
	}()
	tr.CloseIdleConnections()
	for i := 0; cs.open.Load() != 0 && i < 1000; i++ {
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
	if n := cs.open.Load(); n != 0 {
		t.Errorf("%d connections still open after the panic, want 0: the other copy's answer was not released", n)
	}
}
