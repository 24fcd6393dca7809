package e2e

// This file runs, beside the hedging client (hedging_test.go) and with its
// observer, an HTTP client through httpmw: it fills the dashboard's
// Logical HTTP calls row, which examples/chaos (gRPC only) does not.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/otelmw"
)

// httpYAML names the weather API's host (written in at run time) and its
// route, so that calls carry url.template.
const httpYAML = `
hosts:
  "{{host}}":
    retry: { maxAttempts: 2, initialBackoff: 5ms }
    routes:
      "GET /v1/current/{city}": {}
`

// startHTTPClient starts a weather API that answers most requests, 503 to
// one in five and 404 to one in seven, and two workers calling it through
// httpmw about 20 times a second each, recorded by obs. Everything stops
// when the test ends.
func startHTTPClient(t *testing.T, obs *otelmw.Observer) {
	t.Helper()
	var n atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch i := n.Add(1); {
		case i%5 == 0:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case i%7 == 0:
			http.NotFound(w, r)
		default:
			io.WriteString(w, `{"tempC":21}`) //nolint:errcheck
		}
	}))
	t.Cleanup(api.Close)
	cfg, err := httpmw.ParseConfig([]byte(strings.ReplaceAll(httpYAML, "{{host}}", strings.TrimPrefix(api.URL, "http://"))))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := httpmw.New(cfg, httpmw.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	client := chain.Client(tr)

	ctx, cancel := context.WithCancel(context.Background())
	var workers sync.WaitGroup
	t.Cleanup(func() { cancel(); workers.Wait() })
	for _, path := range []string{"/v1/current/lisbon", "/v1/alerts"} {
		workers.Go(func() {
			tick := time.NewTicker(50 * time.Millisecond) // pacing the load, not waiting for a state
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.URL+path, nil)
				if err != nil {
					return
				}
				if resp, err := client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body) //nolint:errcheck
					resp.Body.Close()
				}
			}
		})
	}
}
