package resiliencetest_test

import (
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/resilience/resiliencetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestClockFiresTimersInOrderAtTheirTime(t *testing.T) {
	clk := resiliencetest.NewClock(t0)
	var got []string
	at := func(name string) func() {
		return func() { got = append(got, name+"@"+clk.Now().Sub(t0).String()) }
	}
	clk.AfterFunc(3*time.Second, at("c"))
	clk.AfterFunc(time.Second, at("a"))
	clk.AfterFunc(time.Second, at("a2")) // same deadline: in order of creation
	stopped := clk.AfterFunc(2*time.Second, at("stopped"))
	ch := clk.NewTimer(2 * time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop: want true once, then false")
	}
	if clk.Pending() != 4 {
		t.Fatalf("Pending() = %d, want 4", clk.Pending())
	}
	clk.Advance(2500 * time.Millisecond)
	if w := []string{"a@1s", "a2@1s"}; !slices.Equal(got, w) {
		t.Fatalf("fired %v, want %v", got, w)
	}
	select {
	case tm := <-ch.C():
		if !tm.Equal(t0.Add(2 * time.Second)) {
			t.Fatalf("timer delivered %v, want its deadline", tm)
		}
	default:
		t.Fatal("the channel timer did not fire")
	}
	if !clk.Now().Equal(t0.Add(2500 * time.Millisecond)) {
		t.Fatalf("Now() = %v after Advance, want t0+2.5s", clk.Now())
	}
	clk.Set(t0.Add(10 * time.Second))
	if w := []string{"a@1s", "a2@1s", "c@3s"}; !slices.Equal(got, w) {
		t.Fatalf("fired %v, want %v", got, w)
	}
	if clk.Since(t0) != 10*time.Second {
		t.Fatalf("Since(t0) = %v, want 10s", clk.Since(t0))
	}
}

func TestClockTimerScheduledByATimerFiresInTheSameAdvance(t *testing.T) {
	clk := resiliencetest.NewClock(t0)
	var at time.Duration
	clk.AfterFunc(time.Second, func() {
		clk.AfterFunc(time.Second, func() { at = clk.Since(t0) })
	})
	clk.Advance(5 * time.Second)
	if at != 2*time.Second {
		t.Fatalf("the chained timer fired at %v, want 2s", at)
	}
}

func TestClockWaitPending(t *testing.T) {
	clk := resiliencetest.NewClock(t0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-clk.NewTimer(time.Minute).C()
	}()
	clk.WaitPending(1)
	clk.Advance(time.Minute)
	<-done
}

func TestClockSetBackwardsPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Set to an earlier time did not panic")
		}
	}()
	resiliencetest.NewClock(t0).Set(t0.Add(-time.Second))
}
