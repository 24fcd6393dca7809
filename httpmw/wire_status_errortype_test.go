package httpmw_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A status outside 100–599 (HTTP/2 reads :status as any integer, and a
// RoundTripper may return anything) is error.type _OTHER on the call's
// event, one value whatever number the server sent, so that an observer
// labelling by ErrorType cannot be given a new value per number. Before, it
// was the number itself ("123456789"). A status below 100, which the breaker
// counts as a 500, is a failed call too (it was a success, error.type ""); a
// 3xx is still no error.
func TestAStatusOutsideHTTPsRangeIsOneErrorType(t *testing.T) {
	obs := new(resiliencetest.Observer)
	chain := newChain(t, "defaults: { retry: { enabled: false }, circuitBreaker: { enabled: false } }\n", "api.example", httpmw.WithObserver(obs))
	sent := []int{600, 999, 1000, 123456789, 503, 42, 0, -7, 302}
	for _, s := range sent {
		client := chain.Client(rtFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: s, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("x")), Request: r}, nil
		}))
		req, _ := http.NewRequest(http.MethodGet, "http://api.example/x", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("status %d: %v", s, err)
		}
		resp.Body.Close()
		if resp.StatusCode != s {
			t.Fatalf("got %d, want the server's %d as it came", resp.StatusCode, s)
		}
	}
	var types []string
	for _, r := range obs.Recorded() {
		if r.Source.Kind == resilience.KindCall {
			types = append(types, r.Event.ErrorType)
		}
	}
	if want := []string{"_OTHER", "_OTHER", "_OTHER", "_OTHER", "503", "_OTHER", "_OTHER", "_OTHER", ""}; !slices.Equal(types, want) {
		t.Fatalf("error types %q for statuses %v, want %q", types, sent, want)
	}
}
