package cluster_test

import (
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/cluster"
	"github.com/meshless/meshless/internal/coord"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A pod whose clock runs minutes behind reads the others' opens as ending
// past its longest wait, and adopts them up to that bound. It leaves the
// record as it is (only its TTL is bounded): before, it rewrote the record
// to its bound, an end by its own clock that is long over by the others',
// and every pod that learns an open from the record (a message missed, a
// pod that joins) stayed CLOSED through it.
func TestAPodWhoseClockIsBehindLeavesTheOpenRecordInForce(t *testing.T) {
	w := newWorld(t)
	behind := resiliencetest.NewClock(t0.Add(-10 * time.Minute))
	a := w.pod("a", false)
	b := w.podWith("b", false, []circuitbreaker.Option{circuitbreaker.WithClock(behind)}, cluster.WithClock(behind))
	a.sync()
	b.sync()
	a.calls(6, fail)
	a.sync() // claims an open of 30 s
	b.sync() // adopts it, up to its longest wait by its clock
	b.wantState(circuitbreaker.StateOpen)
	if got := coord.Of(b.b).Window().Until.Sub(behind.Now()); got > maxOwnWait {
		t.Fatalf("b opens for %v, want at most its longest wait %v", got, maxOwnWait)
	}
	for range 3 { // b's later syncs do not move its end
		until := coord.Of(b.b).Window().Until
		w.clk.Advance(interval)
		behind.Advance(interval)
		b.sync()
		if got := coord.Of(b.b).Window().Until; !got.Equal(until) {
			t.Fatalf("b's open moved from %v to %v at a sync", until, got)
		}
	}
	c := w.pod("c", false) // learns the open from the record
	c.sync()
	c.wantState(circuitbreaker.StateOpen)
	if got, want := coord.Of(c.b).Window().Until, coord.Of(a.b).Window().Until; !got.Equal(want) {
		t.Fatalf("c opens until %v, a until %v", got, want)
	}
}
