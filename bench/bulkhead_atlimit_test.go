package bench

import (
	"flag"
	"math"
	"testing"
)

// TestAtLimitBenchmarksCountAdmissions: each side of
// BenchmarkBulkheadAtLimitParallel reports how many of its calls were
// admitted and how many refused (per op, summing to 1) and the time per
// admitted call, so that a side that refuses more (a refusal is the cheaper
// of the two) cannot read faster by that alone (docs/benchmarks/
// bulkhead-ratelimiter.md, the admissions run).
func TestAtLimitBenchmarksCountAdmissions(t *testing.T) {
	bt := flag.Lookup("test.benchtime")
	old := bt.Value.String()
	if err := bt.Value.Set("20000x"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bt.Value.Set(old) })
	for _, c := range []struct {
		name string
		f    func(bool) func(*testing.B)
	}{{"meshless-execute", atLimitMeshless}, {"failsafe-direct", atLimitFailsafe}} {
		for _, hold := range []bool{false, true} {
			r := testing.Benchmark(c.f(hold))
			if r.N == 0 {
				t.Fatalf("%s hold=%v: the benchmark did not run", c.name, hold)
			}
			adm, okA := r.Extra["admitted/op"]
			rej, okR := r.Extra["rejected/op"]
			per, okP := r.Extra["ns/admitted"]
			if !okA || !okR || !okP {
				t.Errorf("%s hold=%v: metrics %v, want admitted/op, rejected/op and ns/admitted", c.name, hold, r.Extra)
				continue
			}
			if adm <= 0 || rej < 0 || math.Abs(adm+rej-1) > 1e-9 {
				t.Errorf("%s hold=%v: admitted/op %v + rejected/op %v, want > 0 and a sum of 1", c.name, hold, adm, rej)
			}
			// ns/admitted × admitted/op is the time the loop took per op,
			// read before the benchmark's timer stopped: at most its ns/op.
			if nsOp := float64(r.T.Nanoseconds()) / float64(r.N); per <= 0 || per*adm > nsOp*(1+1e-9) {
				t.Errorf("%s hold=%v: %v ns/admitted × %v admitted/op, want > 0 and at most %v ns/op", c.name, hold, per, adm, nsOp)
			}
		}
	}
}
