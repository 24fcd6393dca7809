package retry

import (
	"context"
	"sync"
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

// copies is hedgehooks.Copies for a test: copy 1 answers after first (or
// when its context ends), a later copy at once; outside is what it says of
// its bubble. As the contract asks, a CancelFirst that comes before copy 1
// has derived its context ends that context as soon as it is derived.
type copies struct {
	first     time.Duration
	outside   bool
	mu        sync.Mutex
	cancel    context.CancelFunc
	cancelled bool // CancelFirst was called
	sent      int
}

func (c *copies) Copy(ctx context.Context, n int) error {
	c.mu.Lock()
	c.sent++
	if n == 1 {
		ctx, c.cancel = context.WithCancel(ctx)
		if c.cancelled {
			c.cancel()
		}
	}
	cancel := c.cancel
	c.mu.Unlock()
	if n > 1 {
		return nil
	}
	defer cancel()
	t := time.NewTimer(c.first)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *copies) CancelFirst() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cancelled = true
	if c.cancel != nil {
		c.cancel()
	}
}

func (c *copies) OutsideBubble() bool { return c.outside }

// A state reused outside a bubble arms its last call's stopped timer again
// (no timer made per call), and that timer sends the next call's hedge.
// The outcome does not hang on the real clock: the first call's hedge is
// an hour away, so its first copy answers before it however slowly the
// machine runs; the second call's first copy never answers, so its hedge
// (at 1 ms) wins whenever it is sent.
func TestAReusedStatesTimerSendsTheNextCallsHedge(t *testing.T) {
	cfg := DefaultHedgeConfig()
	cfg.MaxAttempts, cfg.HedgingDelay = 2, time.Hour
	h, err := NewHedge(WithHedgeConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	r := h.newRun(context.Background())
	r.copies = &copies{first: 0, outside: true}
	if w, err := r.done(r.run()); err != nil || w != 1 || !r.reusable {
		t.Fatalf("first call: winner %d, %v, reusable %v; want 1, nil, true", w, err, r.reusable)
	}
	timer := r.first
	h.release(r)
	if r.first != timer || timer == nil {
		t.Fatal("a state released outside a bubble dropped its stopped timer")
	}
	h.cfg.HedgingDelay = time.Millisecond // read by each call; nothing else runs
	r.caller = context.Background()
	c := &copies{first: time.Hour, outside: true}
	r.copies = c
	if w, err := r.done(r.run()); err != nil || w != 2 || c.sent != 2 {
		t.Fatalf("second call: winner %d, %v, %d copies; want the hedge (2), nil, 2", w, err, c.sent)
	}
	if r.first != timer {
		t.Fatal("the second call made a timer of its own: the stopped one was not armed again")
	}
	if r.reusable {
		t.Fatal("a call whose timer fired left its state reusable")
	}
}

// A call in a testing/synctest bubble neither arms a timer kept from
// outside it (it would fire on the bubble's clock at the real clock's time)
// nor leaves its own, the bubble's, for a call outside (the runtime ends
// the program when one is armed there): its state is released without one.
func TestACallInABubbleLeavesNoTimerBehind(t *testing.T) {
	cfg := DefaultHedgeConfig()
	cfg.MaxAttempts, cfg.HedgingDelay = 2, 50*time.Millisecond
	h, err := NewHedge(WithHedgeConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	// The call outside the bubble leaves a stopped timer behind: its first
	// copy answers at once, and its hedge is an hour away, so that it does
	// not fire however slowly the machine runs.
	h.cfg.HedgingDelay = time.Hour
	r := h.newRun(context.Background())
	r.copies = &copies{outside: true}
	if w, err := r.done(r.run()); err != nil || w != 1 || !r.reusable {
		t.Fatalf("outside the bubble: winner %d, %v, reusable %v; want 1, nil, true", w, err, r.reusable)
	}
	kept := r.first
	h.release(r)
	h.cfg.HedgingDelay = cfg.HedgingDelay
	synctest.Test(t, func(t *testing.T) {
		// What the engine says in a bubble: not outside one.
		r.caller, r.copies = context.Background(), &copies{first: 10 * time.Millisecond}
		if w, err := r.done(r.run()); err != nil || w != 1 || !r.reusable {
			t.Fatalf("winner %d, %v, reusable %v; want 1, nil, true", w, err, r.reusable)
		}
		if r.first == kept {
			t.Fatal("a call in a bubble armed the timer kept from outside it")
		}
		h.release(r)
		if r.first != nil {
			t.Fatal("a state released in a bubble keeps the bubble's timer")
		}
		// The state serves the bubble's next call, which needs its hedge.
		r.caller, r.copies = context.Background(), &copies{first: time.Second}
		start := time.Now()
		if w, err := r.done(r.run()); err != nil || w != 2 {
			t.Fatalf("winner %d, %v; want the hedge (2), nil", w, err)
		}
		if got := time.Since(start); got != cfg.HedgingDelay {
			t.Fatalf("the hedge won after %v of the bubble's time, want %v", got, cfg.HedgingDelay)
		}
	})
}
