package bench

// B13: an HTTP request through httpmw's RoundTripper on its defaults, beside
// failsafe-go's failsafehttp RoundTripper and hashicorp/go-retryablehttp's,
// on the same local server, in one run. Each peer has its own
// http.Transport, so that none reuses another's connections.

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"
	fscb "github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	fstimeout "github.com/failsafe-go/failsafe-go/timeout"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/meshless/meshless/httpmw"
)

// weatherServer answers every request at once with a small JSON body.
func weatherServer(tb testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"city":"lisbon","tempC":21}`) //nolint:errcheck
	}))
	tb.Cleanup(srv.Close)
	return srv
}

// newTransport is a transport of its own, closed with the benchmark.
func newTransport(tb testing.TB) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	tb.Cleanup(tr.CloseIdleConnections)
	return tr
}

// routeYAML names the server's host and a route, so that the request's
// route is matched (net/http's ServeMux) on every call.
const routeYAML = `
hosts:
  "{{host}}":
    routes:
      "GET /v1/current/{city}": {}
`

// oneTimeoutYAML is the defaults less the overall timeout: the per-attempt
// one alone, as failsafeOneTimeout has.
const oneTimeoutYAML = `
defaults:
  timeout: { overall: 0s }
`

func newHTTPChain(tb testing.TB, yaml string) *httpmw.Chain {
	cfg, err := httpmw.ParseConfig([]byte(yaml))
	if err != nil {
		tb.Fatal(err)
	}
	chain, err := httpmw.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(chain.Close)
	return chain
}

// failsafeDefaults is failsafehttp with the policies httpmw runs on its
// defaults, in httpmw's order: an overall timeout of 3s, retries
// (failsafehttp's HTTP retry policy: 3 attempts), a circuit breaker on 5xx
// (80 % of 100 calls), a bulkhead of 100, a timeout of 1s per attempt.
// httpmw's adaptive throttler has no failsafe-go twin here.
func failsafeDefaults(next http.RoundTripper) http.RoundTripper {
	overall := fstimeout.New[*http.Response](3 * time.Second)
	rp := failsafehttp.NewRetryPolicyBuilder().Build()
	bh := fsbulkhead.New[*http.Response](100)
	attempt := fstimeout.New[*http.Response](time.Second)
	return failsafehttp.NewRoundTripperWithExecutor(next, failsafe.With[*http.Response](overall, rp, failsafeBreaker(), bh, attempt))
}

// failsafeOneTimeout is failsafeDefaults with one timeout, per attempt,
// and no overall one.
func failsafeOneTimeout(next http.RoundTripper) http.RoundTripper {
	rp := failsafehttp.NewRetryPolicyBuilder().Build()
	bh := fsbulkhead.New[*http.Response](100)
	to := fstimeout.New[*http.Response](time.Second)
	return failsafehttp.NewRoundTripperWithExecutor(next, failsafe.With[*http.Response](rp, failsafeBreaker(), bh, to))
}

func failsafeBreaker() fscb.CircuitBreaker[*http.Response] {
	return fscb.NewBuilder[*http.Response]().
		HandleIf(func(r *http.Response, err error) bool { return err != nil || r.StatusCode >= 500 }).
		WithFailureThresholdRatio(80, 100).Build()
}

func retryableTransport(next http.RoundTripper) http.RoundTripper {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.HTTPClient = &http.Client{Transport: next}
	return &retryablehttp.RoundTripper{Client: c}
}

// benchGet sends GET url through client in a loop, reading each body whole.
func benchGet(b *testing.B, client *http.Client, url string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		b.Fatal(err)
	}
	get := func() {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	get() // connect
	b.ReportAllocs()
	for b.Loop() {
		get()
	}
}

// BenchmarkHTTPRoundTrip is B13: one GET over loopback TCP, bare and through
// each peer's RoundTripper. A peer's overhead per request is its ns/op less
// bare's.
func BenchmarkHTTPRoundTrip(b *testing.B) {
	srv := weatherServer(b)
	url := srv.URL + "/v1/current/lisbon"
	host := strings.TrimPrefix(srv.URL, "http://")
	b.Run("bare", func(b *testing.B) {
		benchGet(b, &http.Client{Transport: newTransport(b)}, url)
	})
	b.Run("meshless", func(b *testing.B) {
		benchGet(b, &http.Client{Transport: newHTTPChain(b, "").RoundTripper(newTransport(b))}, url)
	})
	b.Run("meshless-route", func(b *testing.B) {
		chain := newHTTPChain(b, strings.ReplaceAll(routeYAML, "{{host}}", host))
		benchGet(b, &http.Client{Transport: chain.RoundTripper(newTransport(b))}, url)
	})
	b.Run("meshless-one-timeout", func(b *testing.B) {
		benchGet(b, &http.Client{Transport: newHTTPChain(b, oneTimeoutYAML).RoundTripper(newTransport(b))}, url)
	})
	b.Run("failsafehttp", func(b *testing.B) {
		benchGet(b, &http.Client{Transport: failsafeDefaults(newTransport(b))}, url)
	})
	b.Run("failsafehttp-one-timeout", func(b *testing.B) {
		benchGet(b, &http.Client{Transport: failsafeOneTimeout(newTransport(b))}, url)
	})
	b.Run("failsafehttp-retry", func(b *testing.B) {
		rp := failsafehttp.NewRetryPolicyBuilder().Build()
		benchGet(b, &http.Client{Transport: failsafehttp.NewRoundTripper(newTransport(b), rp)}, url)
	})
	b.Run("retryablehttp", func(b *testing.B) {
		benchGet(b, &http.Client{Transport: retryableTransport(newTransport(b))}, url)
	})
}

// cannedTransport answers every request at once, in memory, with a fresh
// 200 response: what a RoundTripper costs by itself, without the network.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// BenchmarkHTTPRoundTripOverhead is B13 without the network: each peer's
// RoundTripper around an in-memory transport; bare is the transport alone.
func BenchmarkHTTPRoundTripOverhead(b *testing.B) {
	const url = "http://api.weather.example/v1/current/lisbon"
	next := cannedTransport{}
	run := func(b *testing.B, rt http.RoundTripper) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, next) })
	b.Run("meshless", func(b *testing.B) { run(b, newHTTPChain(b, "").RoundTripper(next)) })
	b.Run("meshless-route", func(b *testing.B) {
		run(b, newHTTPChain(b, strings.ReplaceAll(routeYAML, "{{host}}", "api.weather.example")).RoundTripper(next))
	})
	b.Run("meshless-one-timeout", func(b *testing.B) { run(b, newHTTPChain(b, oneTimeoutYAML).RoundTripper(next)) })
	b.Run("failsafehttp", func(b *testing.B) { run(b, failsafeDefaults(next)) })
	b.Run("failsafehttp-one-timeout", func(b *testing.B) { run(b, failsafeOneTimeout(next)) })
	b.Run("failsafehttp-retry", func(b *testing.B) {
		run(b, failsafehttp.NewRoundTripper(next, failsafehttp.NewRetryPolicyBuilder().Build()))
	})
	b.Run("retryablehttp", func(b *testing.B) { run(b, retryableTransport(next)) })
}
