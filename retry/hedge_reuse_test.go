package retry

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// Issue 24 item 5: a hedged call's state is reused only when nothing can
// touch it any more — its first copy answered before hedgingDelay and the
// timer was stopped before it fired — and is then cleared; a call whose
// timer fired (whether it sent a hedge or the throttle kept it from doing
// so) leaves its state to the collector, since the timer's function may
// still read it after the call has returned.
func TestHedgeReusesOnlyAStateNothingCanTouch(t *testing.T) {
	for _, tc := range []struct {
		name      string
		first     time.Duration // the first copy's answer
		throttled bool          // the throttle allows no hedge
		reusable  bool
	}{
		{"the first copy answers before the delay", 10 * time.Millisecond, false, true},
		{"a hedge was sent", time.Second, false, false},
		{"the timer fired but the throttle sent nothing", time.Second, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := DefaultHedgeConfig()
				cfg.MaxAttempts, cfg.HedgingDelay = 2, 50*time.Millisecond
				opts := []HedgeOption{WithHedgeConfig(cfg)}
				if tc.throttled {
					th, err := NewThrottle(2, 1)
					if err != nil {
						t.Fatal(err)
					}
					th.failure() // 1 token left: at or below half, no hedge
					opts = append(opts, WithHedgeThrottle(th))
				}
				h, err := NewHedge(opts...)
				if err != nil {
					t.Fatal(err)
				}
				r := h.newRun(context.Background())
				r.fn = func(ctx context.Context, n int) error {
					d := tc.first
					if n > 1 {
						d = time.Millisecond
					}
					select {
					case <-time.After(d):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				r.ctx, r.cancel = context.WithCancel(context.Background())
				if _, err := r.done(r.run()); err != nil {
					t.Fatal(err)
				}
				if r.reusable != tc.reusable {
					t.Fatalf("reusable = %v, want %v", r.reusable, tc.reusable)
				}
				h.release(r)
				if tc.reusable && (r.caller != nil || r.fn != nil || r.ctx != nil || r.first != nil || r.sent != 0 ||
					r.firstDone || r.reusable || r.h != h || r.fireFn == nil) {
					t.Fatalf("a released state keeps its call's: %+v", r)
				}
				if !tc.reusable && (r.caller == nil || r.fireFn == nil) {
					t.Fatal("a state that is not reused was cleared")
				}
			})
		})
	}
}
