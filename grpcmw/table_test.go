package grpcmw

import (
	"fmt"
	"strings"
	"testing"

	_ "google.golang.org/grpc/interop/grpc_testing" // links TestService's descriptor

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// Issue 9 item 4: nothing from the wire grows the table. Invented method
// names share one fallback entry; before, each made an entry of its own
// until the bound, and past the bound calls ran without any policy.
func TestIssue9InventedMethodsShareTheFallback(t *testing.T) {
	obs := new(resiliencetest.Observer)
	c, err := New(&Config{Services: map[string]*Service{"grpc.testing.TestService": {}}}, WithObserver(obs), WithMaxMethods(3))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if m := c.lookup(fmt.Sprintf("/grpc.testing.TestService/Invented%d", i)); m == nil || m.name != "grpc.testing.TestService/_OTHER" {
			t.Fatalf("an invented method of a configured service got %+v, want the service's _OTHER entry", m)
		}
		if m := c.lookup(fmt.Sprintf("/invented.Svc%d/M", i)); m == nil || m.name != "_OTHER/_OTHER" {
			t.Fatalf("a method of an unknown service got %+v, want the defaults' _OTHER entry", m)
		}
		if m := c.lookup(fmt.Sprintf("garbage %d", i)); m == nil || m.name != "_OTHER/_OTHER" {
			t.Fatalf("a malformed name got %+v, want the defaults' _OTHER entry", m)
		}
	}
	if n := c.state.Load().methods.n; n != 2 {
		t.Fatalf("the table holds %d entries after 3000 invented names, want the 2 fallbacks", n)
	}
	// Real methods (linked descriptors) get their own entries up to the
	// bound, then the fallback: with policies either way.
	for _, name := range []string{"UnaryCall", "EmptyCall", "StreamingOutputCall"} {
		m := c.lookup("/grpc.testing.TestService/" + name)
		if m == nil || m.breaker == nil || m.bulkhead == nil {
			t.Fatalf("%s runs without policies: %+v", name, m)
		}
	}
	if m := c.lookup("/grpc.testing.TestService/StreamingOutputCall"); m.name != "grpc.testing.TestService/_OTHER" {
		t.Fatalf("a method past the bound got %q, want the service's fallback", m.name)
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

// Building the table is linear: 10,000 configured methods (quadratic copying
// made this take tens of seconds).
func TestIssue9TenThousandMethodsBuildInLinearTime(t *testing.T) {
	const n = 10000
	methods := make(map[string]*Policies, n)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("M%d", i)
		methods[names[i]] = &Policies{}
	}
	c, err := New(&Config{Services: map[string]*Service{"big.Service": {Methods: methods}}}, WithMaxMethods(n+10))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if m := c.lookup("/big.Service/" + name); m == nil || !strings.HasSuffix(m.name, name) {
			t.Fatalf("lookup %s = %+v", name, m)
		}
	}
	// Linear, counted rather than timed: the snapshots copied at most 2n
	// entries in all (a table rebuilt on every insert copies n²/2 = 50
	// million). BenchmarkBuildMethods shows the time per method.
	if copied := c.state.Load().methods.copied; copied > 2*n {
		t.Fatalf("building %d methods copied %d entries, want at most %d", n, copied, 2*n)
	}
	if c.state.Load().methods.n != n {
		t.Fatalf("table holds %d, want %d", c.state.Load().methods.n, n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range names {
		if _, ok := c.state.Load().methods.loadLocked("/big.Service/" + name); !ok {
			t.Fatalf("%s is not in the table", name)
		}
	}
}

// BenchmarkBuildMethods is the cost of a method's first call: building and
// storing its entry, in a chain that already holds b.N methods' worth.
func BenchmarkBuildMethods(b *testing.B) {
	methods := make(map[string]*Policies, b.N)
	names := make([]string, b.N)
	for i := range names {
		names[i] = fmt.Sprintf("/big.Service/M%d", i)
		methods[fmt.Sprintf("M%d", i)] = &Policies{}
	}
	c, err := New(&Config{Services: map[string]*Service{"big.Service": {Methods: methods}}}, WithMaxMethods(b.N+10))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		c.lookup(names[i])
	}
}
