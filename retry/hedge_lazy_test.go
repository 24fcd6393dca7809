package retry_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
)

// Issue 24 item 5: the first copy runs on the caller's goroutine, and the
// timer that would send the second is stopped when the first answers
// before hedgingDelay: no copy is ever sent after the call.
func TestHedgeAFirstAnswerBeforeTheDelaySendsNothingMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{delays: []time.Duration{10 * time.Millisecond, time.Millisecond}}
		h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
			c.MaxAttempts = 2
			c.HedgingDelay = 50 * time.Millisecond
		})))
		if w, err := h.Run(context.Background(), b.call); w != 1 || err != nil {
			t.Fatalf("Run = %d, %v; want copy 1", w, err)
		}
		time.Sleep(time.Second) // past the delay
		if b.started.Load() != 1 {
			t.Fatalf("%d copies started, want 1", b.started.Load())
		}
	})
}

// The first copy's answer and the end of hedgingDelay at the same instant:
// whichever comes first, the first copy's answer wins and every copy sent
// has returned when Run does.
func TestHedgeAFirstAnswerAtTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var started, returned atomic.Int32
		h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
			c.MaxAttempts = 3
			c.HedgingDelay = 50 * time.Millisecond
		})))
		for range 20 {
			w, err := h.Run(context.Background(), func(ctx context.Context, n int) error {
				started.Add(1)
				defer returned.Add(1)
				d := 50 * time.Millisecond
				if n > 1 {
					d = time.Second
				}
				select {
				case <-time.After(d):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
			if w != 1 || err != nil {
				t.Fatalf("Run = %d, %v; want copy 1", w, err)
			}
			if started.Load() != returned.Load() {
				t.Fatalf("%d copies started, %d returned", started.Load(), returned.Load())
			}
		}
	})
}

// A panic in the first copy goes on up from Run: unchanged, and no copy
// sent, before hedgingDelay; after it, once the hedge it sent was
// cancelled and has returned.
func TestHedgeAPanicInTheFirstCopy(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration
		want  int32 // copies started
	}{
		{"before the hedge", 10 * time.Millisecond, 1},
		{"after the hedge", 80 * time.Millisecond, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
					c.MaxAttempts = 2
					c.HedgingDelay = 50 * time.Millisecond
				})))
				var started, cancelled atomic.Int32
				got := func() (r any) {
					defer func() { r = recover() }()
					_, _ = h.Run(context.Background(), func(ctx context.Context, n int) error {
						started.Add(1)
						if n == 1 {
							time.Sleep(tc.after)
							panic("boom")
						}
						<-ctx.Done()
						cancelled.Add(1)
						return ctx.Err()
					})
					return nil
				}()
				if got != "boom" {
					t.Fatalf("recovered %v, want boom", got)
				}
				if started.Load() != tc.want || cancelled.Load() != tc.want-1 {
					t.Fatalf("%d copies started, %d cancelled, when Run panicked; want %d and %d", started.Load(), cancelled.Load(), tc.want, tc.want-1)
				}
				time.Sleep(time.Second)
				if started.Load() != tc.want {
					t.Fatalf("%d copies started after the panic, want %d", started.Load(), tc.want)
				}
			})
		})
	}
}

// Observe mode: when hedgingDelay ends while the first copy runs, the
// hedge is reported, with the time since the first copy, and not sent;
// the first copy's answer is the call's.
func TestHedgeObserveReportsTheHedgeItWouldSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := new(resiliencetest.Observer)
		h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
			c.MaxAttempts = 3
			c.HedgingDelay = 50 * time.Millisecond
		})), retry.WithHedgeObserve(), retry.WithHedgeObserver(obs))
		b := &backend{delays: []time.Duration{200 * time.Millisecond, time.Millisecond, time.Millisecond},
			errs: []error{errFatal, nil, nil}}
		w, err := h.Run(resilience.Observe(context.Background()), b.call)
		if w != 1 || !errors.Is(err, errFatal) || b.started.Load() != 1 {
			t.Fatalf("Run = %d, %v with %d copies; want copy 1's answer alone", w, err, b.started.Load())
		}
		hedges := obs.Events(resilience.EventHedge)
		if len(hedges) != 1 || hedges[0].Attempt != 2 || hedges[0].Backoff != 50*time.Millisecond {
			t.Fatalf("EventHedge %+v; want copy 2's, 50ms after copy 1", hedges)
		}
		if done := obs.Events(resilience.EventHedgeDone); len(done) != 1 || done[0].Attempt != 1 || done[0].Winner != 1 {
			t.Fatalf("EventHedgeDone %+v", done)
		}
	})
}
