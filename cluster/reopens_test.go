package cluster_test

import (
	"testing"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/internal/coord"
)

// A backend down for hours makes the breakers re-open round after round:
// their count of consecutive re-opens passes 64, the most a record or
// message may carry. Before, the 65th re-open was written with its count:
// every peer took it for garbage, ignored the message and deleted the
// record, and the pods stopped sharing their opens (each probing alone, at
// its own times) for as long as the outage lasted. The count is written
// capped at 64: the waits stopped growing long before.
func TestAnOutageOfManyRoundsKeepsSharingItsReopens(t *testing.T) {
	w := newWorld(t)
	a, b := w.pod("a", false), w.pod("b", false)
	openAll(t, w, a, b)
	for round := 1; round <= 70; round++ {
		a.sync()
		b.sync()
		var holder *pod
		for p, pms := range probes(2, a, b) {
			holder = p
			for _, pm := range pms {
				pm.Record(fail)
			}
		}
		if holder == nil {
			t.Fatalf("round %d: no probe leased", round)
		}
		a.sync()
		b.sync()
		wa, wb := coord.Of(a.b).Window(), coord.Of(b.b).Window()
		if circuitbreaker.State(wa.State) != circuitbreaker.StateOpen || circuitbreaker.State(wb.State) != circuitbreaker.StateOpen || !wa.Until.Equal(wb.Until) {
			t.Fatalf("round %d: a %v until %v, b %v until %v: want the same re-open", round,
				circuitbreaker.State(wa.State), wa.Until, circuitbreaker.State(wb.State), wb.Until)
		}
		w.clk.Advance(wa.Until.Sub(w.clk.Now()))
	}
	if n := a.l.repairs.Load() + b.l.repairs.Load(); n != 0 {
		t.Errorf("%d keys repaired: the pods' own records were taken for garbage", n)
	}
}
