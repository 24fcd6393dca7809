package otelmw_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/otelmw"
	"github.com/meshless/meshless/resilience"
)

func TestMethodsBeyondTheBoundAreOther(t *testing.T) {
	obs, reader := newObserver(t, otelmw.WithMaxMethodValues(2))
	ctx := context.Background()
	attempt := resilience.Event{Type: resilience.EventAttempt, Attempt: 1}
	for _, m := range []string{"pkg.Svc/A", "pkg.Svc/B", "pkg.Svc/C", "pkg.Svc/D"} {
		obs.Attach(resilience.Source{Kind: resilience.KindRetry, Name: m}).Record(ctx, attempt)
	}
	// A method seen before keeps its name when attached again (a reload),
	// and the bound is shared by every kind.
	obs.Attach(resilience.Source{Kind: resilience.KindRetry, Name: "pkg.Svc/A"}).Record(ctx, attempt)
	obs.Attach(resilience.Source{Kind: resilience.KindCall, Name: "pkg.Svc/E"}).
		Record(ctx, resilience.Event{Type: resilience.EventCall, Duration: time.Millisecond})
	obs.Attach(resilience.Source{Kind: resilience.KindCall, Name: "pkg.Svc/B"}).
		Record(ctx, resilience.Event{Type: resilience.EventCall, Duration: time.Millisecond})

	ms := collect(t, reader)
	sameValues(t, "meshless.retry.attempts", values(t, ms["meshless.retry.attempts"]), map[string]float64{
		enc(method("pkg.Svc/A")): 2,
		enc(method("pkg.Svc/B")): 1,
		enc(method("_OTHER")):    2,
	})
	grpc := attribute.String("rpc.system.name", "grpc")
	sameHists(t, "meshless.call.duration", hists(t, ms["meshless.call.duration"]), map[string][]float64{
		enc(grpc, method("_OTHER")):    {0.001},
		enc(grpc, method("pkg.Svc/B")): {0.001},
	})
}

func TestWithoutMethod(t *testing.T) {
	obs, reader := newObserver(t, otelmw.WithoutMethod())
	ctx := context.Background()
	for _, m := range []string{"pkg.Svc/A", "pkg.Svc/B"} {
		obs.Attach(resilience.Source{Kind: resilience.KindRetry, Name: m}).
			Record(ctx, resilience.Event{Type: resilience.EventRetryDone, Attempt: 1})
		obs.Attach(resilience.Source{Kind: resilience.KindTimeout, Name: m, Scope: "overall"}).
			Record(ctx, resilience.Event{Type: resilience.EventCall, TimedOut: true})
		obs.Attach(resilience.Source{Kind: resilience.KindCall, Name: m}).
			Record(ctx, resilience.Event{Type: resilience.EventCall, Duration: time.Millisecond, Err: errBoom, ErrorType: "UNAVAILABLE"})
	}
	ms := collect(t, reader)
	sameValues(t, "meshless.retry.calls", values(t, ms["meshless.retry.calls"]), map[string]float64{
		enc(attribute.String("meshless.retry.outcome", "success_without_retry")): 2,
	})
	sameValues(t, "meshless.timeout.calls", values(t, ms["meshless.timeout.calls"]), map[string]float64{
		enc(attribute.String("meshless.timeout.kind", "overall"), attribute.String("meshless.timeout.outcome", "timed_out")): 2,
	})
	sameHists(t, "meshless.call.duration", hists(t, ms["meshless.call.duration"]), map[string][]float64{
		enc(attribute.String("rpc.system.name", "grpc"), attribute.String("error.type", "UNAVAILABLE")): {0.001, 0.001},
	})
}

func TestErrorTypesAreBounded(t *testing.T) {
	obs, reader := newObserver(t)
	ctx := context.Background()
	rec := obs.Attach(resilience.Source{Kind: resilience.KindCall, Name: "m"})
	for i := range 40 {
		rec.Record(ctx, resilience.Event{Type: resilience.EventCall, Err: errBoom, ErrorType: "E" + strconv.Itoa(i)})
	}
	rec.Record(ctx, resilience.Event{Type: resilience.EventCall, Err: errBoom}) // unnamed: _OTHER
	rec.Record(ctx, resilience.Event{Type: resilience.EventCall, Err: errBoom, ErrorType: "E0"})
	got := hists(t, collect(t, reader)["meshless.call.duration"])
	if len(got) != 33 {
		t.Errorf("%d error.type series, want 32 and _OTHER", len(got))
	}
	base := []attribute.KeyValue{attribute.String("rpc.system.name", "grpc"), method("m")}
	if h := got[enc(append(base, attribute.String("error.type", "_OTHER"))...)]; h.Count != 40-32+1 {
		t.Errorf("_OTHER counted %d calls, want 9", h.Count)
	}
	if h := got[enc(append(base, attribute.String("error.type", "E0"))...)]; h.Count != 2 {
		t.Errorf("E0 counted %d calls, want 2", h.Count)
	}
}

func TestInvalidOption(t *testing.T) {
	mp, _ := newProvider(t)
	for _, n := range []int{0, -1} {
		if _, err := otelmw.New(mp, otelmw.WithMaxMethodValues(n)); !errors.Is(err, resilience.ErrInvalidOption) {
			t.Errorf("WithMaxMethodValues(%d): err %v, want ErrInvalidOption", n, err)
		}
	}
}

func TestCloseUnregistersTheCallback(t *testing.T) {
	mp, reader := newProvider(t)
	obs, err := otelmw.New(mp)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := circuitbreaker.New(circuitbreaker.WithName("payments"), circuitbreaker.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := collect(t, reader)["meshless.circuit_breaker.state"]; !ok {
		t.Fatal("no state observed before Close")
	}
	if err := obs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := obs.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_ = cb.Execute(context.Background(), func(context.Context) error { return nil })
	ms := collect(t, reader)
	for _, n := range []string{"meshless.circuit_breaker.state", "meshless.circuit_breaker.failure_ratio", "meshless.bulkhead.limit"} {
		if m, ok := ms[n]; ok {
			t.Errorf("%s observed after Close: %v", n, values(t, m))
		}
	}
	// Synchronous instruments keep counting.
	sameValues(t, "meshless.circuit_breaker.calls", values(t, ms["meshless.circuit_breaker.calls"]), map[string]float64{
		breakerCall("payments", "success", false): 1,
	})
	// A breaker attached after Close is not observed either.
	if _, err := circuitbreaker.New(circuitbreaker.WithName("late"), circuitbreaker.WithObserver(obs)); err != nil {
		t.Fatal(err)
	}
	if _, ok := collect(t, reader)["meshless.circuit_breaker.state"]; ok {
		t.Error("a breaker attached after Close is observed")
	}
}

func TestNilMeterProviderUsesTheGlobalOne(t *testing.T) {
	mp, reader := newProvider(t)
	prev := otel.GetMeterProvider()
	otel.SetMeterProvider(mp)
	t.Cleanup(func() { otel.SetMeterProvider(prev) })

	obs, err := otelmw.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	obs.Attach(resilience.Source{Kind: resilience.KindRetry, Name: "m"}).
		Record(context.Background(), resilience.Event{Type: resilience.EventAttempt, Attempt: 1})
	sameValues(t, "meshless.retry.attempts", values(t, collect(t, reader)["meshless.retry.attempts"]), map[string]float64{
		enc(method("m")): 1,
	})
}

// A breaker attached under the name of an earlier one replaces it for the
// observable instruments (grpcmw's Reload builds a new breaker per key):
// one series per state, never two observations of one set.
// Issue 9 item 10: instances that share a name (a client and a server, or
// two chains, with the same service) share its series and never hide each
// other: before, the later one replaced the earlier one's gauges. A released
// instance (Close) is no longer read.
func TestInstancesSharingANameAreSummedAndReleased(t *testing.T) {
	obs, reader := newObserver(t)
	var cbs []*circuitbreaker.Breaker
	for _, mode := range []circuitbreaker.Mode{circuitbreaker.ModeNormal, circuitbreaker.ModeForcedOpen} {
		cb, err := circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.Mode = mode })), circuitbreaker.WithName("payments"), circuitbreaker.WithObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		cbs = append(cbs, cb)
	}
	both := oneHot("payments", "closed")
	for k, v := range oneHot("payments", "forced_open") {
		both[k] += v
	}
	sameValues(t, "meshless.circuit_breaker.state", values(t, collect(t, reader)["meshless.circuit_breaker.state"]), both)
	cbs[0].Close()
	sameValues(t, "meshless.circuit_breaker.state", values(t, collect(t, reader)["meshless.circuit_breaker.state"]),
		oneHot("payments", "forced_open"))

	var bhs []*bulkhead.Bulkhead
	for _, n := range []int{3, 4} {
		bh, err := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = n })), bulkhead.WithName("payments"), bulkhead.WithObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		bhs = append(bhs, bh)
	}
	sameValues(t, "meshless.bulkhead.limit", values(t, collect(t, reader)["meshless.bulkhead.limit"]),
		map[string]float64{enc(bulkheadName("payments")): 7})
	bhs[1].Close()
	sameValues(t, "meshless.bulkhead.limit", values(t, collect(t, reader)["meshless.bulkhead.limit"]),
		map[string]float64{enc(bulkheadName("payments")): 3})
}

func TestOtherKindsAreNotRecorded(t *testing.T) {
	obs, _ := newObserver(t)
	if r := obs.Attach(resilience.Source{Kind: resilience.KindOther, Name: "hedge"}); r != nil {
		t.Errorf("Attach(KindOther) = %v, want nil", r)
	}
}

// TestAttachCreatesCounterSeriesAtZero: Prometheus's rate and increase
// ignore a series' first sample, so a counter series born at its first
// increment loses that increment (a breaker's first trip would read as no
// trip). Attach creates the series at 0.
func TestAttachCreatesCounterSeriesAtZero(t *testing.T) {
	obs, reader := newObserver(t)
	obs.Attach(resilience.Source{Kind: resilience.KindCircuitBreaker, Name: "payments", Snapshot: func() resilience.Snapshot { return resilience.Snapshot{} }})
	obs.Attach(resilience.Source{Kind: resilience.KindBulkhead, Name: "payments", Snapshot: func() resilience.Snapshot { return resilience.Snapshot{} }})
	obs.Attach(resilience.Source{Kind: resilience.KindRetry, Name: "pkg.Svc/Get"})
	obs.Attach(resilience.Source{Kind: resilience.KindTimeout, Name: "pkg.Svc/Get", Scope: "overall"})
	got := collect(t, reader)
	for name, want := range map[string]int{
		"meshless.circuit_breaker.calls":       7, // 3 outcomes x slow, and rejected
		"meshless.circuit_breaker.transitions": 4, // the automatic transitions
		"meshless.bulkhead.calls":              2,
		"meshless.bulkhead.call.active":        1,
		"meshless.retry.calls":                 4,
		"meshless.retry.attempts":              1,
		"meshless.timeout.calls":               2,
	} {
		vals := values(t, got[name])
		if len(vals) != want {
			t.Errorf("%s: %d series at attach, want %d: %v", name, len(vals), want, vals)
		}
		for k, v := range vals {
			if v != 0 {
				t.Errorf("%s{%s} = %v at attach, want 0", name, k, v)
			}
		}
	}
	key := enc(
		attribute.String("meshless.circuit_breaker.name", "payments"),
		attribute.String("meshless.circuit_breaker.previous_state", "closed"),
		attribute.String("meshless.circuit_breaker.state", "open"))
	if _, ok := values(t, got["meshless.circuit_breaker.transitions"])[key]; !ok {
		t.Errorf("closed->open (%s) is not among the series created at zero: %v", key, values(t, got["meshless.circuit_breaker.transitions"]))
	}
}
