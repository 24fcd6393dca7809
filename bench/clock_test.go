package bench

import (
	"testing"
	"time"

	"github.com/meshless/meshless/resilience"
)

var clockSink time.Time

// BenchmarkClockFloor is the floor of B1' (docs/benchmarks.md): what
// reading the default clock costs on this machine, once and twice (a
// call timed from its start to its end), and as a breaker times a call,
// in the same run as BenchmarkClosed.
func BenchmarkClockFloor(b *testing.B) {
	clk := resilience.SystemClock()
	b.Run("one-read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			clockSink = clk.Now()
		}
	})
	b.Run("two-reads", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			clockSink = clk.Now()
			clockSink = clk.Now()
		}
	})
	// What a breaker on the system clock reads for a call it times alone:
	// its start, and its end as the monotonic time since (time.Since).
	b.Run("now-and-since", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			start := time.Now()
			clockSink = start.Add(time.Since(start))
		}
	})
}
