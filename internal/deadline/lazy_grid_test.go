package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/internal/deadline"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/timeout"
)

// gridPlan is a plan of the two durations (0: that timeout is nil),
// observed by obs, observing when observe is set.
func gridPlan(t *testing.T, attempt, overall time.Duration, obs resilience.Observer, observe bool) deadline.Plan {
	t.Helper()
	mk := func(d time.Duration, s timeout.Scope) *timeout.Timeout {
		if d <= 0 {
			return nil
		}
		opts := []timeout.Option{timeout.WithScope(s), timeout.WithName("x")}
		if obs != nil {
			opts = append(opts, timeout.WithObserver(obs))
		}
		if observe {
			opts = append(opts, timeout.WithObserve())
		}
		to, err := timeout.New(d, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return to
	}
	return deadline.NewPlan(mk(attempt, timeout.Attempt), mk(overall, timeout.Overall))
}

func descErr(err error) string {
	if err == nil {
		return "nil"
	}
	var te *timeout.Error
	if errors.As(err, &te) {
		return fmt.Sprintf("timeout{%v,%v}:%v", te.Scope, te.Timeout, err)
	}
	return err.Error()
}

// The overall deadline asked for late (after the first attempt, at a
// retry's backoff, only at End, or never) is the one asked for at Begin:
// every attempt's context deadline, every error and every event are the
// same, whatever the timeouts (none, zero, either first, equal), the
// caller's deadline (none, earlier, between, later, already past), the
// attempts' times and the clock the times come from (real time in a
// bubble, or a clock far from it).
func TestGridOverallAskedLateIsAskedEarly(t *testing.T) {
	durs := []time.Duration{0, time.Second, 3 * time.Second, 5 * time.Second}
	callers := []time.Duration{-1, 0, 500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second, 3100 * time.Millisecond, 10 * time.Second}
	offs := []time.Duration{0, time.Second, 1200 * time.Millisecond, 2500 * time.Millisecond, 3 * time.Second, 4 * time.Second}
	type clockKind int
	const (
		real  clockKind = iota
		past            // a custom clock an hour behind real time, wall only
		ahead           // a custom clock a day ahead
	)
	run := func(t *testing.T, attempt, overall, caller, firstEnd, secondAt, end time.Duration, ck clockKind, observe bool, ask int) string {
		var out string
		synctest.Test(t, func(t *testing.T) {
			obs := new(resiliencetest.Observer)
			p := gridPlan(t, attempt, overall, obs, observe)
			ctx := context.Background()
			switch {
			case caller < 0: // none
			case caller == 0: // already past
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, time.Now().Add(-time.Second))
				defer cancel()
			default:
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, caller)
				defer cancel()
			}
			base := time.Now()
			var clk *resiliencetest.Clock
			switch ck {
			case past:
				clk = resiliencetest.NewClock(base.Add(-time.Hour).Round(0))
			case ahead:
				clk = resiliencetest.NewClock(base.Add(24 * time.Hour))
			}
			now := func() time.Time {
				if clk != nil {
					return clk.Now()
				}
				return time.Now()
			}
			sleep := func(d time.Duration) {
				if d <= 0 {
					return
				}
				if clk != nil {
					clk.Advance(d)
				}
				time.Sleep(d)
				synctest.Wait() // the timers of this instant have fired
			}
			var b strings.Builder
			start := now()
			rel := func(at time.Time) time.Duration { return at.Sub(start) }
			var c deadline.Call
			c.Begin(&p, ctx, start)
			if ask == 0 {
				dl, ok := c.Deadline()
				fmt.Fprintf(&b, "deadline@begin %v %v;", rel(dl), ok)
			}
			actx, d := c.Attempt(ctx, start)
			if dl, ok := actx.Deadline(); ok {
				fmt.Fprintf(&b, "a1 derived=%v dl=%v;", actx != ctx, rel(dl))
			} else {
				fmt.Fprintf(&b, "a1 none;")
			}
			sleep(firstEnd)
			err := d.End(errors.New("unavailable"), now())
			fmt.Fprintf(&b, "a1 err=%s;", descErr(err))
			if ask <= 1 { // ask 2: never before End (the second attempt works it out)
				c.Deadline()
				if ask == 1 {
					fmt.Fprintf(&b, "deadline@1 ")
				} else {
					fmt.Fprintf(&b, "deadline@again ")
				}
			}
			if secondAt >= firstEnd {
				sleep(secondAt - firstEnd)
				actx, d := c.Attempt(ctx, now())
				if dl, ok := actx.Deadline(); ok {
					fmt.Fprintf(&b, "a2 derived=%v dl=%v;", actx != ctx, rel(dl))
				} else {
					fmt.Fprintf(&b, "a2 none;")
				}
				if end > secondAt {
					sleep(end - secondAt)
				}
				err = d.End(errors.New("unavailable"), now())
				fmt.Fprintf(&b, "a2 err=%s;", descErr(err))
			} else if end > firstEnd {
				sleep(end - firstEnd)
			}
			fmt.Fprintf(&b, "end err=%s;", descErr(c.End(ctx, err, now())))
			fmt.Fprintf(&b, "end nil=%s;", descErr(c.End(ctx, nil, now())))
			dl, ok := c.Deadline()
			fmt.Fprintf(&b, "deadline@end %v %v;", rel(dl), ok)
			for _, ev := range obs.Events() {
				fmt.Fprintf(&b, "ev %v %v %v;", ev.Duration, ev.TimedOut, ev.Type)
			}
			out = b.String()
		})
		return out
	}
	n := 0
	for _, attempt := range durs {
		for _, overall := range durs {
			for _, caller := range callers {
				for _, ck := range []clockKind{real, past, ahead} {
					for _, observe := range []bool{false, true} {
						for _, fe := range offs {
							for _, sa := range offs {
								end := sa + 500*time.Millisecond
								name := fmt.Sprintf("a%v o%v c%v k%d obs%v fe%v sa%v", attempt, overall, caller, ck, observe, fe, sa)
								// ask 0 (at Begin) against ask 1 (after the first attempt):
								// everything the same but the line that says when.
								if sa < fe {
									continue
								}
								early := run(t, attempt, overall, caller, fe, sa, end, ck, observe, 0)
								for ask := 1; ask <= 2; ask++ {
									late := run(t, attempt, overall, caller, fe, sa, end, ck, observe, ask)
									strip := func(s string) string {
										s = strings.Replace(s, "deadline@again ", "", 1)
										s = strings.Replace(s, "deadline@1 ", "", 1)
										i := strings.Index(s, ";")
										if strings.HasPrefix(s, "deadline@begin") {
											return s[i+1:]
										}
										return s
									}
									if strip(early) != strip(late) {
										t.Errorf("%s ask %d:\n early %s\n late  %s", name, ask, early, late)
									}
								}
								n++
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d cases", n)
}
