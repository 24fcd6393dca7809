package grpcmw

import (
	"fmt"
	"testing"

	_ "google.golang.org/grpc/interop/grpc_testing" // links TestService's descriptor

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// Issue 9 item 4: nothing from the wire grows the table. Invented method
// names share one fallback entry; before, each made an entry of its own
// until the bound, and past the bound calls ran without any policy.
func TestIssue9InventedMethodsShareTheFallback(t *testing.T) {
	obs := new(resiliencetest.Observer)
	c, err := New(&Config{Services: map[string]*config.Service{"grpc.testing.TestService": {}}}, WithObserver(obs), WithMaxMethods(3))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if m := c.lookup(fmt.Sprintf("/grpc.testing.TestService/Invented%d", i), nil); m == nil || m.Name() != "grpc.testing.TestService/_OTHER" {
			t.Fatalf("an invented method of a configured service got %+v, want the service's _OTHER entry", m)
		}
		if m := c.lookup(fmt.Sprintf("/invented.Svc%d/M", i), nil); m == nil || m.Name() != "_OTHER/_OTHER" {
			t.Fatalf("a method of an unknown service got %+v, want the defaults' _OTHER entry", m)
		}
		if m := c.lookup(fmt.Sprintf("garbage %d", i), nil); m == nil || m.Name() != "_OTHER/_OTHER" {
			t.Fatalf("a malformed name got %+v, want the defaults' _OTHER entry", m)
		}
	}
	if n := c.e.Keys(); n != 2 {
		t.Fatalf("the table holds %d entries after 3000 invented names, want the 2 fallbacks", n)
	}
	// Real methods (linked descriptors) get their own entries up to the
	// bound, then the fallback: with policies either way.
	for _, name := range []string{"UnaryCall", "EmptyCall", "StreamingOutputCall"} {
		m := c.lookup("/grpc.testing.TestService/"+name, nil)
		if m == nil || m.Breaker() == nil || m.Bulkhead() == nil {
			t.Fatalf("%s runs without policies: %+v", name, m)
		}
	}
	if m := c.lookup("/grpc.testing.TestService/StreamingOutputCall", nil); m.Name() != "grpc.testing.TestService/_OTHER" {
		t.Fatalf("a method past the bound got %q, want the service's fallback", m.Name())
	}
	var calls []string
	for _, s := range obs.Sources() {
		if s.Kind == resilience.KindCall {
			calls = append(calls, s.Name)
		}
	}
	if len(calls) != 3 {
		t.Fatalf("metric series (call sources) %v, want the 2 fallbacks and 1 real method", calls)
	}
}
