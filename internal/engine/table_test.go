package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/meshless/meshless/config"
)

// Building the table is linear: 10,000 configured methods (quadratic copying
// made this take tens of seconds).
func TestIssue9TenThousandMethodsBuildInLinearTime(t *testing.T) {
	const n = 10000
	methods := make(map[string]*config.Policies, n)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("M%d", i)
		methods[names[i]] = &config.Policies{}
	}
	c, err := New(&config.Config{Services: map[string]*config.Service{"big.Service": {Methods: methods}}}, fakeTransport{}, Options{MaxKeys: n + 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if m := lookup(c, "/big.Service/"+name); m == nil || !strings.HasSuffix(m.Name(), name) {
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
	methods := make(map[string]*config.Policies, b.N)
	names := make([]string, b.N)
	for i := range names {
		names[i] = fmt.Sprintf("/big.Service/M%d", i)
		methods[fmt.Sprintf("M%d", i)] = &config.Policies{}
	}
	c, err := New(&config.Config{Services: map[string]*config.Service{"big.Service": {Methods: methods}}}, fakeTransport{}, Options{MaxKeys: b.N + 10})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		lookup(c, names[i])
	}
}

// Issue 24 item 3: with fewer than 16 methods, their entries stayed pending
// and every call took the engine's lock. A method that keeps being called
// is folded into the lock-free snapshot.
func TestAFewMethodsAreReadWithoutTheLock(t *testing.T) {
	e, err := New(nil, fakeTransport{}, Options{MaxKeys: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	keys := []string{"/a.B/One", "/a.B/Two", "/a.B/Three"}
	for _, k := range keys {
		lookup(e, k)
	}
	for range 10 {
		for _, k := range keys {
			lookup(e, k)
		}
	}
	for _, k := range keys {
		if _, ok := e.state.Load().methods.load(k); !ok {
			t.Errorf("%s is still only in the pending map: every call takes the lock", k)
		}
	}
	if n := testing.AllocsPerRun(100, func() { lookup(e, keys[2]) }); n != 0 {
		t.Errorf("a lookup allocates %v times", n)
	}
}
