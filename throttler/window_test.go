package throttler

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/meshless/meshless/resilience/resiliencetest"
)

// The rejection probability read by admit (rateAt, which skips summing
// every shard when a cheaper read proves it 0) is exactly the formula on
// the window's counts, over 8 accept shards filled unevenly (all of them on
// one shard, none on the calling processor's, evenly), refusals in and out
// of the window, multipliers from 1 up, and refusals on both sides of the
// shortcut's bound F ≤ (K−1)·a/2.
func TestRateAtIsTheFormulaOverEveryShard(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spread func(rnd *rand.Rand, shard int) int64 // accepts of a shard in a slot
	}{
		{"evenly", func(rnd *rand.Rand, _ int) int64 { return rnd.Int64N(50) }},
		{"one shard", func(rnd *rand.Rand, shard int) int64 {
			if shard == 5 {
				return rnd.Int64N(400)
			}
			return 0
		}},
		{"unevenly", func(rnd *rand.Rand, shard int) int64 { return rnd.Int64N(int64(1 + shard*shard*10)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var zeroWithRefusals, above int
			for seed := range uint64(300) {
				rnd := rand.New(rand.NewPCG(seed, 11))
				k := []float64{1, 1.5, 2, 3, 1 + rnd.Float64()*4}[rnd.IntN(5)]
				got, want, f := rateCase(t, rnd, k, tc.spread)
				if got != want {
					t.Fatalf("seed %d, K %v: rateAt = %v, the formula on the counts = %v", seed, k, got, want)
				}
				switch {
				case want > 0:
					above++
				case f > 0:
					zeroWithRefusals++
				}
			}
			// Both sides of the shortcut were checked.
			if zeroWithRefusals == 0 || above == 0 {
				t.Errorf("%d cases with refusals and rate 0, %d with rate above 0: want some of each", zeroWithRefusals, above)
			}
		})
	}
}

// rateCase fills a throttler of 8 accept shards with random counts for the
// slots up to now (some already out of the window) and returns its rateAt,
// the formula on the counts of the window's slots, and their refusals.
func rateCase(t *testing.T, rnd *rand.Rand, k float64, spread func(*rand.Rand, int) int64) (got, want float64, f int64) {
	t.Helper()
	th, err := New(WithConfig(Config{Multiplier: k, Window: 10 * time.Second, MinimumRequests: rnd.IntN(30), MaxRejectionRate: 90}))
	if err != nil {
		t.Fatal(err)
	}
	th.mask, th.accepted = 7, make([]slots, 8)
	for i := range th.accepted {
		th.accepted[i].init()
	}
	now := int64(20 + rnd.IntN(30))
	th.newest.Store(now) // counts have been made up to now (not through add: set below)
	// Refusals are a fraction of the accepts, around the shortcut's bound.
	ratio := rnd.Float64() * k
	var a int64
	for e := now - 14; e <= now; e++ {
		var slotA int64
		for s := range th.accepted {
			n := spread(rnd, s)
			b := &th.accepted[s].b[e%buckets]
			b.epoch.Store(e)
			b.n.Store(uint64(n))
			slotA += n
		}
		refusals := int64(float64(slotA) * ratio * rnd.Float64())
		if rnd.IntN(4) == 0 {
			refusals = 0
		}
		for range refusals {
			th.count(e, false)
		}
		if e > now-buckets {
			a += slotA
			f += refusals
		}
	}
	if r, gotA := th.totals(now); r != a+f || gotA != a {
		t.Fatalf("totals = %d requests, %d accepts; want %d and %d", r, gotA, a+f, a)
	}
	if r := a + f; r >= int64(th.cfg.MinimumRequests) {
		want = min(max((float64(r)-k*float64(a))/float64(r+1), 0), 0.9)
	}
	return th.rateAt(now), want, f
}

// countingClock counts its reads.
type countingClock struct {
	*resiliencetest.Clock
	reads int
}

func (c *countingClock) Now() time.Time { c.reads++; return c.Clock.Now() }

// Execute reads the clock twice per call: once for the admission, which is
// also the call's start, and once at its end.
func TestExecuteReadsTheClockTwice(t *testing.T) {
	clock := &countingClock{Clock: resiliencetest.NewClock(time.Unix(0, 0))}
	th, err := New(WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		clock.reads = 0
		if err := th.Execute(t.Context(), func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if clock.reads != 2 {
			t.Errorf("call %d: Execute read the clock %d times, want 2", i, clock.reads)
		}
	}
}
