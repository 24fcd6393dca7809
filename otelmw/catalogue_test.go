package otelmw_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/timeout"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var errBoom = errors.New("boom")

// The catalogue as implemented: name → unit and data shape.
var catalogue = map[string]struct {
	unit, shape string
}{
	"meshless.circuit_breaker.state":           {"{circuit_breaker}", "updowncounter"},
	"meshless.circuit_breaker.transitions":     {"{transition}", "counter"},
	"meshless.circuit_breaker.calls":           {"{call}", "counter"},
	"meshless.circuit_breaker.failure_ratio":   {"1", "gauge"},
	"meshless.circuit_breaker.slow_call_ratio": {"1", "gauge"},
	"meshless.retry.calls":                     {"{call}", "counter"},
	"meshless.retry.attempts":                  {"{attempt}", "counter"},
	"meshless.bulkhead.call.active":            {"{call}", "updowncounter"},
	"meshless.bulkhead.limit":                  {"{call}", "updowncounter"},
	"meshless.bulkhead.calls":                  {"{call}", "counter"},
	"meshless.bulkhead.wait.duration":          {"s", "histogram"},
	"meshless.timeout.calls":                   {"{call}", "counter"},
	"meshless.call.duration":                   {"s", "histogram"},
}

func shape(m metricdata.Metrics) string {
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		if d.Temporality != metricdata.CumulativeTemporality {
			return "non-cumulative sum"
		}
		if d.IsMonotonic {
			return "counter"
		}
		return "updowncounter"
	case metricdata.Gauge[float64]:
		return "gauge"
	case metricdata.Histogram[float64]:
		if d.Temporality != metricdata.CumulativeTemporality {
			return "non-cumulative histogram"
		}
		return "histogram"
	}
	return fmt.Sprintf("unexpected %T", m.Data)
}

// Attribute helpers, spelled as docs/metrics.md spells the keys.
func breakerName(n string) attribute.KeyValue {
	return attribute.String("meshless.circuit_breaker.name", n)
}
func bulkheadName(n string) attribute.KeyValue { return attribute.String("meshless.bulkhead.name", n) }
func method(m string) attribute.KeyValue       { return attribute.String("rpc.method", m) }

func breakerCall(name, outcome string, slow bool) string {
	return enc(breakerName(name), attribute.String("meshless.circuit_breaker.outcome", outcome),
		attribute.Bool("meshless.circuit_breaker.slow", slow))
}

func transition(name, from, to string) string {
	return enc(breakerName(name), attribute.String("meshless.circuit_breaker.previous_state", from),
		attribute.String("meshless.circuit_breaker.state", to))
}

func state(name, s string) string {
	return enc(breakerName(name), attribute.String("meshless.circuit_breaker.state", s))
}

var stateValues = []string{"closed", "open", "half_open", "disabled", "forced_open", "metrics_only"}

// oneHot returns the expected state series of a breaker in state cur.
func oneHot(name, cur string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range stateValues {
		v := 0.0
		if s == cur {
			v = 1
		}
		out[state(name, s)] = v
	}
	return out
}

// checkOneHot asserts that every breaker has one series per state value,
// summing to 1.
func checkOneHot(t *testing.T, got map[string]float64, breakers ...string) {
	t.Helper()
	for _, b := range breakers {
		sum := 0.0
		for _, s := range stateValues {
			v, ok := got[state(b, s)]
			if !ok {
				t.Errorf("breaker %s: no series for state %s", b, s)
			}
			sum += v
		}
		if sum != 1 {
			t.Errorf("breaker %s: the one-hot state sums to %v, want 1", b, sum)
		}
	}
}

// The whole catalogue after a scripted scenario through real policies:
// every metric has exactly the expected data points and values.
func TestCatalogueAfterAScriptedScenario(t *testing.T) {
	obs, reader := newObserver(t)
	ctx := context.Background()
	clk := resiliencetest.NewClock(t0)

	// --- Circuit breakers --------------------------------------------
	payments, err := circuitbreaker.New(
		circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
			c.SlidingWindowSize = 4
			c.MinimumNumberOfCalls = 4
			c.FailureRateThreshold = 50
			c.SlowCallDurationThreshold = time.Second
			c.WaitDurationInOpenState = 10 * time.Second
			c.PermittedNumberOfCallsInHalfOpenState = 1
		})), circuitbreaker.WithName("payments"),
		circuitbreaker.WithClock(clk),
		circuitbreaker.WithObserver(obs),
	)
	if err != nil {
		t.Fatal(err)
	}
	inventory, err := circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) { c.Mode = circuitbreaker.ModeForcedOpen })), circuitbreaker.WithName("inventory"), circuitbreaker.WithClock(clk),
		circuitbreaker.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	// shipping stays closed, with enough calls for its ratios.
	shipping, err := circuitbreaker.New(circuitbreaker.WithConfig(breakerConf(func(c *circuitbreaker.Config) {
		c.SlidingWindowSize = 4
		c.MinimumNumberOfCalls = 2
		c.SlowCallDurationThreshold = time.Second
	})), circuitbreaker.WithName("shipping"), circuitbreaker.WithClock(clk),
		circuitbreaker.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	callOn := func(cb *circuitbreaker.Breaker, took time.Duration, err error) {
		t.Helper()
		ran := false
		_ = cb.Execute(ctx, func(context.Context) error { ran = true; clk.Advance(took); return err })
		if !ran {
			t.Fatal("Execute did not run the call")
		}
	}
	call := func(took time.Duration, err error) { t.Helper(); callOn(payments, took, err) }
	callOn(shipping, 0, nil)
	callOn(shipping, 2*time.Second, nil)
	call(0, nil)             // success
	call(2*time.Second, nil) // slow success
	call(0, errBoom)         // failure

	// Three calls of the four needed: no ratio yet.
	ms := collect(t, reader)
	for _, n := range []string{"meshless.circuit_breaker.failure_ratio", "meshless.circuit_breaker.slow_call_ratio"} {
		if m, ok := ms[n]; ok {
			if _, has := values(t, m)[enc(breakerName("payments"))]; has {
				t.Errorf("%s observed for payments below the minimum number of calls", n)
			}
		}
	}
	sameValues(t, "state (closed)", values(t, ms["meshless.circuit_breaker.state"]),
		merge(oneHot("payments", "closed"), oneHot("inventory", "forced_open"), oneHot("shipping", "closed")))

	call(0, errBoom) // 2 failures in 4: open
	if payments.State() != circuitbreaker.StateOpen {
		t.Fatalf("payments is %v, want OPEN", payments.State())
	}
	ms = collect(t, reader)
	sameValues(t, "state (open)", values(t, ms["meshless.circuit_breaker.state"]),
		merge(oneHot("payments", "open"), oneHot("inventory", "forced_open"), oneHot("shipping", "closed")))
	// While open, the rates that tripped it stay readable.
	sameValues(t, "failure_ratio (open)", values(t, ms["meshless.circuit_breaker.failure_ratio"]),
		map[string]float64{enc(breakerName("payments")): 0.5, enc(breakerName("shipping")): 0})
	sameValues(t, "slow_call_ratio (open)", values(t, ms["meshless.circuit_breaker.slow_call_ratio"]),
		map[string]float64{enc(breakerName("payments")): 0.25, enc(breakerName("shipping")): 0.5})

	for range 2 {
		if err := payments.Execute(ctx, func(context.Context) error { return nil }); !errors.Is(err, circuitbreaker.ErrOpen) {
			t.Fatalf("Execute while open = %v, want ErrOpen", err)
		}
	}
	if err := inventory.Execute(ctx, func(context.Context) error { return nil }); !errors.Is(err, circuitbreaker.ErrOpen) {
		t.Fatalf("Execute while forced open = %v, want ErrOpen", err)
	}
	clk.Advance(10 * time.Second) // half-open
	ms = collect(t, reader)
	sameValues(t, "state (half-open)", values(t, ms["meshless.circuit_breaker.state"]),
		merge(oneHot("payments", "half_open"), oneHot("inventory", "forced_open"), oneHot("shipping", "closed")))
	// No probe has reported: no ratio for payments.
	sameValues(t, "failure_ratio (half-open)", values(t, ms["meshless.circuit_breaker.failure_ratio"]),
		map[string]float64{enc(breakerName("shipping")): 0})
	call(0, nil) // the probe succeeds: closed
	if payments.State() != circuitbreaker.StateClosed {
		t.Fatalf("payments is %v, want CLOSED", payments.State())
	}

	// --- Retry --------------------------------------------------------
	const get = "pkg.Svc/Get"
	// Backoffs wait on the bubble's fake time.
	synctest.Test(t, func(t *testing.T) {
		r, err := retry.New(retry.WithConfig(retryConf(func(c *retry.Config) {
			c.MaxAttempts = 3
			c.InitialBackoff = 100 * time.Millisecond
			c.Jitter = 0
		})), retry.WithName(get), retry.WithObserver(obs), retry.WithClock(resilience.SystemClock()))
		if err != nil {
			t.Fatal(err)
		}
		retried := func(errs ...error) {
			n := 0
			_ = r.Execute(ctx, func(context.Context) error {
				n++
				if n <= len(errs) {
					return errs[n-1]
				}
				return nil
			})
		}
		retried(errBoom)                   // success_with_retry, 2 attempts
		retried()                          // success_without_retry, 1 attempt
		retried(context.Canceled)          // failed_without_retry (not retryable), 1 attempt
		retried(errBoom, errBoom, errBoom) // failed_with_retry, 3 attempts
	})

	// --- Bulkheads ----------------------------------------------------
	shop, err := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 1 })), bulkhead.WithName("shop"),
		bulkhead.WithClock(clk), bulkhead.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	p1, err := enter(ctx, shop)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enter(ctx, shop); !errors.Is(err, bulkhead.ErrFull) {
		t.Fatalf("second Enter = %v, want ErrFull", err)
	}
	p1.Release()
	held, err := enter(ctx, shop) // still active at collection time
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()

	// A bulkhead that queues, in a bubble whose time the waits are measured
	// in.
	synctest.Test(t, func(t *testing.T) {
		q, err := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) {
			c.MaxConcurrentCalls = 1
			c.MaxWaitDuration = 100 * time.Millisecond
		})), bulkhead.WithName("queue"), bulkhead.WithClock(resilience.SystemClock()),
			bulkhead.WithObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		p, err := enter(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		waited := make(chan error)
		go func() {
			p, err := enter(ctx, q) // waits 30ms for p
			p.Release()
			waited <- err
		}()
		time.Sleep(30 * time.Millisecond)
		p.Release()
		if err := <-waited; err != nil {
			t.Fatalf("waiting Enter = %v", err)
		}
		p, err = enter(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := enter(ctx, q) // waits its 100ms in vain
			waited <- err
		}()
		if err := <-waited; !errors.Is(err, bulkhead.ErrFull) {
			t.Fatalf("Enter after the wait = %v, want ErrFull", err)
		}
		p.Release()
	})

	// --- Timeouts -----------------------------------------------------
	synctest.Test(t, func(t *testing.T) {
		perAttempt, err := timeout.New(50*time.Millisecond, timeout.WithName(get), timeout.WithObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		overall, err := timeout.New(time.Second, timeout.WithScope(timeout.Overall), timeout.WithName(get),
			timeout.WithObserver(obs))
		if err != nil {
			t.Fatal(err)
		}
		if err := perAttempt.Execute(ctx, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		err = perAttempt.Execute(ctx, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		if !errors.Is(err, timeout.ErrTimeout) {
			t.Fatalf("Execute = %v, want a timeout", err)
		}
		if err := overall.Execute(ctx, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
	})

	// --- Logical calls (as grpcmw reports them) ------------------------
	calls := obs.Attach(resilience.Source{Kind: resilience.KindCall, Name: get})
	for _, e := range []resilience.Event{
		{Type: resilience.EventCall, Duration: 30 * time.Millisecond},
		{Type: resilience.EventCall, Duration: 40 * time.Millisecond},
		{Type: resilience.EventCall, Duration: 2 * time.Second, Err: errBoom, ErrorType: "UNAVAILABLE"},
		{Type: resilience.EventCall, Duration: time.Millisecond, Err: errBoom, ErrorType: "circuit_open"},
	} {
		calls.Record(ctx, e)
	}

	// --- Everything ---------------------------------------------------
	ms = collect(t, reader)
	if got, want := slices.Sorted(maps.Keys(ms)), slices.Sorted(maps.Keys(catalogue)); !slices.Equal(got, want) {
		t.Fatalf("metrics %v, want the catalogue %v", got, want)
	}
	for name, c := range catalogue {
		m := ms[name]
		if m.Unit != c.unit || shape(m) != c.shape || m.Description == "" {
			t.Errorf("%s: unit %q, %s, description %q; want unit %q, %s, a description", name, m.Unit, shape(m), m.Description, c.unit, c.shape)
		}
	}

	st := values(t, ms["meshless.circuit_breaker.state"])
	sameValues(t, "meshless.circuit_breaker.state", st,
		merge(oneHot("payments", "closed"), oneHot("inventory", "forced_open"), oneHot("shipping", "closed")))
	checkOneHot(t, st, "payments", "inventory", "shipping")
	sameValues(t, "meshless.circuit_breaker.transitions", values(t, ms["meshless.circuit_breaker.transitions"]), map[string]float64{
		transition("payments", "closed", "open"):      1,
		transition("payments", "open", "half_open"):   1,
		transition("payments", "half_open", "closed"): 1,
	})
	sameValues(t, "meshless.circuit_breaker.calls", values(t, ms["meshless.circuit_breaker.calls"]), map[string]float64{
		breakerCall("payments", "success", false):   2, // the first call and the probe
		breakerCall("payments", "success", true):    1,
		breakerCall("payments", "failure", false):   2,
		breakerCall("payments", "rejected", false):  2,
		breakerCall("inventory", "rejected", false): 1,
		breakerCall("shipping", "success", false):   1,
		breakerCall("shipping", "success", true):    1,
	})
	// payments is closed again with an empty window, and a forced-open
	// breaker keeps no counts: only shipping has ratios.
	sameValues(t, "meshless.circuit_breaker.failure_ratio", values(t, ms["meshless.circuit_breaker.failure_ratio"]),
		map[string]float64{enc(breakerName("shipping")): 0})
	sameValues(t, "meshless.circuit_breaker.slow_call_ratio", values(t, ms["meshless.circuit_breaker.slow_call_ratio"]),
		map[string]float64{enc(breakerName("shipping")): 0.5})

	retryCall := func(outcome string) string {
		return enc(method(get), attribute.String("meshless.retry.outcome", outcome))
	}
	sameValues(t, "meshless.retry.calls", values(t, ms["meshless.retry.calls"]), map[string]float64{
		retryCall("success_with_retry"):    1,
		retryCall("success_without_retry"): 1,
		retryCall("failed_without_retry"):  1,
		retryCall("failed_with_retry"):     1,
	})
	sameValues(t, "meshless.retry.attempts", values(t, ms["meshless.retry.attempts"]), map[string]float64{
		enc(method(get)): 2 + 1 + 1 + 3,
	})

	bhCalls := func(name, outcome string) string {
		return enc(bulkheadName(name), attribute.String("meshless.bulkhead.outcome", outcome))
	}
	sameValues(t, "meshless.bulkhead.call.active", values(t, ms["meshless.bulkhead.call.active"]), map[string]float64{
		enc(bulkheadName("shop")): 1, enc(bulkheadName("queue")): 0,
	})
	sameValues(t, "meshless.bulkhead.limit", values(t, ms["meshless.bulkhead.limit"]), map[string]float64{
		enc(bulkheadName("shop")): 1, enc(bulkheadName("queue")): 1,
	})
	sameValues(t, "meshless.bulkhead.calls", values(t, ms["meshless.bulkhead.calls"]), map[string]float64{
		bhCalls("shop", "admitted"): 2, bhCalls("shop", "rejected"): 1,
		bhCalls("queue", "admitted"): 3, bhCalls("queue", "rejected"): 1,
	})
	// Every call of the bulkhead that may queue (zero waits included, so
	// the histogram's quantiles are those of all its calls), none of shop's.
	sameHists(t, "meshless.bulkhead.wait.duration", hists(t, ms["meshless.bulkhead.wait.duration"]), map[string][]float64{
		bhCalls("queue", "admitted"): {0, 0, 0.030},
		bhCalls("queue", "rejected"): {0.100},
	})

	to := func(kind, outcome string) string {
		return enc(method(get), attribute.String("meshless.timeout.kind", kind), attribute.String("meshless.timeout.outcome", outcome))
	}
	sameValues(t, "meshless.timeout.calls", values(t, ms["meshless.timeout.calls"]), map[string]float64{
		to("attempt", "completed"): 1,
		to("attempt", "timed_out"): 1,
		to("overall", "completed"): 1,
	})

	grpcCall := func(errorType string) string {
		kvs := []attribute.KeyValue{attribute.String("rpc.system.name", "grpc"), method(get)}
		if errorType != "" {
			kvs = append(kvs, attribute.String("error.type", errorType))
		}
		return enc(kvs...)
	}
	sameHists(t, "meshless.call.duration", hists(t, ms["meshless.call.duration"]), map[string][]float64{
		grpcCall(""):             {0.030, 0.040},
		grpcCall("UNAVAILABLE"):  {2},
		grpcCall("circuit_open"): {0.001},
	})
}

func merge(ms ...map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

// sameHists compares histogram points with the observations they should
// hold.
func sameHists(t *testing.T, name string, got map[string]hist, want map[string][]float64) {
	t.Helper()
	for k, obs := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s{%s}: missing", name, k)
			continue
		}
		sum := 0.0
		for _, v := range obs {
			sum += v
		}
		if g.Count != uint64(len(obs)) || !near(g.Sum, sum) || !slices.Equal(g.Counts, bucketCounts(obs...)) {
			t.Errorf("%s{%s} = count %d sum %v buckets %v; want count %d sum %v buckets %v",
				name, k, g.Count, g.Sum, g.Counts, len(obs), sum, bucketCounts(obs...))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s{%s}: unexpected data point, count %d", name, k, g.Count)
		}
	}
}
