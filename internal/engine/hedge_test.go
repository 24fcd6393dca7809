package engine

import (
	"context"
	"testing"
	"time"

	"github.com/meshless/meshless/config"
)

// ctxAttempt is an Attempt that keeps whether its context had ended when
// it began, and the context's deadline.
type ctxAttempt struct {
	made        bool
	ended       bool
	hasDeadline bool
}

func (a *ctxAttempt) Attempt(ctx context.Context, _ int) error {
	a.made = true
	a.ended = ctx.Err() != nil
	_, a.hasDeadline = ctx.Deadline()
	return ctx.Err()
}

// A hedged unary call's first copy runs under the caller's context and
// derives its own (hedgedCall): when the policy cancels the first copy
// before the copy has derived its context (a fast hedge decided the call),
// the copy's context ends as soon as it is derived, whichever context that
// is — its deadline's or its own cancellable one; one made to wait in a
// gate's queue has ended when the gates admit the copy, which is then not
// made at all (pipeline: an attempt whose context ended in a gate's queue).
func TestAFirstCopyCancelledBeforeItBeganEndsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		timeout  config.TimeoutSection
		bulkhead config.BulkheadSection
		caller   time.Duration // the caller's deadline; 0: none
		deadline bool          // the copy's context carries a deadline
	}{
		{"under its deadline", config.TimeoutSection{PerAttempt: config.Dur(time.Second)}, config.BulkheadSection{}, 0, true},
		{"no deadline", config.TimeoutSection{Enabled: config.Ptr(false)}, config.BulkheadSection{}, 0, false},
		{"the caller's deadline first", config.TimeoutSection{PerAttempt: config.Dur(time.Second)}, config.BulkheadSection{}, time.Millisecond * 500, true},
		{"a gate that waits", config.TimeoutSection{PerAttempt: config.Dur(time.Second)},
			config.BulkheadSection{MaxWaitDuration: config.Dur(time.Millisecond)}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{Defaults: config.Policies{
				Retry:    &config.RetrySection{Enabled: config.Ptr(false)},
				Timeout:  &tc.timeout,
				Bulkhead: &tc.bulkhead,
				Hedging:  &config.HedgingSection{MaxAttempts: config.Ptr(2), HedgingDelay: config.Dur(time.Hour)},
			}}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			e, err := New(cfg, fakeTransport{}, Options{MaxKeys: 10})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			m := lookup(e, "/a.B/C")
			if m.waits != (tc.bulkhead.MaxWaitDuration != nil) {
				t.Fatalf("the method waits: %v", m.waits)
			}
			ctx := t.Context()
			if tc.caller > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.caller)
				defer cancel()
			}
			c := m.Begin(ctx, false)
			a := new(ctxAttempt)
			h := &hedgedCall{m: m, p: c.p, deadlines: c.deadlines, start: c.start, a: a}
			h.CancelFirst()
			_ = h.Copy(c.ctx, 1)
			_ = c.End(nil)
			if m.waits {
				if a.made {
					t.Fatal("the copy was made: its context had ended when the gates admitted it")
				}
			} else if !a.ended || a.hasDeadline != tc.deadline {
				t.Fatalf("the copy's context had ended: %v, had a deadline: %v; want true, %v", a.ended, a.hasDeadline, tc.deadline)
			}
			if ctx.Err() != nil {
				t.Fatal("the caller's context was cancelled")
			}
		})
	}
}
