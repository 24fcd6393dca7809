package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/internal/pipeline"
	"github.com/meshless/meshless/resilience"
)

// gate records its steps. refuse makes Enter refuse; panicExit makes Exit
// panic; wrap makes Exit wrap the error it passes on.
type gate struct {
	name      string
	log       *[]string
	refuse    error
	panicExit bool
	wrap      bool
	results   []resilience.Result
}

type ctxKey struct{}

func (g *gate) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	*g.log = append(*g.log, g.name+">")
	if g.refuse != nil {
		return ctx, resilience.Permit{}, g.refuse
	}
	return context.WithValue(ctx, ctxKey{}, g.name), resilience.Permit{Ref: g}, nil
}

func (g *gate) Exit(ctx context.Context, p resilience.Permit, r resilience.Result) error {
	*g.log = append(*g.log, "<"+g.name+":"+r.Outcome.String())
	if p.Ref != g {
		*g.log = append(*g.log, "wrong permit")
	}
	g.results = append(g.results, r)
	if g.panicExit {
		panic("exit " + g.name)
	}
	if g.wrap && r.Err != nil {
		return &wrapped{g.name, r.Err}
	}
	return r.Err
}

type wrapped struct {
	by  string
	err error
}

func (w *wrapped) Error() string { return w.by + ": " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

// refusal is a local rejection.
type refusal struct{}

func (refusal) Error() string               { return "refused" }
func (refusal) RejectedBy() resilience.Kind { return resilience.KindOther }

func newPipeline(t *testing.T, gates ...resilience.Gate) *pipeline.Pipeline {
	t.Helper()
	p, err := pipeline.NewPipeline(nil, nil, gates...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPipelineEntersInOrderAndExitsInReverse(t *testing.T) {
	var log []string
	a, b, c := &gate{name: "a", log: &log}, &gate{name: "b", log: &log}, &gate{name: "c", log: &log}
	p := newPipeline(t, a, nil, b, c)
	if p.Len() != 3 {
		t.Fatalf("Len() = %d, want 3 (nil gates are skipped)", p.Len())
	}
	fail := errors.New("backend down")
	err := p.Run(t.Context(), func(ctx context.Context) error {
		log = append(log, "call:"+ctx.Value(ctxKey{}).(string))
		return fail
	})
	want := []string{"a>", "b>", "c>", "call:c", "<c:failure", "<b:failure", "<a:failure"}
	if err != fail || !slices.Equal(log, want) {
		t.Fatalf("err %v, log %v; want the call's error and %v", err, log, want)
	}
}

func TestPipelineRefusalExitsTheGatesAlreadyEntered(t *testing.T) {
	var log []string
	a, b, c := &gate{name: "a", log: &log}, &gate{name: "b", log: &log, refuse: refusal{}}, &gate{name: "c", log: &log}
	p := newPipeline(t, a, b, c)
	ran := false
	err := p.Run(t.Context(), func(context.Context) error { ran = true; return nil })
	want := []string{"a>", "b>", "<a:ignored"}
	if _, ok := err.(refusal); !ok || ran || !slices.Equal(log, want) {
		t.Fatalf("err %v, ran %v, log %v; want the refusal, no call, and %v", err, ran, log, want)
	}
	if r := a.results[0]; r.Err != err {
		t.Fatalf("gate a exited with %v, want the refusal", r.Err)
	}
}

func TestPipelinePanicGivesEveryPermitBackAndGoesOnUp(t *testing.T) {
	var log []string
	a, b := &gate{name: "a", log: &log}, &gate{name: "b", log: &log}
	p := newPipeline(t, a, b)
	r := recovered(func() { _ = p.Run(t.Context(), func(context.Context) error { panic("boom") }) })
	want := []string{"a>", "b>", "<b:failure", "<a:failure"}
	if r != "boom" || !slices.Equal(log, want) {
		t.Fatalf("recovered %v, log %v; want the call's panic and %v", r, log, want)
	}
	if a.results[0].Err != resilience.ErrPanicked {
		t.Fatalf("gate a's result %v, want ErrPanicked", a.results[0].Err)
	}
}

func TestPipelinePanicInAnExitStillExitsTheOuterGates(t *testing.T) {
	var log []string
	a, b := &gate{name: "a", log: &log}, &gate{name: "b", log: &log, panicExit: true}
	p := newPipeline(t, a, b)
	r := recovered(func() { _ = p.Run(t.Context(), func(context.Context) error { return nil }) })
	want := []string{"a>", "b>", "<b:success", "<a:success"}
	if r != "exit b" || !slices.Equal(log, want) {
		t.Fatalf("recovered %v, log %v; want b's panic and %v", r, log, want)
	}
}

func TestPipelineGatesPassTheErrorOutward(t *testing.T) {
	var log []string
	a, b := &gate{name: "a", log: &log}, &gate{name: "b", log: &log, wrap: true}
	p := newPipeline(t, a, b)
	fail := errors.New("down")
	err := p.Run(t.Context(), func(context.Context) error { return fail })
	var w *wrapped
	if !errors.As(err, &w) || w.by != "b" || !errors.Is(err, fail) {
		t.Fatalf("err %v, want b's wrapping of the call's error", err)
	}
	if a.results[0].Err != err || b.results[0].Err != fail {
		t.Fatalf("a saw %v, b saw %v; want b the call's error, a b's wrapping", a.results[0].Err, b.results[0].Err)
	}
}

// waiting is a gate that takes its time to admit, as a bulkhead's queue
// does.
type waiting struct{ d time.Duration }

func (w waiting) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	time.Sleep(w.d)
	return ctx, resilience.Permit{}, nil
}

func (waiting) Exit(_ context.Context, _ resilience.Permit, r resilience.Result) error { return r.Err }

func TestPipelineDurationLeavesOutTheWaitAtTheGates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log []string
		inner := &gate{name: "inner", log: &log}
		p := newPipeline(t, waiting{time.Second}, inner)
		_ = p.Run(t.Context(), func(context.Context) error { time.Sleep(30 * time.Millisecond); return nil })
		if d := inner.results[0].Duration; d != 30*time.Millisecond {
			t.Fatalf("duration %v, want the call's own 30ms, not the second spent queueing", d)
		}
	})
}

// DoneIn gives every gate the end and the duration its caller measured, as
// given, and DoneAt the duration from the attempt's start; after the first,
// either does nothing.
func TestDoneInAndDoneAtGiveTheGatesTheCallersTimes(t *testing.T) {
	start := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	end := start.Add(42 * time.Millisecond)
	for _, tc := range []struct {
		name string
		done func(*pipeline.Admission, error) error
		want time.Duration
	}{
		{"DoneIn", func(a *pipeline.Admission, err error) error { return a.DoneIn(err, end, 7*time.Millisecond) }, 7 * time.Millisecond},
		{"DoneAt", func(a *pipeline.Admission, err error) error { return a.DoneAt(err, end) }, 42 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			outer, inner := &gate{name: "outer", log: &log}, &gate{name: "inner", log: &log}
			p := newPipeline(t, outer, inner)
			var a pipeline.Admission
			if err := p.AdmitAt(t.Context(), &a, start); err != nil {
				t.Fatal(err)
			}
			failed := errors.New("failed")
			if err := tc.done(&a, failed); err != failed {
				t.Fatalf("%s returned %v, want the attempt's error", tc.name, err)
			}
			_ = tc.done(&a, nil) // does nothing
			for _, g := range []*gate{outer, inner} {
				if len(g.results) != 1 {
					t.Fatalf("%s exited %d times, want once", g.name, len(g.results))
				}
				if r := g.results[0]; r.Duration != tc.want || !r.End.Equal(end) || r.Outcome != resilience.Failure {
					t.Errorf("%s got duration %v, end %v, %v; want %v, %v, failure", g.name, r.Duration, r.End, r.Outcome, tc.want, end)
				}
			}
		})
	}
}

func TestPipelineTooManyGates(t *testing.T) {
	gates := make([]resilience.Gate, pipeline.MaxGates+1)
	for i := range gates {
		gates[i] = waiting{}
	}
	if _, err := pipeline.NewPipeline(nil, nil, gates...); !errors.Is(err, resilience.ErrInvalidOption) {
		t.Fatalf("err = %v, want ErrInvalidOption", err)
	}
}

// free is a gate that costs nothing.
type free struct{}

func (free) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	return ctx, resilience.Permit{}, nil
}
func (free) Exit(_ context.Context, _ resilience.Permit, r resilience.Result) error { return r.Err }

func TestPipelineRunAllocatesNothing(t *testing.T) {
	p := newPipeline(t, free{}, free{}, free{})
	ctx := context.Background()
	fn := func(context.Context) error { return nil }
	if n := testing.AllocsPerRun(1000, func() { _ = p.Run(ctx, fn) }); n != 0 {
		t.Fatalf("Run allocates %v times per call, want 0", n)
	}
}

func recovered(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}

// Issue 19 item 5: an observing pipeline admits what a gate refuses. The
// refusing gate, which holds no permit, is not exited; the gates before
// and after it run as usual; any other error still refuses.
func TestObservingPipelineAdmitsWhatAGateRefuses(t *testing.T) {
	var log []string
	a, b, c := &gate{name: "a", log: &log}, &gate{name: "b", log: &log, refuse: refusal{}}, &gate{name: "c", log: &log}
	p := newPipeline(t, a, b, c).Observing()
	ran := false
	err := p.Run(resilience.Observe(t.Context()), func(ctx context.Context) error {
		ran = true
		log = append(log, "call:"+ctx.Value(ctxKey{}).(string))
		return nil
	})
	want := []string{"a>", "b>", "c>", "call:c", "<c:success", "<a:success"}
	if err != nil || !ran || !slices.Equal(log, want) {
		t.Fatalf("err %v, ran %v, log %v; want the call run and %v", err, ran, log, want)
	}

	log = nil
	broken := errors.New("not a rejection")
	b.refuse = broken
	ran = false
	err = p.Run(resilience.Observe(t.Context()), func(context.Context) error { ran = true; return nil })
	if err != broken || ran || !slices.Equal(log, []string{"a>", "b>", "<a:ignored"}) {
		t.Fatalf("err %v, ran %v, log %v; want an error that is no rejection to refuse as usual", err, ran, log)
	}
	if octx := resilience.Observe(t.Context()); resilience.Observing(t.Context()) || !resilience.Observing(octx) || resilience.Observe(octx) != octx {
		t.Fatal("Observe marks a context once, and Observing tells it apart")
	}
}

// forwarder is a gate whose Exit is another's (pipeline.Forwarder): it logs
// when its own Exit is called, which a pipeline should not need.
type forwarder struct {
	to  resilience.Gate // nil: forwards nowhere (itself)
	log *[]string
}

func (f *forwarder) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	if f.to == nil {
		return ctx, resilience.Permit{}, nil
	}
	return f.to.Enter(ctx)
}

func (f *forwarder) Exit(ctx context.Context, p resilience.Permit, r resilience.Result) error {
	*f.log = append(*f.log, "forwarder's own Exit")
	if f.to == nil {
		return r.Err
	}
	return f.to.Exit(ctx, p, r)
}

func (f *forwarder) ExitsThrough() resilience.Gate { return f.to }

// A pipeline calls the Exit a Forwarder forwards to, through any number of
// them, once; a Forwarder that names no gate, or a chain of them longer than
// the bound (a cycle), is exited itself.
func TestAPipelineExitsTheGateAForwarderForwardsTo(t *testing.T) {
	for _, tc := range []struct {
		name string
		gate func(log *[]string) resilience.Gate
		want []string
	}{
		{"one forwarder", func(log *[]string) resilience.Gate {
			return &forwarder{to: &gate{name: "g", log: log}, log: log}
		}, []string{"g>", "<g:success"}},
		{"two forwarders", func(log *[]string) resilience.Gate {
			return &forwarder{to: &forwarder{to: &gate{name: "g", log: log}, log: log}, log: log}
		}, []string{"g>", "<g:success"}},
		{"forwarding nowhere", func(log *[]string) resilience.Gate {
			return &forwarder{log: log}
		}, []string{"forwarder's own Exit"}},
		{"a cycle", func(log *[]string) resilience.Gate {
			f := &forwarder{log: log}
			f.to = f
			return f
		}, nil}, // Enter would recurse: only built, below
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []string
			g := tc.gate(&log)
			p, err := pipeline.NewPipeline(nil, nil, g)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				return // NewPipeline returned: the bound held
			}
			if err := p.Run(t.Context(), func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(log, tc.want) {
				t.Fatalf("log %q, want %q", log, tc.want)
			}
		})
	}
}

// wrapper is a gate whose Enter is another's but for its refusals
// (pipeline.Wrapper), rewritten as a wrapped error naming it; it logs when
// its own Enter is called, which a pipeline should not need.
type wrapper struct {
	to  resilience.Gate // nil: wraps nothing (itself)
	log *[]string
}

func (w *wrapper) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	*w.log = append(*w.log, "wrapper's own Enter")
	if w.to == nil {
		return ctx, resilience.Permit{}, nil
	}
	ctx, p, err := w.to.Enter(ctx)
	if err != nil {
		return ctx, p, w.Refused(err)
	}
	return ctx, p, nil
}

func (w *wrapper) Exit(ctx context.Context, p resilience.Permit, r resilience.Result) error {
	if w.to == nil {
		return r.Err
	}
	return w.to.Exit(ctx, p, r)
}

func (w *wrapper) EntersThrough() resilience.Gate { return w.to }

func (w *wrapper) Refused(err error) error {
	*w.log = append(*w.log, "refused")
	return &wrapped{"wrapper", err}
}

// timedGate is a gate that needs the time (pipeline.TimedGate).
type timedGate struct {
	gate
	at time.Time
}

func (g *timedGate) EnterAt(ctx context.Context, now time.Time) (context.Context, resilience.Permit, error) {
	g.at = now
	return g.Enter(ctx)
}

// A pipeline enters the gate a Wrapper wraps, directly, and rewrites its
// refusals with the Wrapper's Refused, once, on a refusal only — in observe
// mode too, where the rewritten refusal, still a rejection, lets the attempt
// go on; the wrapped gate gets the time when it is a TimedGate; a Wrapper
// that names no gate is entered itself.
func TestAPipelineEntersTheGateAWrapperWraps(t *testing.T) {
	t.Run("admitted", func(t *testing.T) {
		var log []string
		p := newPipeline(t, &wrapper{to: &gate{name: "g", log: &log}, log: &log})
		if err := p.Run(t.Context(), func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if want := []string{"g>", "<g:success"}; !slices.Equal(log, want) {
			t.Fatalf("log %q, want %q", log, want)
		}
	})
	t.Run("refused", func(t *testing.T) {
		var log []string
		ran := false
		p := newPipeline(t, &wrapper{to: &gate{name: "g", log: &log, refuse: refusal{}}, log: &log})
		err := p.Run(t.Context(), func(context.Context) error { ran = true; return nil })
		var w *wrapped
		if !errors.As(err, &w) || w.by != "wrapper" || !errors.Is(err, refusal{}) || ran {
			t.Fatalf("err %v, ran %v; want the gate's refusal as the wrapper rewrote it", err, ran)
		}
		if want := []string{"g>", "refused"}; !slices.Equal(log, want) {
			t.Fatalf("log %q, want %q", log, want)
		}
	})
	t.Run("refused, observing", func(t *testing.T) {
		var log []string
		ran := false
		p := newPipeline(t, &wrapper{to: &gate{name: "g", log: &log, refuse: refusal{}}, log: &log}).Observing()
		if err := p.Run(resilience.Observe(t.Context()), func(context.Context) error { ran = true; return nil }); err != nil || !ran {
			t.Fatalf("err %v, ran %v; want the attempt admitted", err, ran)
		}
		if want := []string{"g>", "refused"}; !slices.Equal(log, want) {
			t.Fatalf("log %q, want %q", log, want)
		}
	})
	t.Run("timed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var log []string
			tg := &timedGate{gate: gate{name: "g", log: &log}}
			p := newPipeline(t, &wrapper{to: tg, log: &log})
			now := time.Now()
			var adm pipeline.Admission
			if err := p.AdmitAt(t.Context(), &adm, now); err != nil {
				t.Fatal(err)
			}
			_ = adm.Done(nil)
			if !tg.at.Equal(now) {
				t.Fatalf("the wrapped gate entered at %v, want %v", tg.at, now)
			}
			if want := []string{"g>", "<g:success"}; !slices.Equal(log, want) {
				t.Fatalf("log %q, want %q", log, want)
			}
		})
	})
	t.Run("wrapping nothing", func(t *testing.T) {
		var log []string
		p := newPipeline(t, &wrapper{log: &log})
		if err := p.Run(t.Context(), func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if want := []string{"wrapper's own Enter"}; !slices.Equal(log, want) {
			t.Fatalf("log %q, want %q", log, want)
		}
	})
}
