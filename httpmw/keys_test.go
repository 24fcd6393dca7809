package httpmw_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/meshless/meshless/httpmw"
)

// routesYAML gives each level a different number of attempts, so that the
// requests a server sees tell which settings a request ran with.
const routesYAML = `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { minimumNumberOfCalls: 100 }
  retry: { maxAttempts: 4, initialBackoff: 1ms, maxBackoff: 1ms }
hosts:
  "{{host}}":
    circuitBreaker: { keyBy: method }
    retry: { maxAttempts: 3 }
    routes:
      "GET /items/{id}":
        retry: { maxAttempts: 2 }
      "/static/":
        retry: { enabled: false }
`

// A request's settings are its route's, matched by net/http's own patterns
// (a wildcard, a subtree, a method: GET also matches HEAD), else its host's;
// a host the configuration does not name runs with the defaults.
func TestKeysFromTheRequest(t *testing.T) {
	h, _ := script(503)
	configured := newBackend(t, h)
	other := newBackend(t, h)
	chain := newChain(t, routesYAML, configured.host)
	tr, _ := newTransport(t)
	client := chain.Client(tr)
	for _, tc := range []struct {
		name, method, url string
		b                 *backend
		requests          int64
		breaker           string
	}{
		{"a wildcard route", http.MethodGet, configured.URL + "/items/42", configured, 2, configured.host + "/GET /items/{id}"},
		{"HEAD matches GET's pattern", http.MethodHead, configured.URL + "/items/7", configured, 2, configured.host + "/GET /items/{id}"},
		{"a subtree route", http.MethodGet, configured.URL + "/static/css/site.css", configured, 1, configured.host + "//static/"},
		{"another method: the host's entry", http.MethodDelete, configured.URL + "/items/42", configured, 3, configured.host + "/_OTHER"},
		{"no route: the host's entry", http.MethodGet, configured.URL + "/other", configured, 3, configured.host + "/_OTHER"},
		{"an unclean path: the route it cleans to", http.MethodGet, configured.URL + "/items//9", configured, 2, configured.host + "/GET /items/{id}"},
		{"an unknown host: the defaults", http.MethodGet, other.URL + "/items/42", other, 4, "_OTHER"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.b.requests.Load()
			status, _, err := do(t, client, newRequest(t, tc.method, tc.url, nil))
			if err != nil || status != 503 {
				t.Fatalf("got %d, %v; want the 503 response", status, err)
			}
			if got := tc.b.requests.Load() - before; got != tc.requests {
				t.Errorf("%d requests, want %d: the wrong settings", got, tc.requests)
			}
			if _, ok := chain.Breaker(tc.breaker); !ok {
				t.Errorf("no breaker %q", tc.breaker)
			}
		})
	}
}

// A host compares without case: the request's is lower-cased.
func TestAHostInUpperCase(t *testing.T) {
	chain := newChain(t, routesYAML, "api.example")
	client := &http.Client{Transport: chain.RoundTripper(rtFunc(ok))}
	if status, _, err := do(t, client, newRequest(t, http.MethodGet, "http://API.Example/items/1", nil)); err != nil || status != 200 {
		t.Fatalf("%d, %v", status, err)
	}
	if _, ok := chain.Breaker("api.example/GET /items/{id}"); !ok {
		t.Fatal("the request did not run with its route's settings")
	}
}

// rtFunc is an http.RoundTripper in a function.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func ok(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

// Names from outside create nothing: a thousand hosts the configuration
// does not name share one entry, a thousand paths under one route share
// the route's, a thousand unmatched paths share their host's.
func TestNothingGrowsWithNamesFromOutside(t *testing.T) {
	chain := newChain(t, routesYAML, "api.example")
	client := &http.Client{Transport: chain.RoundTripper(rtFunc(ok))}
	for i := range 1000 {
		for _, url := range []string{
			fmt.Sprintf("http://h%d.example/items/%d", i, i),
			fmt.Sprintf("http://api.example/items/%d", i),
			fmt.Sprintf("http://api.example/p%d", i),
			fmt.Sprintf("http://API.example:%d/x", 1000+i),
		} {
			if status, _, err := do(t, client, newRequest(t, http.MethodGet, url, nil)); err != nil || status != 200 {
				t.Fatalf("%s: %d, %v", url, status, err)
			}
		}
	}
	// The unknown hosts' entry, the route's, the host's own.
	if n := chain.Keys(); n != 3 {
		t.Fatalf("the chain holds %d entries, want 3", n)
	}
	if _, ok := chain.Breaker(httpmw.OtherRoute); !ok {
		t.Error("no breaker for the unknown hosts")
	}
}

// A request without a URL reaches the transport, which refuses it; the
// chain does not panic on it, whatever its Host.
func TestARequestWithoutAURL(t *testing.T) {
	chain := newChain(t, routesYAML, "api.example")
	rt := chain.RoundTripper(rtFunc(func(r *http.Request) (*http.Response, error) {
		return http.DefaultTransport.RoundTrip(r)
	}))
	req := &http.Request{Method: http.MethodGet, Host: "api.example", Header: http.Header{}}
	req = req.WithContext(t.Context())
	if resp, err := rt.RoundTrip(req); err == nil {
		resp.Body.Close()
		t.Fatal("a request without a URL went through")
	}
}
