package bulkhead_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/meshless/meshless/bulkhead"
)

// inflight counts the calls running inside a bulkhead, from inside the
// calls, and fails the test when they pass a limit.
type inflight struct {
	n, peak atomic.Int64
}

func (c *inflight) enter(t *testing.T, limit int) {
	n := c.n.Add(1)
	if n > int64(limit) {
		t.Errorf("%d calls in flight through a bulkhead of limit %d", n, limit)
	}
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
}

func (c *inflight) leave() { c.n.Add(-1) }

// TestNeverMoreThanTheLimitInFlight sends 64 goroutines at once through a
// bulkhead of limit 5, whose admitted calls block until every other
// goroutine has been refused: exactly 5 run, 59 are rejected with ErrFull.
// It repeats that for several rounds, then lets the goroutines run freely.
func TestNeverMoreThanTheLimitInFlight(t *testing.T) {
	const (
		limit      = 5
		goroutines = 64
	)
	for _, k := range []struct {
		name string
		opt  bulkhead.Option
	}{
		{name: "fixed", opt: bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = limit }))},
		{name: "adaptive", opt: bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) {
			c.Adaptive, c.AdaptiveLimits = true, bulkhead.Adaptive{MinLimit: 1, MaxLimit: limit, InitialLimit: limit}
		}))},
	} {
		t.Run(k.name, func(t *testing.T) {
			b := mustNew(t, k.opt)
			var c inflight
			for round := range 20 {
				l := b.Limit() // an adaptive limit moves only when calls end
				var admitted, rejected atomic.Int64
				var refused sync.WaitGroup // the goroutines that will be refused
				refused.Add(goroutines - l)
				release := make(chan struct{})
				var start, wg sync.WaitGroup
				start.Add(1)
				for range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						start.Wait()
						err := b.Execute(context.Background(), func(context.Context) error {
							c.enter(t, l)
							defer c.leave()
							admitted.Add(1)
							<-release
							return nil
						})
						switch {
						case err == nil:
						case errors.Is(err, bulkhead.ErrFull):
							rejected.Add(1)
							refused.Done()
						default:
							t.Errorf("round %d: unexpected error %v", round, err)
						}
					}()
				}
				start.Done()
				refused.Wait() // every goroutine but l has been refused
				close(release)
				wg.Wait()
				if admitted.Load() != int64(l) || rejected.Load() != goroutines-int64(l) {
					t.Fatalf("round %d: %d admitted, %d rejected; want %d and %d", round, admitted.Load(), rejected.Load(), l, goroutines-l)
				}
				if b.Active() != 0 {
					t.Fatalf("round %d: Active = %d after the round", round, b.Active())
				}
			}

			// Free running: no barrier, calls overlap as the scheduler likes.
			c.peak.Store(0)
			var wg sync.WaitGroup
			var ok, full atomic.Int64
			for range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 200 {
						err := b.Execute(context.Background(), func(context.Context) error {
							c.enter(t, limit)
							defer c.leave()
							if a := b.Active(); a > limit {
								t.Errorf("Active() = %d inside a call, above the limit %d", a, limit)
							}
							runtime.Gosched()
							return nil
						})
						runtime.Gosched() // let the refused make room for others too
						switch {
						case err == nil:
							ok.Add(1)
						case errors.Is(err, bulkhead.ErrFull):
							full.Add(1)
						default:
							t.Errorf("unexpected error %v", err)
						}
					}
				}()
			}
			wg.Wait()
			if ok.Load()+full.Load() != goroutines*200 || ok.Load() == 0 {
				t.Fatalf("%d admitted + %d rejected, want %d calls, some admitted", ok.Load(), full.Load(), goroutines*200)
			}
			if b.Active() != 0 {
				t.Fatalf("Active = %d after every call ended", b.Active())
			}
			t.Logf("free running: %d admitted, %d rejected, peak %d in flight", ok.Load(), full.Load(), c.peak.Load())
		})
	}
}
