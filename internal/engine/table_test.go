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

// The hot cache in front of the snapshot returns each key's own entry:
// keys that share a slot (200 keys over 64 slots), a key whose string is
// built at run time (another address, the same name), and, after a reload,
// the new configuration's entries, never the old table's.
func TestTheHotCacheReturnsEachKeysOwnEntry(t *testing.T) {
	const n = 200
	methods := make(map[string]*config.Policies, n)
	keys := make([]string, n)
	for i := range keys {
		methods[fmt.Sprintf("M%d", i)] = &config.Policies{}
		keys[i] = fmt.Sprintf("/big.Service/M%d", i)
	}
	cfg := &config.Config{Services: map[string]*config.Service{"big.Service": {Methods: methods}}}
	e, err := New(cfg, fakeTransport{}, Options{MaxKeys: n + 10})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	slots := map[int]int{}
	for _, k := range keys {
		slots[hotIndex(k)]++
	}
	if len(slots) >= n {
		t.Fatalf("no two of %d keys share a slot: the test checks nothing", n)
	}
	check := func(t *testing.T, want map[string]*Method) {
		t.Helper()
		for round := range 3 {
			for i := range keys {
				k := keys[(i*7+round)%n]
				m := lookup(e, k)
				if m == nil || "/"+m.Name() != k {
					t.Fatalf("round %d: %s found %v", round, k, m)
				}
				if want[k] != nil && want[k] != m {
					t.Fatalf("round %d: %s found another entry than its first lookup", round, k)
				}
				if c := lookup(e, strings.Clone(k)); c != m {
					t.Fatalf("round %d: %s, as a string of its own, found %v, want %v", round, k, c, m)
				}
				want[k] = m
			}
		}
	}
	first := map[string]*Method{}
	t.Run("keys sharing slots", func(t *testing.T) { check(t, first) })
	t.Run("after a reload", func(t *testing.T) {
		if err := e.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		second := map[string]*Method{}
		check(t, second)
		for _, k := range keys {
			if first[k] == second[k] {
				t.Fatalf("%s: the reloaded table returned the old table's entry", k)
			}
		}
	})
}
