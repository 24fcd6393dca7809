package engine

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// An attempt's end is read as the time elapsed since its start: with the
// system clock, start plus time.Since(start), the reading time.Now gives
// (exactly, in a synctest bubble, where both are the bubble's time); with
// any other clock, that clock's Now.
func TestSinceReadsTheEndOfAnAttempt(t *testing.T) {
	for _, tt := range []struct {
		name   string
		clock  func() resilience.Clock
		system bool
	}{
		{"system clock", resilience.SystemClock, true},
		{"fake clock", func() resilience.Clock { return resiliencetest.NewClock(time.Unix(1e9, 0)) }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := tt.clock()
				e, err := New(nil, fakeTransport{}, Options{Clock: clk, MaxKeys: 10})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				if e.system != tt.system {
					t.Fatalf("system = %v, want %v", e.system, tt.system)
				}
				start := e.now()
				time.Sleep(1500 * time.Millisecond)
				if fc, ok := clk.(*resiliencetest.Clock); ok {
					fc.Advance(2 * time.Second)
				}
				end, took := e.since(start)
				if want := clk.Now(); !end.Equal(want) {
					t.Errorf("since(start) = %v, want the clock's reading %v", end, want)
				}
				want := 1500 * time.Millisecond
				if !tt.system {
					want = 2 * time.Second
				}
				if d := end.Sub(start); d != want {
					t.Errorf("the attempt took %v, want %v", d, want)
				}
				if took != want {
					t.Errorf("since(start) took %v, want %v", took, want)
				}
			})
		})
	}
}
