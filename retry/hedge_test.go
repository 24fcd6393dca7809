package retry_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
)

var (
	errNonFatal = errors.New("non-fatal")
	errFatal    = errors.New("fatal")
)

func nonFatal(err error) bool { return errors.Is(err, errNonFatal) }

// backend answers copy n after delays[n-1] with errs[n-1], or with its
// context's error if that ends first; it counts copies started and
// cancelled.
type backend struct {
	delays             []time.Duration
	errs               []error
	started, cancelled atomic.Int32
}

func (b *backend) call(ctx context.Context, n int) error {
	b.started.Add(1)
	select {
	case <-time.After(b.delays[n-1]):
		if b.errs == nil {
			return nil
		}
		return b.errs[n-1]
	case <-ctx.Done():
		b.cancelled.Add(1)
		return ctx.Err()
	}
}

func newHedge(t *testing.T, opts ...retry.HedgeOption) *retry.Hedge {
	t.Helper()
	h, err := retry.NewHedge(append([]retry.HedgeOption{retry.WithNonFatal(nonFatal)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A slow first answer: the second copy, sent after hedgingDelay, wins at
// hedgingDelay + its own time, and the first is cancelled at once.
func TestHedgeSlowFirstFastSecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{delays: []time.Duration{time.Second, 10 * time.Millisecond, 10 * time.Millisecond}}
		h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
			c.MaxAttempts = 3
			c.HedgingDelay = 50 * time.Millisecond
		})))
		start := time.Now()
		w, err := h.Run(context.Background(), b.call)
		if err != nil || w != 2 {
			t.Fatalf("Run = %d, %v; want copy 2 to win", w, err)
		}
		if d := time.Since(start); d != 60*time.Millisecond {
			t.Fatalf("took %v, want hedgingDelay + fast = 60ms", d)
		}
		if b.started.Load() != 2 || b.cancelled.Load() != 1 {
			t.Fatalf("%d copies started, %d cancelled; want 2 and 1", b.started.Load(), b.cancelled.Load())
		}
	})
}

// A fatal answer wins like a success and cancels the other copies.
func TestHedgeFatalAnswerStopsEveryCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{delays: []time.Duration{150 * time.Millisecond, time.Second, time.Second}, errs: []error{errFatal, nil, nil}}
		h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
			c.MaxAttempts = 3
			c.HedgingDelay = 100 * time.Millisecond
		})))
		w, err := h.Run(context.Background(), b.call)
		if !errors.Is(err, errFatal) || w != 1 {
			t.Fatalf("Run = %d, %v; want copy 1's fatal answer", w, err)
		}
		if b.started.Load() != 2 || b.cancelled.Load() != 1 {
			t.Fatalf("%d started, %d cancelled; want 2 and 1", b.started.Load(), b.cancelled.Load())
		}
	})
}

// A non-fatal failure sends the next copy at once; when every copy fails
// so, the call returns the last failure and no copy won.
func TestHedgeNonFatalSendsTheNextCopyAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{delays: []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond},
			errs: []error{errNonFatal, errNonFatal, errNonFatal}}
		obs := new(resiliencetest.Observer)
		h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
			c.MaxAttempts = 3
			c.HedgingDelay = time.Hour
		})), retry.WithHedgeObserver(obs))
		start := time.Now()
		w, err := h.Run(context.Background(), b.call)
		if !errors.Is(err, errNonFatal) || w != 0 || time.Since(start) != 30*time.Millisecond || b.started.Load() != 3 {
			t.Fatalf("Run = %d, %v after %v with %d copies; want 0, the failure, 30ms, 3", w, err, time.Since(start), b.started.Load())
		}
		done := obs.Events(resilience.EventHedgeDone)
		if len(done) != 1 || done[0].Attempt != 3 || done[0].Winner != 0 {
			t.Fatalf("EventHedgeDone %+v", done)
		}
		if hedges := obs.Events(resilience.EventHedge); len(hedges) != 2 || hedges[0].Attempt != 2 || !errors.Is(hedges[0].Err, errNonFatal) {
			t.Fatalf("EventHedge %+v", hedges)
		}
	})
}

type pushbackErr struct{ d time.Duration }

func (e *pushbackErr) Error() string { return "pushback" }
func (e *pushbackErr) Is(target error) bool {
	return target == errNonFatal
}

func pushbackOf(err error) (time.Duration, bool) {
	var pe *pushbackErr
	if errors.As(err, &pe) {
		return pe.d, true
	}
	return 0, false
}

// Server pushback (gRFC A6): a delay sends the next copy after it; a
// negative one sends no more.
func TestHedgePushback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{delays: []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond},
			errs: []error{&pushbackErr{d: 200 * time.Millisecond}, nil, nil}}
		h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
			c.MaxAttempts = 3
			c.HedgingDelay = time.Hour
		})), retry.WithHedgePushback(pushbackOf))
		start := time.Now()
		if w, err := h.Run(context.Background(), b.call); err != nil || w != 2 || time.Since(start) != 220*time.Millisecond {
			t.Fatalf("Run = %d, %v after %v; want copy 2 after 10ms + 200ms pushback + 10ms", w, err, time.Since(start))
		}

		b = &backend{delays: []time.Duration{10 * time.Millisecond, time.Second, time.Second},
			errs: []error{&pushbackErr{d: -1}, nil, nil}}
		if w, err := h.Run(context.Background(), b.call); w != 0 || !errors.Is(err, errNonFatal) || b.started.Load() != 1 {
			t.Fatalf("negative pushback: Run = %d, %v with %d copies; want the failure and 1 copy", w, err, b.started.Load())
		}
	})
}

// A spent retry throttle sends the first copy only; copies' failures take
// tokens and successes give some back.
func TestHedgeThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		th, err := retry.NewThrottle(3, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
			c.MaxAttempts = 3
			c.HedgingDelay = time.Hour
		})), retry.WithHedgeThrottle(th))
		b := &backend{delays: []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}, errs: []error{errNonFatal, errNonFatal, errNonFatal}}
		_, _ = h.Run(context.Background(), b.call)
		if b.started.Load() != 2 || th.Tokens() != 1 {
			t.Fatalf("%d copies with %v tokens left; want 2 (the throttle stops the third) and 1", b.started.Load(), th.Tokens())
		}
		b = &backend{delays: []time.Duration{time.Second, time.Millisecond, time.Millisecond}}
		h = newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
			c.MaxAttempts = 3
			c.HedgingDelay = 10 * time.Millisecond
		})), retry.WithHedgeThrottle(th))
		w, err := h.Run(context.Background(), b.call)
		if w != 1 || err != nil || b.started.Load() != 1 || th.Tokens() != 1.5 {
			t.Fatalf("throttled: Run = %d, %v with %d copies, %v tokens; want copy 1 alone, then 1.5 tokens", w, err, b.started.Load(), th.Tokens())
		}
	})
}

// A copy refused by a local policy sends no more copies; the call waits for
// those in flight, and returns the refusal when nothing else answered.
// Every bulkhead permit is back when Run returns, and no copy outlives the
// caller's deadline.
func TestHedgeInAChainWithABulkhead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bh, err := bulkhead.New(bulkhead.WithConfig(bulkheadConf(func(c *bulkhead.Config) { c.MaxConcurrentCalls = 1 })))
		if err != nil {
			t.Fatal(err)
		}
		h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
			c.MaxAttempts = 3
			c.HedgingDelay = 10 * time.Millisecond
		})))
		chain := resilience.NewChain(h, bh)
		var calls, cancelled atomic.Int32
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err = chain.Execute(ctx, func(ctx context.Context) error {
			calls.Add(1)
			<-ctx.Done()
			cancelled.Add(1)
			return ctx.Err()
		})
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 100*time.Millisecond {
			t.Fatalf("Execute = %v after %v; want the deadline at 100ms", err, time.Since(start))
		}
		if calls.Load() != 1 || cancelled.Load() != 1 || bh.Active() != 0 {
			t.Fatalf("%d calls, %d cancelled, %d permits held; want 1, 1, 0 (the second copy was refused)", calls.Load(), cancelled.Load(), bh.Active())
		}

		// Only refusals: the call returns the refusal.
		_, hold, _ := bh.Enter(context.Background())
		err = chain.Execute(context.Background(), func(context.Context) error { return nil })
		_ = bh.Exit(context.Background(), hold, resilience.Result{})
		if !errors.Is(err, bulkhead.ErrFull) {
			t.Fatalf("Execute = %v, want the bulkhead's refusal", err)
		}
	})
}

// A panic in a copy cancels the others and goes on up from Run once they
// have returned.
func TestHedgePanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
			c.MaxAttempts = 2
			c.HedgingDelay = time.Millisecond
		})))
		var cancelled atomic.Int32
		got := func() (r any) {
			defer func() { r = recover() }()
			_, _ = h.Run(context.Background(), func(ctx context.Context, n int) error {
				if n == 1 {
					<-ctx.Done()
					cancelled.Add(1)
					return ctx.Err()
				}
				panic("boom")
			})
			return nil
		}()
		if got != "boom" || cancelled.Load() != 1 {
			t.Fatalf("recovered %v with %d copies cancelled; want boom and 1", got, cancelled.Load())
		}
	})
}

func TestHedgeConfigErrorsNameTheKey(t *testing.T) {
	_, err := retry.NewHedge(retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
		c.MaxAttempts = 6
		c.HedgingDelay = -time.Second
	})), retry.WithNonFatal(nil))
	if !errors.Is(err, resilience.ErrInvalidOption) {
		t.Fatalf("got %v", err)
	}
	for _, key := range []string{"maxAttempts", "hedgingDelay", "nonFatal"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("%q does not name %s", err, key)
		}
	}
	if err := retry.DefaultHedgeConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// hedgingDelay 0 sends every copy at once.
func TestHedgeZeroDelaySendsAllAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &backend{delays: []time.Duration{30 * time.Millisecond, 20 * time.Millisecond, 10 * time.Millisecond}}
		h := newHedge(t, retry.WithHedgeConfig(hedgeConf(func(c *retry.HedgeConfig) {
			c.MaxAttempts = 3
			c.HedgingDelay = 0
		})))
		if w, err := h.Run(context.Background(), b.call); w != 3 || err != nil || b.started.Load() != 3 || b.cancelled.Load() != 2 {
			t.Fatalf("Run = %d, %v, %d started, %d cancelled", w, err, b.started.Load(), b.cancelled.Load())
		}
	})
}
