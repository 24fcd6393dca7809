package otelmw_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sort"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/otelmw"
	"github.com/meshless/meshless/resilience"
)

// printSums prints the data points of otelmw's counters and up-down
// counters, sorted, skipping zeros.
func printSums(reader *sdkmetric.ManualReader) {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	var lines []string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, p := range sum.DataPoints {
					if p.Value != 0 {
						lines = append(lines, fmt.Sprintf("%s{%s} %d", m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value))
					}
				}
			}
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
}

// An Observer records a breaker's calls and its one-hot state. Here the
// SDK's ManualReader stands in for an exporter.
func Example() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	obs, err := otelmw.New(mp)
	if err != nil {
		log.Fatal(err)
	}
	defer obs.Close()

	cfg := circuitbreaker.DefaultConfig()
	cfg.SlidingWindowSize = 2
	cfg.MinimumNumberOfCalls = 2
	cb, err := circuitbreaker.New(circuitbreaker.WithConfig(cfg), circuitbreaker.WithName("payments"),
		circuitbreaker.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	_ = cb.Execute(ctx, func(context.Context) error { return nil })
	_ = cb.Execute(ctx, func(context.Context) error { return errors.New("unavailable") }) // 50%: open
	_ = cb.Execute(ctx, func(context.Context) error { return nil })                       // rejected

	printSums(reader)
	// Output:
	// meshless.circuit_breaker.calls{meshless.circuit_breaker.name=payments,meshless.circuit_breaker.outcome=failure,meshless.circuit_breaker.slow=false} 1
	// meshless.circuit_breaker.calls{meshless.circuit_breaker.name=payments,meshless.circuit_breaker.outcome=rejected,meshless.circuit_breaker.slow=false} 1
	// meshless.circuit_breaker.calls{meshless.circuit_breaker.name=payments,meshless.circuit_breaker.outcome=success,meshless.circuit_breaker.slow=false} 1
	// meshless.circuit_breaker.state{meshless.circuit_breaker.name=payments,meshless.circuit_breaker.state=open} 1
	// meshless.circuit_breaker.transitions{meshless.circuit_breaker.name=payments,meshless.circuit_breaker.previous_state=closed,meshless.circuit_breaker.state=open} 1
}

// One Observer for a whole gRPC client: every breaker, bulkhead, retry and
// timeout of the chain reports to it, and each call is one
// meshless.call.duration observation.
func Example_grpcmw() {
	obs, err := otelmw.New(nil) // the global MeterProvider
	if err != nil {
		log.Fatal(err)
	}
	defer obs.Close()
	chain, err := grpcmw.New(nil, grpcmw.WithObserver(obs)) // nil: every default
	if err != nil {
		log.Fatal(err)
	}
	_ = chain.DialOptions() // pass to grpc.NewClient
}

// Past the bound, methods are recorded as "_OTHER".
func ExampleWithMaxMethodValues() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	obs, err := otelmw.New(mp, otelmw.WithMaxMethodValues(2))
	if err != nil {
		log.Fatal(err)
	}
	defer obs.Close()
	for _, m := range []string{"shop.Cart/Add", "shop.Cart/Get", "shop.Cart/Remove", "shop.Cart/Clear"} {
		rec := obs.Attach(resilience.Source{Kind: resilience.KindRetry, Name: m}) // as a retry policy does
		rec.Record(context.Background(), resilience.Event{Type: resilience.EventAttempt, Attempt: 1})
	}
	printSums(reader)
	// Output:
	// meshless.retry.attempts{rpc.method=_OTHER} 2
	// meshless.retry.attempts{rpc.method=shop.Cart/Add} 1
	// meshless.retry.attempts{rpc.method=shop.Cart/Get} 1
}

// WithoutMethod drops rpc.method: one series per outcome for the client.
func ExampleWithoutMethod() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	obs, err := otelmw.New(mp, otelmw.WithoutMethod())
	if err != nil {
		log.Fatal(err)
	}
	defer obs.Close()
	for _, m := range []string{"shop.Cart/Add", "shop.Cart/Get"} {
		rec := obs.Attach(resilience.Source{Kind: resilience.KindTimeout, Name: m, Scope: "attempt"})
		rec.Record(context.Background(), resilience.Event{Type: resilience.EventCall})
	}
	printSums(reader)
	// Output:
	// meshless.timeout.calls{meshless.timeout.kind=attempt,meshless.timeout.outcome=completed} 2
}
