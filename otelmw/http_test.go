package otelmw_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/meshless/meshless/otelmw"
	"github.com/meshless/meshless/resilience"
)

// httpCtx is a call's context as an HTTP client passes it.
type httpCtx struct {
	context.Context
	method string
	status int // of a call without error
}

func (c httpCtx) HTTPRequestMethod() string { return c.method }

func (c httpCtx) HTTPResponseStatusCode(err error) int {
	if se, ok := err.(statusErr); ok {
		return int(se)
	}
	if err != nil {
		return 0
	}
	return c.status
}

type statusErr int

func (e statusErr) Error() string { return "HTTP " + strconv.Itoa(int(e)) }

// An HTTP call (a KindCall source of scope "http") is recorded with
// OpenTelemetry's HTTP attributes: the method, the host and port, the
// route's pattern as url.template (its method left to
// http.request.method), the response's status, error.type on failure —
// and no rpc.* attribute.
func TestHTTPCallAttributes(t *testing.T) {
	obs, r := newObserver(t)
	route := obs.Attach(resilience.Source{Kind: resilience.KindCall, Scope: otelmw.HTTPScope, Name: "api.weather.example:8443/GET /v1/current/{city}"})
	host := obs.Attach(resilience.Source{Kind: resilience.KindCall, Scope: otelmw.HTTPScope, Name: "api.weather.example/_OTHER"})
	unknown := obs.Attach(resilience.Source{Kind: resilience.KindCall, Scope: otelmw.HTTPScope, Name: "_OTHER/_OTHER"})
	bg := context.Background()
	route.Record(httpCtx{bg, "GET", 200}, resilience.Event{Type: resilience.EventCall, Duration: 20 * time.Millisecond})
	route.Record(httpCtx{bg, "GET", 0}, resilience.Event{Type: resilience.EventCall, Duration: 30 * time.Millisecond, Err: statusErr(503), ErrorType: "503"})
	host.Record(httpCtx{bg, "PROPFIND", 0}, resilience.Event{Type: resilience.EventCall, Duration: time.Second, Err: errors.New("refused"), ErrorType: "connection_refused"})
	unknown.Record(httpCtx{bg, "DELETE", 204}, resilience.Event{Type: resilience.EventCall, Duration: time.Millisecond})
	unknown.Record(bg, resilience.Event{Type: resilience.EventCall, Duration: time.Millisecond}) // a context that says nothing

	routeAttrs := []attribute.KeyValue{attribute.String("server.address", "api.weather.example"), attribute.Int("server.port", 8443),
		attribute.String("url.template", "/v1/current/{city}"), attribute.String("http.request.method", "GET")}
	want := map[string]uint64{
		enc(append(routeAttrs, attribute.Int("http.response.status_code", 200))...):                                        1,
		enc(append(routeAttrs, attribute.Int("http.response.status_code", 503), attribute.String("error.type", "503"))...): 1,
		enc(attribute.String("server.address", "api.weather.example"), attribute.String("http.request.method", "_OTHER"),
			attribute.String("error.type", "connection_refused")): 1,
		enc(attribute.String("server.address", "_OTHER"), attribute.String("http.request.method", "DELETE"),
			attribute.Int("http.response.status_code", 204)): 1,
		enc(attribute.String("server.address", "_OTHER")): 1,
	}
	got := hists(t, collect(t, r)["meshless.call.duration"])
	for k, n := range want {
		if got[k].Count != n {
			t.Errorf("{%s}: %d calls, want %d", k, got[k].Count, n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d series, want %d: %v", len(got), len(want), got)
	}
}

// The attribute sets of one route are bounded, and recording allocates
// nothing once a set is built.
func TestHTTPCallSetsAreBoundedAndFree(t *testing.T) {
	obs, r := newObserver(t)
	rec := obs.Attach(resilience.Source{Kind: resilience.KindCall, Scope: otelmw.HTTPScope, Name: "h/GET /x"})
	bg := context.Background()
	for s := 100; s < 600; s++ {
		rec.Record(httpCtx{bg, "GET", 0}, resilience.Event{Type: resilience.EventCall, Err: statusErr(s), ErrorType: strconv.Itoa(s)})
	}
	if n := len(hists(t, collect(t, r)["meshless.call.duration"])); n > 257 {
		t.Errorf("%d series for one route, want at most 257", n)
	}
	var ctx context.Context = httpCtx{bg, "GET", 200}
	e := resilience.Event{Type: resilience.EventCall, Duration: time.Millisecond}
	rec.Record(ctx, e)
	if a := testing.AllocsPerRun(100, func() { rec.Record(ctx, e) }); a != 0 {
		t.Errorf("%v allocations per recorded call, want 0", a)
	}
}
