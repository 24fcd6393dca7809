package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/internal/deadline"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/timeout"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func plan(t *testing.T, attempt, overall time.Duration, opts ...timeout.Option) deadline.Plan {
	t.Helper()
	a, err := timeout.New(attempt, append(opts, timeout.WithScope(timeout.Attempt))...)
	if err != nil {
		t.Fatal(err)
	}
	o, err := timeout.New(overall, append(opts, timeout.WithScope(timeout.Overall))...)
	if err != nil {
		t.Fatal(err)
	}
	return deadline.Plan{Attempt: a, Overall: o}
}

// An attempt runs under one derived context whose deadline is the earliest
// of the caller's, the overall and the per-attempt; none is derived when the
// caller's comes first.
func TestAnAttemptHasTheEarliestDeadline(t *testing.T) {
	for _, tc := range []struct {
		name             string
		attempt, overall time.Duration
		caller           time.Duration // 0: none
		want             time.Duration // from the start; 0: none derived
		derived          bool
	}{
		{"per-attempt first", time.Second, 3 * time.Second, 0, time.Second, true},
		{"overall first", 5 * time.Second, 3 * time.Second, 0, 3 * time.Second, true},
		{"the caller's first", time.Second, 3 * time.Second, 500 * time.Millisecond, 500 * time.Millisecond, false},
		{"no timeouts", 0, 0, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				if tc.caller > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.caller)
					defer cancel()
				}
				now := time.Now()
				c := plan(t, tc.attempt, tc.overall).Begin(ctx, now)
				actx, d := c.Attempt(ctx, now)
				defer d.Release()
				if (actx != ctx) != tc.derived {
					t.Fatalf("derived a context: %v, want %v", actx != ctx, tc.derived)
				}
				dl, ok := actx.Deadline()
				if tc.want == 0 {
					if ok {
						t.Fatalf("deadline %v, want none", dl.Sub(now))
					}
					return
				}
				if !ok || dl.Sub(now) != tc.want {
					t.Fatalf("deadline %v (%v), want %v", dl.Sub(now), ok, tc.want)
				}
			})
		})
	}
}

// The deadline that ended an attempt names itself in the error; the
// caller's own deadline is the caller's, and its error comes back unchanged.
func TestTheDeadlineThatEndedTheCallIsNamed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := new(resiliencetest.Observer)
		p := plan(t, 100*time.Millisecond, time.Second, timeout.WithObserver(obs))
		start := time.Now()
		c := p.Begin(t.Context(), start)
		actx, d := c.Attempt(t.Context(), start)
		<-actx.Done()
		err := d.End(actx.Err(), time.Now())
		var te *timeout.Error
		if !errors.As(err, &te) || te.Scope != timeout.Attempt || te.Timeout != 100*time.Millisecond {
			t.Fatalf("attempt's error %v, want a per-attempt *timeout.Error of 100ms", err)
		}
		if err := c.End(t.Context(), err, time.Now()); !errors.As(err, &te) || te.Scope != timeout.Attempt {
			t.Fatalf("call's error %v, want the attempt's timeout unchanged", err)
		}
		if n := len(obs.Events()); n != 2 {
			t.Fatalf("%d events, want one per timeout", n)
		}

		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		start = time.Now()
		c = p.Begin(ctx, start)
		actx, d = c.Attempt(ctx, start)
		<-actx.Done()
		if err := d.End(actx.Err(), time.Now()); !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &te) {
			t.Fatalf("under the caller's earlier deadline: %v, want its context.DeadlineExceeded unchanged", err)
		}
	})
}

// Observing (timeout.WithObserve), no context is derived, and the event
// says the call took the timeout or longer.
func TestObservingDerivesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := new(resiliencetest.Observer)
		p := plan(t, 100*time.Millisecond, time.Second, timeout.WithObserve(), timeout.WithObserver(obs))
		start := time.Now()
		c := p.Begin(t.Context(), start)
		actx, d := c.Attempt(t.Context(), start)
		if actx != t.Context() {
			t.Fatal("an observing plan derived a context")
		}
		time.Sleep(150 * time.Millisecond) // virtual time: the attempt takes 150ms
		if err := d.End(nil, time.Now()); err != nil {
			t.Fatal(err)
		}
		ev := obs.Events()
		if len(ev) != 1 || !ev[0].TimedOut {
			t.Fatalf("events %+v, want one that says the attempt would have timed out", ev)
		}
	})
}

// A plan made with NewPlan decides as a literal one: the same deadline, the
// same errors and the same events (each heard only when it has an
// observer), observing or enforcing.
func TestNewPlanDecidesAsALiteralPlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		observe bool
		heard   bool
	}{
		{"enforcing, heard", false, true},
		{"enforcing, unheard", false, false},
		{"observing, heard", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type outcome struct {
				derived bool
				left    time.Duration
				attempt string
				call    string
				events  int
			}
			run := func(t *testing.T, prepared bool) (o outcome) {
				synctest.Test(t, func(t *testing.T) {
					obs := new(resiliencetest.Observer)
					var opts []timeout.Option
					if tc.observe {
						opts = append(opts, timeout.WithObserve())
					}
					if tc.heard {
						opts = append(opts, timeout.WithObserver(obs))
					}
					p := plan(t, 100*time.Millisecond, time.Second, opts...)
					if prepared {
						p = deadline.NewPlan(p.Attempt, p.Overall)
					}
					start := time.Now()
					c := p.Begin(t.Context(), start)
					actx, d := c.Attempt(t.Context(), start)
					o.derived = actx != t.Context()
					if dl, ok := actx.Deadline(); ok {
						o.left = dl.Sub(start)
					}
					time.Sleep(150 * time.Millisecond) // virtual time
					err := d.End(errors.New("failed"), time.Now())
					o.attempt = err.Error()
					o.call = c.End(t.Context(), err, time.Now()).Error()
					o.events = len(obs.Events())
				})
				return o
			}
			literal, prepared := run(t, false), run(t, true)
			if literal != prepared {
				t.Fatalf("NewPlan: %+v, a literal plan: %+v", prepared, literal)
			}
			if tc.heard != (literal.events == 2) || !tc.heard && literal.events != 0 {
				t.Fatalf("%d events, heard %v", literal.events, tc.heard)
			}
			if tc.observe == literal.derived {
				t.Fatalf("derived a context: %v, observing: %v", literal.derived, tc.observe)
			}
		})
	}
}

// A call that succeeded has nothing for Call.End to do but report the
// overall timeout's event: Reports says whether anyone hears it, so that
// the engine skips End for a success nobody hears.
func TestReportsWhetherTheOverallTimeoutIsHeard(t *testing.T) {
	if new(deadline.Call).Reports() {
		t.Error("a Call that did not Begin reports")
	}
	for _, heard := range []bool{false, true} {
		for _, prepared := range []bool{false, true} {
			t.Run(fmt.Sprintf("heard %v, prepared %v", heard, prepared), func(t *testing.T) {
				obs := new(resiliencetest.Observer)
				var opts []timeout.Option
				if heard {
					opts = append(opts, timeout.WithObserver(obs))
				}
				p := plan(t, 100*time.Millisecond, time.Second, opts...)
				if prepared {
					p = deadline.NewPlan(p.Attempt, p.Overall)
				}
				now := time.Now()
				c := p.Begin(t.Context(), now)
				if c.Reports() != heard {
					t.Fatalf("Reports() = %v, want %v", c.Reports(), heard)
				}
				if err := c.End(t.Context(), nil, now.Add(time.Millisecond)); err != nil {
					t.Fatalf("End(nil) = %v", err)
				}
				if n := len(obs.Events()); n != map[bool]int{false: 0, true: 1}[heard] {
					t.Fatalf("End(nil) reported %d events, heard %v", n, heard)
				}
			})
		}
	}
}

// The overall deadline is worked out when first needed: a call that asks
// for it only after its first attempt (the engine's plain path, whose
// first attempt's own deadline comes first) sees the same deadlines and the
// same errors as one that asks at once — the second attempt's deadline, the
// call's deadline, and the overall timeout named at the call's end.
func TestTheOverallDeadlineAskedLateIsTheSame(t *testing.T) {
	type outcome struct {
		first, second time.Duration // the attempts' deadlines from the start; -1: none derived
		deadline      time.Duration // Call.Deadline from the start; -1: none
		scope         timeout.Scope // of the call's error; 0: not a *timeout.Error
	}
	// ask: 0 at once, 1 after the first attempt, 2 never (the call ends
	// after its first attempt; only the error's scope is compared).
	run := func(t *testing.T, attempt, overall, caller, secondAt, endAt time.Duration, ask int) outcome {
		var o outcome
		synctest.Test(t, func(t *testing.T) {
			ctx := t.Context()
			if caller > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, caller)
				defer cancel()
			}
			p := deadline.NewPlan(plan(t, attempt, overall).Attempt, plan(t, attempt, overall).Overall)
			start := time.Now()
			var c deadline.Call
			c.Begin(&p, ctx, start)
			if ask == 0 {
				c.Deadline()
			}
			at := func(actx context.Context) time.Duration {
				if actx == ctx {
					return -1
				}
				dl, _ := actx.Deadline()
				return dl.Sub(start)
			}
			actx, d := c.Attempt(ctx, start)
			o.first = at(actx)
			d.Release()
			if ask == 2 {
				time.Sleep(endAt)
				err := c.End(ctx, errors.New("unavailable"), time.Now())
				if te := (*timeout.Error)(nil); errors.As(err, &te) {
					o.scope = te.Scope
				}
				return
			}
			dl, ok := c.Deadline()
			o.deadline = -1
			if ok {
				o.deadline = dl.Sub(start)
			}
			time.Sleep(secondAt)
			actx, d = c.Attempt(ctx, time.Now())
			o.second = at(actx)
			d.Release()
			time.Sleep(endAt - secondAt)
			err := c.End(ctx, errors.New("unavailable"), time.Now())
			if te := (*timeout.Error)(nil); errors.As(err, &te) {
				o.scope = te.Scope
			}
		})
		return o
	}
	for _, tc := range []struct {
		name                                      string
		attempt, overall, caller, secondAt, endAt time.Duration
		want                                      outcome
	}{
		{"per-attempt first, then the overall", time.Second, 3 * time.Second, 0, 2500 * time.Millisecond, 3 * time.Second,
			outcome{time.Second, 3 * time.Second, 3 * time.Second, timeout.Overall}},
		{"per-attempt first, the call ends in time", time.Second, 3 * time.Second, 0, time.Second, 2 * time.Second,
			outcome{time.Second, 2 * time.Second, 3 * time.Second, 0}},
		{"the caller's between them", time.Second, 3 * time.Second, 2 * time.Second, 1500 * time.Millisecond, 1500 * time.Millisecond,
			outcome{time.Second, -1, -1, 0}},
		{"the overall first", 5 * time.Second, 3 * time.Second, 0, time.Second, 3 * time.Second,
			outcome{3 * time.Second, 3 * time.Second, 3 * time.Second, timeout.Overall}},
		{"equal timeouts", 3 * time.Second, 3 * time.Second, 0, time.Second, 3 * time.Second,
			outcome{3 * time.Second, 3 * time.Second, 3 * time.Second, timeout.Overall}},
		{"no overall", time.Second, 0, 0, time.Second, 3 * time.Second,
			outcome{time.Second, 2 * time.Second, -1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for ask := range 2 {
				if got := run(t, tc.attempt, tc.overall, tc.caller, tc.secondAt, tc.endAt, ask); got != tc.want {
					t.Errorf("asked %s: %+v, want %+v", [...]string{"at once", "after the first attempt"}[ask], got, tc.want)
				}
			}
			if got := run(t, tc.attempt, tc.overall, tc.caller, tc.secondAt, tc.endAt, 2); got.scope != tc.want.scope {
				t.Errorf("never asked: the call's error's scope %v, want %v", got.scope, tc.want.scope)
			}
		})
	}
}
