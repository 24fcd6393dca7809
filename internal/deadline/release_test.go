package deadline

import (
	"context"
	"testing"
	"time"

	"github.com/meshless/meshless/timeout"
)

// An attempt's derived context is released exactly once: by End, after
// which the Release of a deferred Abort does nothing (a timerCtx's second
// cancel still takes its locks), or by Release alone when the attempt
// panicked before End.
func TestTheAttemptsContextIsReleasedOnce(t *testing.T) {
	to, err := timeout.New(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		end  bool
	}{
		{"End then Release", true},
		{"Release alone", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Now()
			c := Plan{Attempt: to}.Begin(t.Context(), now)
			actx, a := c.Attempt(t.Context(), now)
			if a.cancel == nil {
				t.Fatal("the attempt derived no context")
			}
			cancels := 0
			cancel := a.cancel
			a.cancel = func() { cancels++; cancel() }
			if tt.end {
				if err := a.End(nil, time.Now()); err != nil {
					t.Fatalf("End = %v, want nil", err)
				}
			}
			a.Release()
			a.Release()
			if cancels != 1 {
				t.Errorf("the attempt's context was cancelled %d times, want once", cancels)
			}
			if actx.Err() != context.Canceled {
				t.Errorf("the attempt's context ended with %v, want context.Canceled", actx.Err())
			}
		})
	}
}
