package throttler_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/throttler"
)

// ok is a result the backend accepted, ending at end.
func ok(end time.Time) resilience.Result {
	return resilience.Result{Outcome: resilience.Success, End: end}
}

// refused is a result the backend refused, ending at end.
func refused(end time.Time) resilience.Result {
	return resilience.Result{Outcome: resilience.Failure, Err: errDown, End: end}
}

// A client quiet for a window that fans out a burst to a healthy backend:
// every call is admitted before any completes (the backend takes 200 ms),
// then every one is answered OK. No call of the burst is rejected, however
// large it is: calls in flight are neither requests nor accepts. A second
// burst right after the first is not rejected either.
func TestColdBurstToAHealthyBackendIsNeverThrottled(t *testing.T) {
	for _, n := range []int{40, 200, 2000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			clock := resiliencetest.NewClock(time.Unix(0, 0))
			th := newThrottler(t, clock)
			// Some healthy traffic, then a quiet window.
			reached, _ := offer(th, clock, 100, 5*time.Second, func(int) bool { return true })
			if reached != 100 {
				t.Fatalf("%d of 100 sequential calls to a healthy backend reached it", reached)
			}
			clock.Advance(th.Config().Window)
			for burst := range 2 {
				if rejected := burstOf(th, clock, n, 200*time.Millisecond); rejected != 0 {
					t.Errorf("burst %d: %d of %d concurrent calls to a healthy backend were throttled, want none", burst+1, rejected, n)
				}
			}
			if r, a := th.Counts(); r != int64(2*n) || a != int64(2*n) {
				t.Errorf("after two bursts of %d: %d requests, %d accepts counted, want %d of each", n, r, a, 2*n)
			}
			if p := th.RejectionRate(); p != 0 {
				t.Errorf("rejection rate %v after two bursts answered OK, want 0", p)
			}
		})
	}
}

// burstOf enters n calls concurrently, each in its own goroutine; once all
// have entered it advances the clock by work and lets the admitted ones end
// OK. It returns the number rejected.
func burstOf(th *throttler.Throttler, clock *resiliencetest.Clock, n int, work time.Duration) int {
	var entered, done sync.WaitGroup
	var rejected atomic.Int64
	release := make(chan struct{})
	entered.Add(n)
	for range n {
		done.Go(func() {
			ctx, p, err := th.Enter(context.Background())
			entered.Done()
			if err != nil {
				rejected.Add(1)
				return
			}
			<-release
			_ = th.Exit(ctx, p, ok(clock.Now()))
		})
	}
	entered.Wait()
	clock.Advance(work)
	close(release)
	done.Wait()
	return int(rejected.Load())
}

// The counting contract, step by step: a call in flight counts nothing; an
// admitted call counts its request, and its accept, when it ends, at
// Result.End; a rejected one counts its request at once; an Uncounted
// result counts nothing.
func TestRequestsAreCountedAtTheirVerdict(t *testing.T) {
	t0 := time.Unix(0, 0)
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, th *throttler.Throttler, clock *resiliencetest.Clock) (requests, accepts int64)
	}{
		{"in flight counts nothing", func(t *testing.T, th *throttler.Throttler, clock *resiliencetest.Clock) (int64, int64) {
			for range 30 {
				if _, _, err := th.Enter(t.Context()); err != nil {
					t.Fatalf("Enter: %v", err)
				}
			}
			return 0, 0
		}},
		{"accepted and refused count at the end", func(t *testing.T, th *throttler.Throttler, clock *resiliencetest.Clock) (int64, int64) {
			var permits []resilience.Permit
			for range 30 {
				_, p, err := th.Enter(t.Context())
				if err != nil {
					t.Fatalf("Enter: %v", err)
				}
				permits = append(permits, p)
			}
			for i, p := range permits {
				if i%3 == 0 {
					_ = th.Exit(t.Context(), p, refused(clock.Now()))
				} else {
					_ = th.Exit(t.Context(), p, ok(clock.Now()))
				}
			}
			return 30, 20
		}},
		{"uncounted counts nothing", func(t *testing.T, th *throttler.Throttler, clock *resiliencetest.Clock) (int64, int64) {
			for range 30 {
				_, p, _ := th.Enter(t.Context())
				_ = th.Exit(t.Context(), p, resilience.Result{Outcome: resilience.Ignored, Err: context.Canceled, End: clock.Now()})
			}
			return 0, 0
		}},
		// The call enters at 0 s and ends at 9.5 s, a window later than its
		// Enter's slot: at 12 s it is counted, request and accept together.
		{"a long call counts at its end", func(t *testing.T, th *throttler.Throttler, clock *resiliencetest.Clock) (int64, int64) {
			_, p, _ := th.Enter(t.Context())
			clock.Advance(9500 * time.Millisecond)
			_ = th.Exit(t.Context(), p, ok(clock.Now()))
			clock.Advance(2500 * time.Millisecond)
			return 1, 1
		}},
		// Exit counts at Result.End, not when it runs: a call that ended at
		// 12 s is out of the window at 22.5 s even if its Exit ran at 20 s.
		{"Exit counts at Result.End", func(t *testing.T, th *throttler.Throttler, clock *resiliencetest.Clock) (int64, int64) {
			_, p, _ := th.Enter(t.Context())
			clock.Set(t0.Add(20 * time.Second))
			_ = th.Exit(t.Context(), p, ok(t0.Add(12*time.Second)))
			if r, a := th.Counts(); r != 1 || a != 1 {
				t.Errorf("at 20 s: %d requests, %d accepts, want the call that ended at 12 s", r, a)
			}
			clock.Set(t0.Add(22500 * time.Millisecond))
			return 0, 0
		}},
		// An End older than the window is not counted.
		{"an End out of the window counts nothing", func(t *testing.T, th *throttler.Throttler, clock *resiliencetest.Clock) (int64, int64) {
			_, p, _ := th.Enter(t.Context())
			clock.Set(t0.Add(20 * time.Second))
			_, q, _ := th.Enter(t.Context())
			_ = th.Exit(t.Context(), q, ok(clock.Now()))
			_ = th.Exit(t.Context(), p, ok(t0.Add(10*time.Second))) // the slot of 20 s
			return 1, 1
		}},
		// A result without End (a gate's refusal inside) counts at the clock.
		{"a zero End reads the clock", func(t *testing.T, th *throttler.Throttler, clock *resiliencetest.Clock) (int64, int64) {
			_, p, _ := th.Enter(t.Context())
			clock.Advance(30 * time.Second)
			_ = th.Exit(t.Context(), p, resilience.Result{Outcome: resilience.Failure, Err: errDown})
			return 1, 0
		}},
		{"a rejection counts at once", func(t *testing.T, th *throttler.Throttler, clock *resiliencetest.Clock) (int64, int64) {
			for range 20 {
				_, p, _ := th.Enter(t.Context())
				_ = th.Exit(t.Context(), p, refused(clock.Now()))
			}
			rejected := 0
			for range 100 {
				if _, p, err := th.Enter(t.Context()); err != nil {
					rejected++
				} else {
					_ = th.Exit(t.Context(), p, refused(clock.Now()))
				}
			}
			if rejected < 70 {
				t.Errorf("%d of 100 rejected after 20 refusals, want about 90", rejected)
			}
			return 120, 0
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := resiliencetest.NewClock(t0)
			th := newThrottler(t, clock)
			wantR, wantA := tc.run(t, th, clock)
			if r, a := th.Counts(); r != wantR || a != wantA {
				t.Errorf("counts = %d requests, %d accepts, want %d and %d", r, a, wantR, wantA)
			}
		})
	}
}

// A backend that hangs until each call's timeout: its requests are counted
// when the timeouts fire, so the throttler reacts a timeout later than it
// would if calls in flight counted as refusals. Offered 100 calls a second
// with a 1 s timeout on the defaults, from idle it rejects nothing for the
// first second and is at its cap before 1.5 s.
func TestHangingBackendIsCountedWhenTheTimeoutFires(t *testing.T) {
	const (
		rate    = 100 // calls a second
		timeout = time.Second
		run     = 10 * time.Second
	)
	for _, tc := range []struct {
		name    string
		history bool // a window of healthy traffic before the hang
		// bounds on the first rejection after the hang began, and on the
		// time the rejection rate reaches the cap
		first, firstMax, capMax time.Duration
	}{
		{"from idle", false, timeout, timeout + 500*time.Millisecond, 2 * time.Second},
		{"after a healthy window", true, 5 * time.Second, 7 * time.Second, run},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Unix(0, 0)
			clock := resiliencetest.NewClock(t0)
			th := newThrottler(t, clock)
			if tc.history {
				offer(th, clock, 10*rate, 10*time.Second, func(int) bool { return true })
			}
			began := clock.Now()
			type call struct {
				p   resilience.Permit
				end time.Time
			}
			var inFlight []call
			var first, atCap time.Duration = -1, -1
			reached := 0
			for i := range int(run.Seconds() * rate) {
				now := began.Add(time.Duration(i) * time.Second / rate)
				clock.Set(now)
				for len(inFlight) > 0 && !inFlight[0].end.After(now) {
					_ = th.Exit(t.Context(), inFlight[0].p, refused(inFlight[0].end))
					inFlight = inFlight[1:]
				}
				if atCap < 0 && th.RejectionRate() == th.Config().MaxRejectionRate/100 {
					atCap = now.Sub(began)
				}
				_, p, err := th.Enter(t.Context())
				if err != nil {
					if first < 0 {
						first = now.Sub(began)
					}
					continue
				}
				reached++
				inFlight = append(inFlight, call{p, now.Add(timeout)})
			}
			t.Logf("%s, then hanging (%d calls/s, %v timeout): first rejection after %v, at the cap after %v; %d of %d calls reached the backend in %v",
				tc.name, rate, timeout, first, atCap, reached, int(run.Seconds()*rate), run)
			if first < tc.first || first > tc.firstMax {
				t.Errorf("first rejection %v after the backend began to hang, want in [%v, %v]", first, tc.first, tc.firstMax)
			}
			if atCap < 0 || atCap > tc.capMax {
				t.Errorf("rejection rate at the cap after %v, want within %v", atCap, tc.capMax)
			}
		})
	}
}

// backend is how the backend of a random interleaving answers.
type backend struct {
	name   string
	cancel float64 // the probability that a call ends Uncounted
	refuse float64 // then, the probability that it ends Refused; else Accepted
}

// Over random interleavings of admissions, completions (ending out of
// order, some with an End older than the clock, some without End) and
// clock steps, with random settings, the throttler's counts are exactly the
// verdicts that ended (or were rejected) within the window; its rejection
// rate is the formula on those counts; a healthy backend never sees a
// rejection; one that refuses everything is rejected at the cap once the
// window holds minimumRequests and enough requests for r/(r+1) to reach it.
func TestCountingOverRandomInterleavings(t *testing.T) {
	const cases, steps = 40, 1500
	for _, be := range []backend{
		{"healthy", 0, 0},
		{"healthy with cancellations", 0.2, 0},
		{"refusing everything", 0, 1},
		{"refusing everything with cancellations", 0.3, 1},
		{"refusing half", 0.1, 0.5},
	} {
		t.Run(be.name, func(t *testing.T) {
			for seed := range uint64(cases) {
				if !interleave(t, be, seed, steps) {
					return
				}
			}
		})
	}
}

// counted is the requests and accepts counted in one slot of the window.
type counted struct{ requests, accepts int64 }

// interleave runs one random interleaving against a model of the counts;
// it reports false after the first failure.
func interleave(t *testing.T, be backend, seed uint64, steps int) bool {
	t.Helper()
	rnd := rand.New(rand.NewPCG(seed, 19))
	cfg := throttler.Config{
		Multiplier:       1 + rnd.Float64()*3,
		Window:           time.Duration(1+rnd.IntN(20)) * time.Second,
		MinimumRequests:  rnd.IntN(40),
		MaxRejectionRate: float64(rnd.IntN(100)),
	}
	t0 := time.Unix(1000, 0)
	clock := resiliencetest.NewClock(t0)
	th, err := throttler.New(throttler.WithConfig(cfg), throttler.WithClock(clock),
		throttler.WithRandom(rand.New(rand.NewPCG(seed, 7)).Float64))
	if err != nil {
		t.Fatalf("seed %d: New(%+v): %v", seed, cfg, err)
	}
	// Some interleavings let calls pile up in flight, some keep few.
	arrive := 0.3 + 0.6*rnd.Float64()
	slot := cfg.Window / 10
	epoch := func(at time.Time) int64 { return int64(at.Sub(t0) / slot) }
	type call struct {
		p       resilience.Permit
		entered time.Time
	}
	var inFlight []call
	// The model: the verdicts counted, by slot.
	model := map[int64]*counted{}
	count := func(at time.Time, accepted bool) {
		e := epoch(at)
		if model[e] == nil {
			model[e] = new(counted)
		}
		model[e].requests++
		if accepted {
			model[e].accepts++
		}
	}
	rejected := 0
	fail := func(format string, args ...any) bool {
		t.Errorf("seed %d, %+v: "+format, append([]any{seed, cfg}, args...)...)
		return false
	}
	for step := range steps {
		switch x := rnd.Float64(); {
		case x < arrive: // a call arrives
			_, p, err := th.Enter(t.Context())
			if errors.Is(err, throttler.ErrThrottled) {
				rejected++
				count(clock.Now(), false)
			} else if err != nil {
				return fail("step %d: Enter: %v", step, err)
			} else {
				inFlight = append(inFlight, call{p, clock.Now()})
			}
		case x < arrive+(1-arrive)*0.7 && len(inFlight) > 0: // a call in flight ends
			i := rnd.IntN(len(inFlight))
			c := inFlight[i]
			inFlight[i] = inFlight[len(inFlight)-1]
			inFlight = inFlight[:len(inFlight)-1]
			// Its End is between its Enter and now: a pipeline reads it
			// before the throttler's Exit runs. Sometimes it has none.
			end := c.entered.Add(time.Duration(rnd.Int64N(int64(clock.Now().Sub(c.entered)) + 1)))
			if rnd.IntN(20) == 0 {
				end = time.Time{}
			}
			r := resilience.Result{Outcome: resilience.Failure, Err: errDown, End: end}
			switch {
			case rnd.Float64() < be.cancel:
				r.Outcome, r.Err = resilience.Ignored, context.Canceled
			case rnd.Float64() >= be.refuse:
				r.Outcome, r.Err = resilience.Success, nil
			}
			_ = th.Exit(t.Context(), c.p, r)
			if r.Outcome != resilience.Ignored {
				if end.IsZero() {
					end = clock.Now()
				}
				count(end, r.Outcome == resilience.Success)
			}
		default: // time passes: mostly a little, sometimes most of a window
			if rnd.IntN(50) == 0 {
				clock.Advance(time.Duration(rnd.Int64N(int64(cfg.Window))))
			} else {
				clock.Advance(time.Duration(rnd.Int64N(int64(slot / 4))))
			}
		}
		if be.refuse == 0 && rejected > 0 {
			return fail("step %d: %d rejections of calls to a healthy backend", step, rejected)
		}
		// The counts are the verdicts whose slot is one of the window's ten.
		now := epoch(clock.Now())
		var wantR, wantA int64
		for e, c := range model {
			if e <= now-10 {
				delete(model, e)
				continue
			}
			wantR += c.requests
			wantA += c.accepts
		}
		r, a := th.Counts()
		if r != wantR || a != wantA {
			return fail("step %d: counts %d requests, %d accepts, want %d and %d (%d in flight)", step, r, a, wantR, wantA, len(inFlight))
		}
		want := 0.0
		if wantR >= int64(cfg.MinimumRequests) {
			want = min(max((float64(wantR)-cfg.Multiplier*float64(wantA))/float64(wantR+1), 0), cfg.MaxRejectionRate/100)
		}
		got := th.RejectionRate()
		if got != want {
			return fail("step %d: rejection rate %v, want %v for %d requests, %d accepts", step, got, want, r, a)
		}
		if cap := cfg.MaxRejectionRate / 100; be.refuse == 1 && wantR >= int64(cfg.MinimumRequests) &&
			float64(wantR)/float64(wantR+1) >= cap && got != cap {
			return fail("step %d: a backend refusing everything, %d requests in the window: rate %v, want the cap", step, wantR, got)
		}
	}
	return true
}

// Entering and leaving allocates nothing, whatever the verdict, with or
// without Result.End.
func TestNoAllocationOnAnyVerdict(t *testing.T) {
	clock := resiliencetest.NewClock(time.Unix(0, 0))
	th := newThrottler(t, clock)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		r    resilience.Result
	}{
		{"accepted", ok(clock.Now())},
		{"refused", refused(clock.Now())},
		{"uncounted", resilience.Result{Outcome: resilience.Ignored, Err: context.Canceled, End: clock.Now()}},
		{"no End", resilience.Result{Outcome: resilience.Success}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(1000, func() {
				if _, p, err := th.Enter(ctx); err == nil {
					_ = th.Exit(ctx, p, tc.r)
				}
			}); n != 0 {
				t.Errorf("%v allocations per request, want 0", n)
			}
		})
	}
}
