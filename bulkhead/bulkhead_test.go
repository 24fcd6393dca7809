package bulkhead_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// kinds are the two limits, each configured to admit 3 calls.
var kinds = []struct {
	name string
	opt  bulkhead.Option
}{
	{name: "fixed", opt: bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 3 }))},
	{name: "adaptive", opt: bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) {
		c.Adaptive, c.AdaptiveLimits = true, bulkhead.Adaptive{MinLimit: 1, MaxLimit: 3, InitialLimit: 3}
	}))},
}

func TestFullBulkheadRejectsAtOnce(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			b := mustNew(t, k.opt, bulkhead.WithName("payments"))
			ps := hold(t, b, 3)
			if b.Active() != 3 || b.Limit() != 3 {
				t.Fatalf("Active, Limit = %d, %d; want 3, 3", b.Active(), b.Limit())
			}
			ran := false
			err := b.Execute(t.Context(), func(context.Context) error { ran = true; return nil })
			if ran {
				t.Fatal("a full bulkhead ran the call")
			}
			if !errors.Is(err, bulkhead.ErrFull) {
				t.Fatalf("err = %v, want ErrFull", err)
			}
			var fe *bulkhead.FullError
			if !errors.As(err, &fe) || fe.Name != "payments" || fe.Limit != 3 || fe.Cause != nil {
				t.Fatalf("err = %#v, want a FullError for payments, limit 3, no cause", err)
			}
			if got, want := err.Error(), `bulkhead "payments" is full (limit 3)`; got != want {
				t.Errorf("Error() = %q, want %q", got, want)
			}
			if r, ok := resilience.AsRejection(err); !ok || r.RejectedBy() != resilience.KindBulkhead {
				t.Errorf("err is not a bulkhead rejection: %v", err)
			}
			if o := resilience.DefaultClassifier(err); o != resilience.Ignored {
				t.Errorf("DefaultClassifier(full) = %v, want ignored", o)
			}
			if _, err := enter(b, t.Context()); err != fe {
				t.Errorf("second rejection %p is not the shared error %p", err, fe)
			}
			ps[0].Release()
			if b.Active() != 2 {
				t.Fatalf("Active = %d after a release, want 2", b.Active())
			}
			if err := b.Execute(t.Context(), noop); err != nil {
				t.Fatalf("after a release: %v", err)
			}
			releaseAll(ps[1:])
			if b.Active() != 0 {
				t.Fatalf("Active = %d with every permit back, want 0", b.Active())
			}
		})
	}
}

func TestDefaultsAreTheDocumentedOnes(t *testing.T) {
	b := mustNew(t)
	if b.Limit() != 100 {
		t.Fatalf("default Limit = %d, want 100", b.Limit())
	}
	ps := hold(t, b, 100)
	// maxWaitDuration 0: the 101st call is refused at once.
	if _, err := enter(b, t.Context()); !errors.Is(err, bulkhead.ErrFull) {
		t.Fatalf("101st Acquire: %v, want ErrFull", err)
	}
	releaseAll(ps)

	a := mustNew(t, bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) {
		c.Adaptive = true
		c.AdaptiveLimits = bulkhead.Adaptive{}
	})))
	if a.Limit() != 20 {
		t.Fatalf("default adaptive Limit = %d, want 20", a.Limit())
	}
	for _, tt := range []struct {
		name string
		a    bulkhead.Adaptive
		want int
	}{
		{name: "max below the default initial", a: bulkhead.Adaptive{MaxLimit: 10}, want: 10},
		{name: "min above the default initial", a: bulkhead.Adaptive{MinLimit: 50}, want: 50},
		{name: "initial set", a: bulkhead.Adaptive{InitialLimit: 7}, want: 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustNew(t, bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) {
				c.Adaptive = true
				c.AdaptiveLimits = tt.a
			}))).Limit(); got != tt.want {
				t.Fatalf("Limit = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestExecuteReturnsTheCallsErrorUnchanged(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			b := mustNew(t, k.opt)
			for _, want := range []error{nil, errUnavailable, context.Canceled, context.DeadlineExceeded, bulkhead.ErrFull} {
				if err := b.Execute(t.Context(), func(context.Context) error { return want }); err != want {
					t.Errorf("Execute = %v, want %v", err, want)
				}
			}
			if b.Active() != 0 {
				t.Fatalf("Active = %d after the calls, want 0", b.Active())
			}
		})
	}
}

func TestPanicInTheCallGivesThePermitBack(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			b := mustNew(t, k.opt)
			chain := resilience.NewChain(b)
			for range 10 { // more panics than permits: each must come back
				func() {
					defer func() {
						if r := recover(); r != "boom" {
							t.Fatalf("recovered %v, want the call's panic", r)
						}
					}()
					_ = chain.Execute(t.Context(), func(context.Context) error { panic("boom") })
				}()
			}
			if b.Active() != 0 {
				t.Fatalf("Active = %d after panics, want 0", b.Active())
			}
			releaseAll(hold(t, b, 3))
		})
	}
}

func TestApplyRunsTheRestOfTheChain(t *testing.T) {
	b := mustNew(t, bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 1 })))
	var inner int
	chain := resilience.NewChain(b, resilience.PolicyFunc(func(ctx context.Context, next resilience.Next) error {
		inner = b.Active()
		return next.Run(ctx)
	}))
	if err := chain.Execute(t.Context(), func(context.Context) error { return errUnavailable }); err != errUnavailable {
		t.Fatalf("chain.Execute = %v, want the call's error", err)
	}
	if inner != 1 {
		t.Fatalf("Active inside the chain = %d, want 1", inner)
	}
	p := hold(t, b, 1)
	if err := chain.Execute(t.Context(), noop); !errors.Is(err, bulkhead.ErrFull) {
		t.Fatalf("full: %v, want ErrFull", err)
	}
	releaseAll(p)
}

func TestEndingAPermitTwicePanics(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			b := mustNew(t, k.opt)
			p := hold(t, b, 1)[0]
			p.Release()
			defer func() {
				if r, _ := recover().(string); !strings.Contains(r, "ended twice") {
					t.Fatalf("second Release: recovered %q, want a panic that says so", r)
				}
				if b.Active() != 0 {
					t.Fatalf("Active = %d after the refused release, want 0", b.Active())
				}
				releaseAll(hold(t, b, 3)) // the limit is intact
			}()
			p.Drop()
		})
	}
}

// A permit of no bulkhead ends through a nil *Bulkhead, whose Exit does
// nothing.
func TestZeroPermitIsANoOp(t *testing.T) {
	var p permit
	p.Release()
	p.Drop()
	p.Done(errUnavailable)
}

func TestObserverSeesAcquiredRejectedAndReleased(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			obs := new(resiliencetest.Observer)
			b := mustNew(t, k.opt, bulkhead.WithName("inventory"), bulkhead.WithObserver(obs))
			srcs := obs.Sources()
			if len(srcs) != 1 || srcs[0].Kind != resilience.KindBulkhead || srcs[0].Name != "inventory" || srcs[0].Snapshot == nil {
				t.Fatalf("sources = %+v, want one bulkhead source named inventory with a snapshot", srcs)
			}
			snap := srcs[0].Snapshot
			if s := snap(); s.Limit != 3 || s.Active != 0 {
				t.Fatalf("snapshot %+v, want limit 3, active 0", s)
			}
			ps := hold(t, b, 3)
			if s := snap(); s.Limit != 3 || s.Active != 3 {
				t.Fatalf("snapshot %+v, want limit 3, active 3", s)
			}
			_, rejected := enter(b, t.Context())
			releaseAll(ps)
			if s := snap(); s.Active != 0 {
				t.Fatalf("snapshot %+v, want active 0", s)
			}

			var types []string
			for _, e := range obs.Events() {
				types = append(types, e.Type.String())
				if e.Duration != 0 {
					t.Errorf("%v event waited %v, want 0 (no wait configured)", e.Type, e.Duration)
				}
			}
			want := []string{"acquired", "acquired", "acquired", "rejection", "released", "released", "released"}
			if !slices.Equal(types, want) {
				t.Fatalf("events %v, want %v", types, want)
			}
			if e := obs.Events(resilience.EventRejection)[0]; e.Err != rejected || !errors.Is(e.Err, bulkhead.ErrFull) {
				t.Fatalf("rejection event Err = %v, want the rejection returned (%v)", e.Err, rejected)
			}
		})
	}
}

func TestObserverGetsTheCallsContext(t *testing.T) {
	type key struct{}
	var seen []any
	obs := resilience.ObserverFunc(func(resilience.Source) resilience.Recorder {
		return resilience.RecorderFunc(func(ctx context.Context, e resilience.Event) {
			seen = append(seen, ctx.Value(key{}))
		})
	})
	b := mustNew(t, bulkhead.WithObserver(obs), bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 1 })))
	ctx := context.WithValue(t.Context(), key{}, "call")
	p, _ := enter(b, ctx)
	_, _ = enter(b, ctx)
	p.Release()
	if want := []any{"call", "call", "call"}; !slices.Equal(seen, want) {
		t.Fatalf("contexts %v, want the call's on every event", seen)
	}
	// A nil context is accepted and recorded as Background.
	seen = nil
	var nilCtx context.Context
	p, _ = enter(b, nilCtx)
	p.Release()
	if len(seen) != 2 || seen[0] != nil {
		t.Fatalf("contexts %v, want two events without values", seen)
	}
}

func TestErrFullIsARejection(t *testing.T) {
	if !resilience.IsRejection(bulkhead.ErrFull) || bulkhead.ErrFull.Error() != "bulkhead is full" {
		t.Fatalf("ErrFull = %q, rejection %v", bulkhead.ErrFull, resilience.IsRejection(bulkhead.ErrFull))
	}
	cause := &bulkhead.FullError{Name: "x", Limit: 2, Cause: context.Canceled}
	if !errors.Is(cause, bulkhead.ErrFull) || !errors.Is(cause, context.Canceled) {
		t.Fatal("a FullError with a cause must match ErrFull and its cause")
	}
	if got, want := cause.Error(), `bulkhead "x" is full (limit 2) and the wait for a permit ended: context canceled`; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}
