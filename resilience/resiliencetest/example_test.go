package resiliencetest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// Timers on a fake clock fire inside Advance, in order, with the clock set
// to each timer's deadline.
func ExampleClock() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := resiliencetest.NewClock(start)
	clk.AfterFunc(2*time.Second, func() { fmt.Println("second timer at", clk.Since(start)) })
	clk.AfterFunc(time.Second, func() { fmt.Println("first timer at", clk.Since(start)) })
	clk.Advance(5 * time.Second)
	fmt.Println("now", clk.Since(start))
	// Output:
	// first timer at 1s
	// second timer at 2s
	// now 5s
}

// The observer keeps what policies report, for assertions.
func ExampleObserver() {
	var obs resiliencetest.Observer
	rec := obs.Attach(resilience.Source{Kind: resilience.KindCircuitBreaker, Name: "payments"})
	rec.Record(context.Background(), resilience.Event{Type: resilience.EventTransition, From: label("CLOSED"), To: label("OPEN")})
	for _, e := range obs.Events(resilience.EventTransition) {
		fmt.Println(e.From, "->", e.To)
	}
	// Output: CLOSED -> OPEN
}

// Trace lists what policies reported, in order.
func ExampleObserver_Trace() {
	var obs resiliencetest.Observer
	br := obs.Attach(resilience.Source{Kind: resilience.KindCircuitBreaker})
	to := obs.Attach(resilience.Source{Kind: resilience.KindTimeout, Scope: "attempt"})
	to.Record(context.Background(), resilience.Event{Type: resilience.EventCall})
	br.Record(context.Background(), resilience.Event{Type: resilience.EventCall})
	fmt.Println(obs.Trace())
	// Output: [timeout/attempt:call circuit_breaker:call]
}

// label stands in for a policy's own state type.
type label string

func (l label) String() string { return string(l) }
