package httpmw_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/httpmw"
)

// A client whose weather API answers 503 once: the GET is retried, and the
// caller gets the second answer.
func ExampleNew() {
	var n int
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n++; n == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, `{"city":"Lisbon","tempC":21}`)
	}))
	defer api.Close()
	host := strings.TrimPrefix(api.URL, "http://")

	cfg, err := httpmw.ParseConfig([]byte(`
hosts:
  "` + host + `":
    routes:
      "GET /v1/current/{city}":
        retry: { maxAttempts: 3, initialBackoff: 10ms }
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	chain, err := httpmw.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer chain.Close()
	client := &http.Client{Transport: chain.RoundTripper(http.DefaultTransport)}

	resp, err := client.Get(api.URL + "/v1/current/lisbon")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", n, "requests")
	// Output: 200 {"city":"Lisbon","tempC":21} after 2 requests
}

// A request the breaker refuses is an error that matches the breaker's
// sentinel and names its reason; no request is sent.
func ExampleRejectionReason() {
	cfg, err := httpmw.ParseConfig([]byte(`
defaults:
  circuitBreaker: { mode: FORCED_OPEN }
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	chain, err := httpmw.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer chain.Close()
	_, err = chain.Client(nil).Get("http://api.weather.example/v1/current/lisbon")
	fmt.Println(errors.Is(err, circuitbreaker.ErrOpen), httpmw.RejectionReason(err))
	// Output: true CIRCUIT_OPEN
}

// A server that allows one request per hour answers the second with 429,
// Retry-After, the reason header and problem details, without running its
// handler.
func ExampleNewServer() {
	cfg, err := httpmw.ParseConfig([]byte(`
defaults:
  rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h }
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	srv, err := httpmw.NewServer(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "served")
	})))
	defer ts.Close()
	for range 2 {
		resp, err := http.Get(ts.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s %q %q\n", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Retry-After"), resp.Header.Get(httpmw.ReasonHeader))
		if resp.StatusCode == http.StatusOK {
			fmt.Println(string(body))
			continue
		}
		var problem struct{ Title, Reason string }
		if err := json.Unmarshal(body, &problem); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(problem.Title, problem.Reason)
	}
	// Output:
	// 200 text/plain; charset=utf-8 "" ""
	// served
	// 429 application/problem+json "1" "RATE_LIMITED"
	// Too Many Requests RATE_LIMITED
}
