package httpmw

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

type okNext struct{}

func (okNext) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("x")), Request: r}, nil
}

// Reload stores the engine's new configuration, then the router built from
// it: a request in between matches with the old router and resolves its
// settings from the new configuration. A route the new configuration
// removed was then built anew, under its own key, in the new
// configuration's table: with keyBy: method, a breaker (and its gauges) for
// a route no configuration in force names, until the next reload. The
// route's names now read the configuration they are given, so such a
// request runs on its host's own entry, as the new router would send it.
func TestARequestBetweenTheEngineAndTheRouterOfAReloadTakesTheNewEntry(t *testing.T) {
	const route = "hosts:\n  api.test:\n    circuitBreaker: { keyBy: method }\n    routes:\n      \"GET /v1/\": {}\n"
	const without = "hosts:\n  api.test:\n    circuitBreaker: { keyBy: method }\n"
	cfg, err := ParseConfig([]byte(route))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	next, err := ParseConfig([]byte(without))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.e.Reload(next); err != nil { // the router is still the old one
		t.Fatal(err)
	}
	resp, err := c.Client(okNext{}).Get("http://api.test/v1/x")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if _, ok := c.Breaker("api.test/GET /v1/"); ok {
		t.Errorf("a request in the reload's window built a breaker for the route the new configuration removed")
	}
	if _, ok := c.Breaker("api.test/_OTHER"); !ok {
		t.Errorf("the request did not run on its host's own entry")
	}
}
