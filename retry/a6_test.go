package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
)

// gRFC A6: tokenRatio keeps three decimal places and drops the rest, so
// 0.5466 is 0.546, not 0.547.
func TestTokenRatioKeepsThreeDecimalsAndDropsTheRest(t *testing.T) {
	for _, tt := range []struct {
		in, want float64
	}{
		{0.5466, 0.546}, {0.546, 0.546}, {0.1, 0.1}, {0.0019, 0.001}, {1.9999, 1.999}, {3, 3},
	} {
		th, err := retry.NewThrottle(271, tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := th.TokenRatio(); got != tt.want {
			t.Errorf("tokenRatio %v is used as %v, want %v", tt.in, got, tt.want)
		}
	}
	// Drain the bucket, then give back 10 successes' worth: 5.46 tokens, not
	// 5.47 (rounded) nor 5.466 (unrounded).
	th, _ := retry.NewThrottle(271, 0.5466)
	for range 300 {
		th.RecordFailure()
	}
	for range 10 {
		th.RecordSuccess()
	}
	if th.Tokens() != 5.46 {
		t.Fatalf("tokens = %v after 10 successes on an empty bucket, want 5.46", th.Tokens())
	}
	// A ratio whose first three decimals are 0 is below the minimum.
	if _, err := retry.NewThrottle(10, 0.0009); err == nil {
		t.Fatal("tokenRatio 0.0009 (0.000 once truncated) was accepted")
	}
}

// gRFC A6: a pushback that says not to retry counts as a failure for
// throttling, whatever the code; an error that is not retryable and has no
// such pushback takes nothing.
func TestAStopPushbackTakesATokenWhateverTheCode(t *testing.T) {
	pushback := func(err error) (time.Duration, bool) {
		var p pushbackError
		if errors.As(err, &p) {
			return time.Duration(p), true
		}
		return 0, false
	}
	notRetryable := func(error) bool { return false }
	th, _ := retry.NewThrottle(10, 0.1)
	obs := new(resiliencetest.Observer)
	r := newRetry(t, retry.WithThrottle(th), retry.WithPushback(pushback), retry.WithRetryable(notRetryable), retry.WithObserver(obs))
	_ = r.Execute(t.Context(), func(context.Context) error { return errNotFound })
	if th.Tokens() != 10 {
		t.Fatalf("tokens = %v after a non-retryable error, want 10", th.Tokens())
	}
	_ = r.Execute(t.Context(), func(context.Context) error { return pushbackError(-1) })
	if th.Tokens() != 9 {
		t.Fatalf("tokens = %v after a pushback that says stop, want 9", th.Tokens())
	}
	d := obs.Events(resilience.EventRetryDone)
	if len(d) != 2 || d[1].Reason != retry.ReasonPushback {
		t.Fatalf("done events %+v, want the second stopped by pushback", d)
	}
	// A committed stream's last attempt counts the same way.
	a := r.Begin(t.Context())
	a.Done(pushbackError(-1))
	if th.Tokens() != 8 {
		t.Fatalf("tokens = %v after Done with a stop pushback, want 8", th.Tokens())
	}
	// A rejection takes nothing, pushback or not: it never reached a server.
	_ = r.Execute(t.Context(), func(context.Context) error { return rejected{} })
	if th.Tokens() != 8 {
		t.Fatalf("tokens = %v after a rejection, want 8", th.Tokens())
	}
}

type rejected struct{}

func (rejected) Error() string                   { return "rejected" }
func (rejected) RejectedBy() resilience.Kind     { return resilience.KindBulkhead }
func (rejected) pushback() (time.Duration, bool) { return -1, true }
