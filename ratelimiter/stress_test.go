package ratelimiter_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/ratelimiter"
)

// TestNeverMoreThanTheLimitPerPeriod sends 64 goroutines through a limiter
// for 20 periods, in a synctest bubble: the goroutines run in parallel (so
// -race sees them), while time is fake, so each admission is counted in the
// period in which Enter returned. Some calls wait, some of the waiters give
// up, and the goroutines pause at random between calls. No period may admit
// more than limitForPeriod calls (a smooth limiter: no interval more than
// one).
func TestNeverMoreThanTheLimitPerPeriod(t *testing.T) {
	const (
		limit      = 7
		period     = 100 * time.Millisecond
		periods    = 20
		goroutines = 64
	)
	for _, tt := range []struct {
		mode    ratelimiter.Mode
		timeout time.Duration
	}{
		{mode: ratelimiter.Bursty},
		{mode: ratelimiter.Bursty, timeout: 250 * time.Millisecond},
		{mode: ratelimiter.Smooth},
		{mode: ratelimiter.Smooth, timeout: 50 * time.Millisecond},
	} {
		t.Run(tt.mode.String()+"/timeout="+tt.timeout.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := mustNew(t, ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
					c.Mode = tt.mode
					c.LimitForPeriod = limit
					c.LimitRefreshPeriod = period
					c.TimeoutDuration = tt.timeout
				})))
				start := time.Now()
				unit := period // the span that may admit limit calls
				max := limit
				if tt.mode == ratelimiter.Smooth {
					unit, max = period/limit, 1
				}
				var (
					mu       sync.Mutex
					perUnit  = map[int64]int{}
					rejected atomic.Int64
					wg       sync.WaitGroup
				)
				for g := range goroutines {
					wg.Go(func() {
						rnd := rand.New(rand.NewPCG(uint64(g), 1))
						for time.Since(start) < periods*period {
							ctx, cancel := context.WithCancel(t.Context())
							if rnd.IntN(4) == 0 {
								time.AfterFunc(time.Duration(rnd.IntN(int(period))), cancel)
							}
							_, _, err := l.Enter(ctx)
							cancel()
							switch {
							case err == nil:
								u := int64(time.Since(start) / unit)
								mu.Lock()
								perUnit[u]++
								mu.Unlock()
							case errors.Is(err, ratelimiter.ErrLimited):
								rejected.Add(1)
							default:
								t.Errorf("Enter: %v", err)
							}
							time.Sleep(time.Duration(rnd.IntN(int(period / 5))))
						}
					})
				}
				wg.Wait()
				time.Sleep(2 * tt.timeout) // let cancelled waiters' reservations fall due
				total := 0
				for u, n := range perUnit {
					total += n
					if n > max {
						t.Errorf("%d calls admitted in [%v, %v), want at most %d", n,
							time.Duration(u)*unit, time.Duration(u+1)*unit, max)
					}
				}
				// Demand always exceeds the limit, so the periods are busy (less
				// the permits that waiters who gave up had reserved).
				if min := periods / 2 * limit; total < min {
					t.Errorf("%d calls admitted in %d periods, want at least %d", total, periods, min)
				}
				if rejected.Load() == 0 {
					t.Error("no call was rejected")
				}
				t.Logf("%d admitted, %d rejected", total, rejected.Load())
			})
		})
	}
}

// TestNeverMoreThanTheLimitInRealTime is the same on the real clock, with
// generous bounds: 32 goroutines hammer a limiter of 20 calls per 20ms for
// about 10 periods.
func TestNeverMoreThanTheLimitInRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	const (
		limit  = 20
		period = 20 * time.Millisecond
	)
	created := time.Now() // at or before failsafe-go's own start: periods count from there
	l := mustNew(t, ratelimiter.WithConfig(limiterConf(func(c *ratelimiter.Config) {
		c.LimitForPeriod = limit
		c.LimitRefreshPeriod = period
	})))
	var admitted atomic.Int64
	var wg sync.WaitGroup
	stop := created.Add(10 * period)
	for range 32 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				if l.Execute(t.Context(), noop) == nil {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	// Periods count from creation; admissions stop once every goroutine has
	// seen stop, at most a few periods late on a loaded machine.
	periods := int64(time.Since(created)/period) + 1
	if n := admitted.Load(); n > periods*limit {
		t.Fatalf("%d calls admitted in %d periods of %d", n, periods, limit)
	}
}
