package retry_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
)

// maxPushback is the longest server-requested wait a retry or a hedge
// makes (docs/retry.md, Pushback): Envoy's default for
// rate_limited_retry_back_off.max_interval.
const maxPushback = 300 * time.Second

func readPushback(err error) (time.Duration, bool) {
	var p pushbackError
	if errors.As(err, &p) {
		return time.Duration(p), true
	}
	return 0, false
}

// A call without a deadline whose server asks for a pushback longer than
// maxPushback (2^31-1 ms, gRFC A6's largest: almost 25 days) must not wait
// it: it ends at once with the server's answer, reason pushback. It waited
// the 25 days, holding the caller's goroutine. A pushback of maxPushback
// itself is still waited, as sent.
func TestAPushbackLongerThanTheBoundIsNotWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := new(resiliencetest.Observer)
		r := newRetry(t, retry.WithPushback(readPushback), retry.WithObserver(obs))
		long := pushbackError((1<<31 - 1) * time.Millisecond)
		dep := newDependency(long, nil)
		ctx, cancel := context.WithCancel(context.Background()) // no deadline
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- r.Execute(ctx, dep.call) }()
		synctest.Wait()
		select {
		case err := <-done:
			if !errors.Is(err, long) || len(dep.calls) != 1 {
				t.Fatalf("got %v after %d calls; want the server's answer after 1", err, len(dep.calls))
			}
		default:
			cancel() // the retry waits the pushback: end it, and fail
			<-done
			t.Fatalf("a pushback of %v without a deadline is waited: the call has not returned", time.Duration(long))
		}
		if d := obs.Events(resilience.EventRetryDone); len(d) != 1 || d[0].Reason != retry.ReasonPushback {
			t.Fatalf("retry done events %+v, want one with reason pushback", d)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		r := newRetry(t, retry.WithPushback(readPushback))
		dep := newDependency(pushbackError(maxPushback), nil)
		if err := r.Execute(context.Background(), dep.call); err != nil {
			t.Fatal(err)
		}
		if got := dep.waits(); !slices.Equal(got, []time.Duration{maxPushback}) {
			t.Fatalf("waits %v, want the pushback of %v as sent", got, maxPushback)
		}
	})
}

// A hedged call without a deadline whose copy fails with a pushback longer
// than maxPushback sends no more copies and, none being in flight, ends at
// once with that failure, as a pushback past the deadline does. It waited
// the pushback (almost 25 days) before the next copy. A pushback of
// maxPushback itself is waited.
func TestAHedgePushbackLongerThanTheBoundIsNotWaited(t *testing.T) {
	for _, tc := range []struct {
		pushback time.Duration
		winner   int
		took     time.Duration
	}{
		{(1<<31 - 1) * time.Millisecond, 0, 10 * time.Millisecond},
		{maxPushback + time.Millisecond, 0, 10 * time.Millisecond},
		{maxPushback, 2, 10*time.Millisecond + maxPushback + 10*time.Millisecond},
	} {
		t.Run(tc.pushback.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := &backend{delays: []time.Duration{10 * time.Millisecond, 10 * time.Millisecond},
					errs: []error{&pushbackErr{d: tc.pushback}, nil}}
				h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
					c.MaxAttempts = 2
					c.HedgingDelay = 100 * time.Millisecond
				})), retry.WithHedgePushback(pushbackOf))
				ctx, cancel := context.WithCancel(context.Background()) // no deadline
				defer cancel()
				type result struct {
					winner int
					err    error
					took   time.Duration
				}
				done := make(chan result, 1)
				start := time.Now()
				go func() {
					w, err := h.Run(ctx, b.call)
					done <- result{w, err, time.Since(start)}
				}()
				time.Sleep(tc.took) // fake time: the bubble's clock moves once every goroutine waits
				synctest.Wait()
				var r result
				select {
				case r = <-done:
				default:
					cancel() // the hedge waits the pushback: end it, and fail
					<-done
					t.Fatalf("pushback %v without a deadline: no answer after %v", tc.pushback, tc.took)
				}
				if r.winner != tc.winner || r.took != tc.took || (tc.winner == 0) != (r.err != nil) {
					t.Fatalf("pushback %v: Run = %d, %v after %v with %d copies; want %d after %v",
						tc.pushback, r.winner, r.err, r.took, b.started.Load(), tc.winner, tc.took)
				}
			})
		})
	}
}
