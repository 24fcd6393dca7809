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
