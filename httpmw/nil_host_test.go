package httpmw_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/httpmw"
)

// A host a Config built in Go writes with a nil entry is named, as YAML's
// "api.example:" (null) is: it gets its own breaker, keyed by the host.
// Before, a nil entry counted as unnamed, so the host's requests ran on the
// entry unknown hosts share (_OTHER): its failures opened the breaker of
// every host the configuration does not name.
func TestAGoBuiltNilHostIsNamed(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *httpmw.Config
	}{
		{"nil host", &httpmw.Config{Hosts: map[string]*config.Host{"api.example": nil}}},
		{"empty host", &httpmw.Config{Hosts: map[string]*config.Host{"api.example": {}}}},
		{"YAML null", mustParseHTTP(t, "hosts:\n  api.example:\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Defaults.Retry = &config.RetrySection{Enabled: config.Ptr(false)}
			tc.cfg.Defaults.CircuitBreaker = &config.CircuitBreakerSection{SlidingWindowSize: config.Ptr(4), MinimumNumberOfCalls: config.Ptr(4)}
			chain, err := httpmw.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer chain.Close()
			client := chain.Client(rtFunc(func(r *http.Request) (*http.Response, error) {
				status := http.StatusOK
				if r.URL.Host == "api.example" {
					status = http.StatusServiceUnavailable
				}
				return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("x")), Request: r}, nil
			}))
			get := func(url string) error {
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				resp, err := client.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				return err
			}
			for range 4 {
				_ = get("http://api.example/x")
			}
			cb, ok := chain.Breaker("api.example")
			if !ok || cb.State() != circuitbreaker.StateOpen {
				t.Fatalf("api.example's own breaker: %v, present %v; want OPEN after 4 503s", cb, ok)
			}
			if err := get("http://other.example/x"); err != nil {
				t.Fatalf("a host the configuration does not name was refused after api.example's failures: %v", err)
			}
		})
	}
}

func mustParseHTTP(t *testing.T, yaml string) *httpmw.Config {
	t.Helper()
	cfg, err := httpmw.ParseConfig([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
