package resilience

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestCoarseClockIsRealTime(t *testing.T) {
	before := time.Now()
	got := CoarseClock().Now()
	after := time.Now()
	// The coarse clock lags by as much as its refreshing goroutine is
	// delayed: unbounded in principle, 277ms seen under -race on two busy
	// cores (where the 100ms this allowed failed the test). What this
	// checks is that it is not another clock: a lag of seconds would do.
	const lag = 10 * time.Second
	if got.Before(before.Add(-lag)) || got.After(after) {
		t.Fatalf("CoarseClock().Now() = %v, want within [%v, %v]", got, before.Add(-lag), after)
	}
	prev := got
	for range 1000 {
		now := CoarseClock().Now()
		if now.Before(prev) {
			t.Fatalf("CoarseClock went backwards: %v after %v", now, prev)
		}
		prev = now
	}
}

func TestCoarseClockTicksAndStopsWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := new(coarseSource)
		t0 := c.now()
		if !c.running.Load() {
			t.Fatal("the ticker did not start on first use")
		}
		time.Sleep(10 * CoarseResolution) // fake time inside the bubble
		if d := c.now().Sub(t0); d < 9*CoarseResolution || d > 11*CoarseResolution {
			t.Fatalf("after 10 steps the clock moved %v, want about %v", d, 10*CoarseResolution)
		}
		time.Sleep(idleAfter + 5*CoarseResolution)
		synctest.Wait()
		if c.running.Load() {
			t.Fatal("the ticker still runs after the clock went unread")
		}
		t1 := c.now() // restarts it, precise at once
		if want := idleAfter + 15*CoarseResolution; t1.Sub(t0) < want {
			t.Fatalf("after a restart the clock reads %v since start, want at least %v", t1.Sub(t0), want)
		}
		time.Sleep(idleAfter + 5*CoarseResolution) // let it stop, so the bubble ends clean
	})
}

func TestCoarseClockTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := CoarseClock().NewTimer(time.Second)
		fired := make(chan struct{})
		CoarseClock().AfterFunc(2*time.Second, func() { close(fired) })
		stopped := CoarseClock().AfterFunc(time.Second, func() { t.Error("a stopped timer fired") })
		if !stopped.Stop() {
			t.Fatal("Stop of a pending timer returned false")
		}
		<-tm.C()
		<-fired
		if tm.Stop() {
			t.Fatal("Stop of a fired timer returned true")
		}
		if CoarseClock().AfterFunc(time.Second, func() {}).C() != nil {
			t.Fatal("an AfterFunc timer has a channel")
		}
	})
}

func TestSystemClockIsTimeNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		time.Sleep(1500 * time.Microsecond)
		if d := SystemClock().Now().Sub(start); d != 1500*time.Microsecond {
			t.Fatalf("SystemClock moved %v in a bubble that moved 1.5ms", d)
		}
		tm := SystemClock().NewTimer(time.Second)
		<-tm.C()
		if d := SystemClock().Now().Sub(start); d != time.Second+1500*time.Microsecond {
			t.Fatalf("SystemClock timer fired at %v", d)
		}
	})
}

// The ticker reads the time, then stores it; start may read and store a
// later time between the two. The clock must not step back then: a reader
// that got start's time would see an earlier one next, and a duration
// measured across the two would be negative.
func TestCoarseClockNeverStepsBack(t *testing.T) {
	c := new(coarseSource)
	t1 := time.Now()
	t2 := t1.Add(time.Microsecond)
	if got := c.advance(t2); !got.Equal(t2) {
		t.Fatalf("advance(%v) = %v", t2, got)
	}
	if got := c.advance(t1); !got.Equal(t2) { // the ticker's earlier reading, stored late
		t.Errorf("advance of an earlier time returned %v, want the later %v", got, t2)
	}
	if got := *c.cur.Load(); !got.Equal(t2) || got.Sub(t2) != 0 {
		t.Errorf("the clock reads %v after an earlier time came late, want %v", got, t2)
	}
	if got := c.advance(t2.Add(time.Millisecond)); !got.Equal(t2.Add(time.Millisecond)) {
		t.Errorf("advance of a later time returned %v, want it", got)
	}
}
