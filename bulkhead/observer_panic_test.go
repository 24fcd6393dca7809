package bulkhead

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshless/meshless/resilience"
)

// panicsAtAcquire is an observer whose recorder panics when a permit is
// acquired.
var panicsAtAcquire = resilience.ObserverFunc(func(resilience.Source) resilience.Recorder {
	return resilience.RecorderFunc(func(_ context.Context, e resilience.Event) {
		if e.Type == resilience.EventAcquired {
			panic("observer")
		}
	})
})

// A recorder that panics as a permit is acquired gives the permit back
// before the panic goes on: the caller never got it to end (every kind of
// bulkhead, through Execute and through the gate's Enter).
func TestAnObserverThatPanicsAtAcquireLeaksNoPermit(t *testing.T) {
	for _, v := range []struct {
		name string
		cfg  Config
	}{
		{"fixed", Config{MaxConcurrentCalls: 2}},
		{"fixed, waiting", Config{MaxConcurrentCalls: 2, MaxWaitDuration: time.Second}},
		{"adaptive", Config{MaxConcurrentCalls: 2, Adaptive: true,
			AdaptiveLimits: Adaptive{MinLimit: 2, MaxLimit: 2, InitialLimit: 2}}},
	} {
		for _, via := range []string{"Execute", "Enter"} {
			t.Run(v.name+"/"+via, func(t *testing.T) {
				b, err := New(WithConfig(v.cfg), WithObserver(panicsAtAcquire))
				if err != nil {
					t.Fatal(err)
				}
				for range 5 { // more than the limit: a leaked permit would fill it
					p := recoverFrom(func() {
						if via == "Execute" {
							_ = b.Execute(context.Background(), func(context.Context) error { return nil })
						} else {
							_, _, _ = b.Enter(context.Background())
						}
					})
					if fmt.Sprint(p) != "observer" {
						t.Fatalf("panic %v, want the observer's", p)
					}
				}
				if n := b.Active(); n != 0 {
					t.Errorf("Active = %d after the observer's panics, want 0", n)
				}
				if b.adaptive != nil && b.adaptive.Inflight() != 0 {
					t.Errorf("failsafe-go in flight = %d, want 0", b.adaptive.Inflight())
				}
				if b.fixed != nil {
					// Both of failsafe-go's permits are free again.
					for range 2 {
						if !b.fixed.TryAcquirePermit() {
							t.Fatal("a permit of failsafe-go's fixed bulkhead is still taken")
						}
					}
				}
				if s := b.slots; s != nil {
					for range 2 {
						if !s.tryAcquire() {
							t.Fatal("a slot is still taken")
						}
					}
				}
			})
		}
	}
}

// An adaptive bulkhead's Exit given no permit of its own (the zero Permit,
// a fixed bulkhead's) gives nothing back: it neither panics nor frees the
// permit another call holds.
func TestAnAdaptiveExitWithoutItsPermitGivesNothingBack(t *testing.T) {
	fixed, err := New(WithConfig(Config{MaxConcurrentCalls: 1}))
	if err != nil {
		t.Fatal(err)
	}
	_, foreign, err := fixed.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer fixed.Exit(context.Background(), foreign, resilience.Result{})
	b, err := New(WithConfig(Config{MaxConcurrentCalls: 1, Adaptive: true,
		AdaptiveLimits: Adaptive{MinLimit: 2, MaxLimit: 2, InitialLimit: 2}}))
	if err != nil {
		t.Fatal(err)
	}
	_, pm, err := b.Enter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []resilience.Permit{{}, foreign} {
		if p := recoverFrom(func() { _ = b.Exit(context.Background(), other, resilience.Result{}) }); p != nil {
			t.Fatalf("Exit(%v) panicked: %v", other, p)
		}
		if n := b.Active(); n != 1 {
			t.Fatalf("Active = %d after Exit(%v) with one permit out, want 1", n, other)
		}
	}
	if p := recoverFrom(func() { _ = b.Exit(context.Background(), pm, resilience.Result{}) }); p != nil {
		t.Fatalf("the holder's own Exit panicked: %v", p)
	}
	if b.Active() != 0 || b.adaptive.Inflight() != 0 {
		t.Errorf("after the holder's Exit: Active %d, failsafe-go in flight %d; want 0 and 0", b.Active(), b.adaptive.Inflight())
	}
}

func recoverFrom(f func()) (p any) {
	defer func() { p = recover() }()
	f()
	return nil
}
