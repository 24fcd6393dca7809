package otelmw_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/otelmw"
	"github.com/meshless/meshless/resilience"
)

func errorTypesOf(t *testing.T, m metricdata.Metrics) map[string]bool {
	out := map[string]bool{}
	for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
		v, _ := dp.Attributes.Value(attribute.Key("error.type"))
		out[v.AsString()] = true
	}
	return out
}

// A server that answers with unknown gRPC codes (CODE_17..CODE_48 as a
// sender other than grpcmw, which writes _OTHER, may name them) does not fill the method's 32 error.type values: they
// are _OTHER, and a real UNAVAILABLE afterwards keeps its own (before, it
// was recorded as _OTHER).
func TestWireCodesDoNotEvictKnownErrorTypes(t *testing.T) {
	obs, r := newObserver(t)
	rec := obs.Attach(resilience.Source{Kind: resilience.KindCall, Name: "pkg.Svc/M"})
	bg := context.Background()
	for c := 17; c < 17+32; c++ {
		rec.Record(bg, resilience.Event{Type: resilience.EventCall, Err: errors.New("x"), ErrorType: "CODE_" + strconv.Itoa(c)})
	}
	rec.Record(bg, resilience.Event{Type: resilience.EventCall, Err: errors.New("x"), ErrorType: "UNAVAILABLE"})
	if got := errorTypesOf(t, collect(t, r)["meshless.call.duration"]); !got["UNAVAILABLE"] {
		t.Errorf("UNAVAILABLE recorded as _OTHER after wire-chosen codes: %d error.type values", len(got))
	}
}

// An HTTP server answering with statuses 600..855, no HTTP statuses, does
// not fill a route's 256 sets: a real GET 503 afterwards keeps its method,
// status and error.type (before, it lost them).
func TestWireStatusesDoNotEvictKnownOnes(t *testing.T) {
	obs, r := newObserver(t)
	rec := obs.Attach(resilience.Source{Kind: resilience.KindCall, Scope: otelmw.HTTPScope, Name: "api.example/GET /x"})
	bg := context.Background()
	for s := 600; s < 600+256; s++ {
		rec.Record(httpCtx{bg, "GET", 0}, resilience.Event{Type: resilience.EventCall, Err: statusErr(s), ErrorType: strconv.Itoa(s)})
	}
	rec.Record(httpCtx{bg, "GET", 0}, resilience.Event{Type: resilience.EventCall, Err: statusErr(503), ErrorType: "503"})
	if got := errorTypesOf(t, collect(t, r)["meshless.call.duration"]); !got["503"] {
		t.Errorf("GET 503 recorded without status/error.type after wire-chosen statuses: %d error.type values", len(got))
	}
}

// The outlier listener records at most 1000 endpoint addresses as
// themselves, then _OTHER: every address the resolver ever returned kept
// its ejection series before.
func TestOutlierAddressesAreBounded(t *testing.T) {
	mp, r := newProvider(t)
	l, err := otelmw.NewOutlierListener(mp)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		addr := "10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256) + ":443"
		l.Ejected(addr, "consecutive_failures")
		l.Returned(addr)
	}
	n := len(collect(t, r)["meshless.outlier.ejections"].Data.(metricdata.Sum[int64]).DataPoints)
	if n > 1001 {
		t.Errorf("meshless.outlier.ejections has %d series (server.address unbounded)", n)
	}
}

type ifaceStatus interface{ Code() uint32 }
type oddErr struct{}

func (oddErr) Error() string           { return "odd" }
func (oddErr) GRPCStatus() ifaceStatus { return nil }

// An error whose GRPCStatus returns a nil interface panics in codeName
// (reflect: Method on nil interface value) on the retry span-event path.
func TestARetryEventWithANilInterfaceStatusDoesNotPanic(t *testing.T) {
	obs, _ := newObserver(t)
	rec := obs.Attach(resilience.Source{Kind: resilience.KindRetry, Name: "pkg.Svc/M"})
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("panic: %v", p)
		}
	}()
	spanEvents(t, func(ctx context.Context) {
		rec.Record(ctx, resilience.Event{Type: resilience.EventRetry, Attempt: 2, Err: oddErr{}})
	})
}

// Odd names: empty, 10 kB, invalid UTF-8 — no panic.
func TestOddNamesDoNotPanic(t *testing.T) {
	obs, r := newObserver(t)
	big := string(make([]byte, 10000))
	for _, n := range []string{"", "/", big, "\xff\xfe/\xff", "[::1]/GET /x", ":/", "a:b:c/ x"} {
		for _, k := range []resilience.Kind{resilience.KindCircuitBreaker, resilience.KindBulkhead, resilience.KindRetry, resilience.KindTimeout, resilience.KindCall, resilience.KindRateLimiter, resilience.KindHedging, resilience.KindThrottler} {
			rec := obs.Attach(resilience.Source{Kind: k, Name: n})
			rec.Record(context.Background(), resilience.Event{Type: resilience.EventCall, Err: errors.New("x")})
		}
		rec := obs.Attach(resilience.Source{Kind: resilience.KindCall, Scope: otelmw.HTTPScope, Name: n})
		rec.Record(httpCtx{context.Background(), big, 0}, resilience.Event{Type: resilience.EventCall, Err: statusErr(999), ErrorType: big})
	}
	_ = collect(t, r)
}

// A retry (or a hedge) after a code no gRPC code has, which a server may
// send (grpc-status: 17 … 4294967295), names it in the span event as
// meshless.call.duration does: error.type _OTHER, without
// rpc.response.status_code. Before, both were CODE_<n>, one value per number
// the server chose.
func TestWireCodesInSpanEventsAreBounded(t *testing.T) {
	obs, _ := newObserver(t)
	for _, c := range []codes.Code{17, 4242, 1<<32 - 1} {
		events := spanEvents(t, func(ctx context.Context) {
			rec := obs.Attach(resilience.Source{Kind: resilience.KindRetry, Name: "pkg.Svc/Get"})
			err := fmt.Errorf("attempt 1: %w", status.Error(c, "odd"))
			rec.Record(ctx, resilience.Event{Type: resilience.EventRetry, Attempt: 2, Backoff: time.Second, Err: err})
		})
		want := []string{"meshless.retry " + enc(
			attribute.Int("meshless.retry.attempt", 2),
			attribute.Float64("meshless.retry.backoff", 1),
			attribute.String("rpc.method", "pkg.Svc/Get"),
			attribute.String("error.type", "_OTHER"))}
		if fmt.Sprint(events) != fmt.Sprint(want) {
			t.Errorf("code %d: span events\n got %q\nwant %q", uint32(c), events, want)
		}
	}
}
