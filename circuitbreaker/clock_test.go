package circuitbreaker_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// On the system clock (the default) Execute measures a call from its start
// with the monotonic clock alone; the durations, slow calls and window are
// the same as those a fake clock gives for the same calls.
func TestExecuteMeasuresCallsOnEitherClock(t *testing.T) {
	durations := []time.Duration{100 * time.Millisecond, 3 * time.Second, 200 * time.Millisecond, 5 * time.Second}
	for _, tt := range []struct {
		name string
		fake bool
	}{
		{"system clock", false},
		{"fake clock", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := circuitbreaker.DefaultConfig()
				cfg.SlidingWindowSize = 4
				cfg.MinimumNumberOfCalls = 4
				cfg.SlowCallDurationThreshold = time.Second
				cfg.SlowCallRateThreshold = 60
				obs := new(resiliencetest.Observer)
				var clk resilience.Clock = resilience.SystemClock()
				fake := resiliencetest.NewClock(time.Unix(1e9, 0))
				if tt.fake {
					clk = fake
				}
				cb, err := circuitbreaker.New(circuitbreaker.WithConfig(cfg), circuitbreaker.WithClock(clk), circuitbreaker.WithObserver(obs))
				if err != nil {
					t.Fatal(err)
				}
				for _, d := range durations {
					_ = cb.Execute(t.Context(), func(context.Context) error {
						if tt.fake {
							fake.Advance(d)
						} else {
							time.Sleep(d)
						}
						return nil
					})
				}
				var got []time.Duration
				for _, ev := range obs.Events() {
					if ev.Type == resilience.EventCall {
						got = append(got, ev.Duration)
						if want := ev.Duration > time.Second; ev.Slow != want {
							t.Errorf("a call of %v: slow = %v, want %v", ev.Duration, ev.Slow, want)
						}
					}
				}
				if len(got) != len(durations) {
					t.Fatalf("%d call events, want %d", len(got), len(durations))
				}
				for i, d := range durations {
					if got[i] != d {
						t.Errorf("call %d took %v, want %v", i, got[i], d)
					}
				}
				if m := cb.Metrics(); m.SlowCallRate != 50 || m.State != circuitbreaker.StateClosed {
					t.Errorf("state %v, slow-call rate %v; want CLOSED, 50", m.State, m.SlowCallRate)
				}
			})
		})
	}
}
