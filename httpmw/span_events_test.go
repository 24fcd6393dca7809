package httpmw_test

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/meshless/meshless/httpmw"
	"github.com/meshless/meshless/otelmw"
)

// An HTTP call's meshless.retry and meshless.hedge span events named the
// error that caused them by its Go type, "*httpmw.statusError" — an
// internal type, the same for a 503 as for a 521 — where the call's own
// error.type is the status ("503"), as OpenTelemetry's HTTP conventions say.
// They now name it as the call's metric does, with
// http.response.status_code, and carry no gRPC rpc.response.status_code;
// a status outside 100–599 is _OTHER, as in the metric.
func TestHTTPSpanEventsNameTheStatus(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		statuses   []int
		event      string
		want       []string // error.type of each event, in order
	}{
		{"retry", `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { minimumNumberOfCalls: 100 }
hosts:
  "{{host}}":
    retry: { maxAttempts: 4, initialBackoff: 1ms, maxBackoff: 1ms, retryableStatusCodes: [500, 503] }
`, []int{503, 521, 999, 200}, "meshless.retry", []string{"503", "521", "_OTHER"}},
		{"hedge", `
retryThrottling: { enabled: false }
defaults:
  adaptiveThrottling: { enabled: false }
  circuitBreaker: { minimumNumberOfCalls: 100 }
hosts:
  "{{host}}":
    hedging: { maxAttempts: 3, hedgingDelay: 1h, nonFatalStatusCodes: [500, 503] }
`, []int{503, 521, 200}, "meshless.hedge", []string{"503", "521"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := script(tc.statuses...)
			b := newBackend(t, h)
			obs, err := otelmw.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			defer obs.Close() //nolint:errcheck
			chain := newChain(t, tc.yaml, b.host, httpmw.WithObserver(obs))
			tr, _ := newTransport(t)
			client := chain.Client(tr)
			sr := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
			defer tp.Shutdown(context.Background()) //nolint:errcheck
			ctx, span := tp.Tracer("test").Start(context.Background(), "call")
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.URL+"/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			status, _, err := do(t, client, req)
			span.End()
			if err != nil || status != 200 {
				t.Fatalf("got %d, %v; want 200", status, err)
			}
			var got []string
			for _, s := range sr.Ended() {
				for _, e := range s.Events() {
					if e.Name != tc.event {
						continue
					}
					set := attribute.NewSet(e.Attributes...)
					et, _ := set.Value("error.type")
					got = append(got, et.Emit())
					if v, ok := set.Value("rpc.response.status_code"); ok {
						t.Errorf("%s: rpc.response.status_code %q on an HTTP call", e.Name, v.Emit())
					}
					sc, ok := set.Value("http.response.status_code")
					if want := et.AsString(); want == "_OTHER" {
						if ok {
							t.Errorf("%s: http.response.status_code %d for a status outside 100-599", e.Name, sc.AsInt64())
						}
					} else if !ok || sc.Emit() != want {
						t.Errorf("%s: http.response.status_code %q, want %s", e.Name, sc.Emit(), want)
					}
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%s events' error.type %q, want %q", tc.event, got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("%s events' error.type %q, want %q", tc.event, got, tc.want)
					break
				}
			}
		})
	}
}
