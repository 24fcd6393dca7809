package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/resilience"
)

// clientYAML is the meshless service's configuration: the weather API's
// host (its address is known only at run time), short timeouts, a breaker
// that opens on failures and on slow calls, a bulkhead, and one retry of
// the forecast route (a GET: idempotent).
const clientYAML = `
hosts:
  "{{host}}":
    timeout: { perAttempt: 150ms, overall: 400ms }
    circuitBreaker:
      slidingWindowSize: 20
      minimumNumberOfCalls: 10
      failureRateThreshold: 50
      slowCallDurationThreshold: 100ms
      slowCallRateThreshold: 50
      waitDurationInOpenState: 300ms
      maxWaitDurationInOpenState: 300ms
    bulkhead: { maxConcurrentCalls: 20 }
    routes:
      "GET /v1/current/{city}":
        retry: { maxAttempts: 2, initialBackoff: 20ms }
`

// serve runs one copy of the caller's service, in a process of its own:
// GET /weather?city=NAME asks the weather API and answers its forecast, or
// 503 at once when the call fails. Both copies run this code; the meshless
// one's client goes through httpmw. It prints its address, then its
// breaker's transitions, on stdout, and exits when stdin closes.
func serve(mode, apiURL string) error {
	client := &http.Client{Timeout: 30 * time.Second} // what the service ran with
	if mode == "meshless" {
		host := strings.TrimPrefix(apiURL, "http://")
		cfg, err := httpmw.ParseConfig([]byte(strings.ReplaceAll(clientYAML, "{{host}}", host)))
		if err != nil {
			return err
		}
		chain, err := httpmw.New(cfg, httpmw.WithObserver(transitions()))
		if err != nil {
			return err
		}
		defer chain.Close()
		client.Transport = chain.RoundTripper(http.DefaultTransport)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /weather", func(w http.ResponseWriter, r *http.Request) {
		forecast(w, r, client, apiURL, mode)
	})
	mux.HandleFunc("GET /goroutines", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, runtime.NumGoroutine())
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(lis) //nolint:errcheck // ends with Close below
	fmt.Println(lis.Addr())
	io.Copy(io.Discard, bufio.NewReader(os.Stdin)) //nolint:errcheck // until the parent closes stdin
	return srv.Close()
}

// forecast is the service's handler: the same code in both copies.
func forecast(w http.ResponseWriter, r *http.Request, client *http.Client, apiURL, mode string) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, apiURL+"/v1/current/"+r.URL.Query().Get("city"), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req.Header.Set("X-Caller", mode)
	req.Header.Set(phaseHeader, r.Header.Get(phaseHeader)) // the demo's bookkeeping: see api
	resp, err := client.Do(req)
	if err != nil {
		http.Error(w, "weather unavailable: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body) //nolint:errcheck
}

// transitions prints the breaker's state changes.
func transitions() resilience.Observer {
	return resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		if src.Kind != resilience.KindCircuitBreaker {
			return nil
		}
		return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
			if e.Type == resilience.EventTransition {
				fmt.Printf("breaker %v → %v (%v)\n", e.From, e.To, e.Reason)
			}
		})
	})
}
