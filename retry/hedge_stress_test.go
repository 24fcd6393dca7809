package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/meshless/meshless/resilience"
)

// Adversarial stress tests of Hedge with real timers: the first copy ends
// at about hedgingDelay so that the first timer fires while the first copy
// returns; many calls, sequential and concurrent, share one Hedge and so its
// pooled states (and, on the copies path outside a bubble, their kept
// timers). Invariants only, no timings.

var (
	sErrNonFatal = errors.New("stress: non-fatal")
	sErrFatal    = errors.New("stress: fatal")
)

type sRejection struct{}

func (sRejection) Error() string               { return "stress: rejected" }
func (sRejection) RejectedBy() resilience.Kind { return resilience.KindBulkhead }

var sErrRejected error = sRejection{}

type sPushback struct{ d time.Duration }

func (p *sPushback) Error() string        { return fmt.Sprintf("stress: pushback %v", p.d) }
func (p *sPushback) Is(target error) bool { return target == sErrNonFatal }

// stressCall is one call's record of its copies.
type stressCall struct {
	id       int
	returned atomic.Bool // Run returned
	started  [MaxHedgedAttempts + 1]atomic.Int32
	ended    [MaxHedgedAttempts + 1]atomic.Int32
	mu       sync.Mutex
	results  [MaxHedgedAttempts + 1]error
	plan     [MaxHedgedAttempts + 1]copyPlan
	bad      []string

	// copies path
	cancelFirst atomic.Int32
	firstMu     sync.Mutex
	firstCancel context.CancelFunc
	firstCalled bool
	outside     bool

	deadlined  atomic.Bool // the caller's context may end
	doneEvents int
	doneEvent  resilience.Event
}

type copyPlan struct {
	wait   time.Duration // how long the copy takes (0: returns at once)
	spin   bool          // busy-wait instead of sleeping
	err    error
	block  bool // wait for the context only
	panics bool
}

func (c *stressCall) fail(format string, args ...any) {
	c.mu.Lock()
	c.bad = append(c.bad, fmt.Sprintf("call %d: ", c.id)+fmt.Sprintf(format, args...))
	c.mu.Unlock()
}

func (c *stressCall) body(ctx context.Context, n int) error {
	if n < 1 || n > MaxHedgedAttempts {
		c.fail("copy number %d", n)
		return nil
	}
	if c.returned.Load() {
		c.fail("copy %d started after Run returned", n)
	}
	if c.started[n].Add(1) != 1 {
		c.fail("copy %d started twice", n)
	}
	p := c.plan[n]
	err := p.err
	switch {
	case p.block: // until cancelled, or a long time
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			err = ctx.Err()
		}
	case p.spin:
		deadline := time.Now().Add(p.wait)
		for time.Now().Before(deadline) && ctx.Err() == nil {
		}
	case p.wait > 0:
		t := time.NewTimer(p.wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			err = ctx.Err()
		}
	}
	if c.returned.Load() {
		c.fail("copy %d running after Run returned", n)
	}
	c.mu.Lock()
	c.results[n] = err
	c.mu.Unlock()
	c.ended[n].Add(1)
	if p.panics {
		panic(panicVal{c.id, n})
	}
	return err
}

type panicVal struct{ call, copy int }

// Copy and CancelFirst: hedgehooks.Copies, as the engine does them.
func (c *stressCall) Copy(ctx context.Context, n int) error {
	if n == 1 {
		c.firstMu.Lock()
		if c.firstCalled {
			c.fail("Copy(1) twice")
		}
		c.firstCalled = true
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		c.firstCancel = cancel
		if c.cancelFirst.Load() > 0 {
			cancel()
		}
		c.firstMu.Unlock()
		defer cancel()
	}
	return c.body(ctx, n)
}

func (c *stressCall) CancelFirst() {
	if c.returned.Load() {
		c.fail("CancelFirst after Run returned")
	}
	if c.cancelFirst.Add(1) != 1 {
		c.fail("CancelFirst called twice")
	}
	if c.ended[1].Load() == 0 && c.ended[2].Load()+c.ended[3].Load()+c.ended[4].Load()+c.ended[5].Load() == 0 && !c.deadlined.Load() {
		c.fail("CancelFirst while copy 1 runs, and no other copy answered")
	}
	c.firstMu.Lock()
	if c.firstCancel != nil {
		c.firstCancel()
	}
	c.firstMu.Unlock()
}

func (c *stressCall) OutsideBubble() bool { return c.outside }

// check verifies the call's invariants once Run has returned (or panicked:
// pv is the panic value).
func (c *stressCall) check(ctx context.Context, h *Hedge, w int, err error, panicked bool, pv any) {
	c.returned.Store(true)
	max := h.cfg.MaxAttempts
	sent := 0
	for n := 1; n <= MaxHedgedAttempts; n++ {
		s, e := c.started[n].Load(), c.ended[n].Load()
		if s != e {
			c.fail("copy %d: started %d, ended %d when Run returned", n, s, e)
		}
		if s > 0 {
			if n != sent+1 {
				c.fail("copy %d started, copy %d did not", n, sent+1)
			}
			sent = n
		}
	}
	if sent > max {
		c.fail("%d copies, maxAttempts %d", sent, max)
	}
	if sent == 0 {
		c.fail("no copy ran")
	}
	c.mu.Lock()
	results := c.results
	c.mu.Unlock()
	anyPanic := false
	for n := 1; n <= sent; n++ {
		if c.plan[n].panics {
			anyPanic = true
		}
	}
	if panicked {
		p, ok := pv.(panicVal)
		if !ok || p.call != c.id || !c.plan[p.copy].panics || c.started[p.copy].Load() != 1 {
			c.fail("panicked with %v", pv)
		}
		return
	}
	if anyPanic {
		// A copy that panicked may have lost the race to a winner: the
		// winner's answer ended the call before its panic was taken.
		// But then the call must have had a winner.
		if w == 0 {
			c.fail("a copy panicked, Run returned no winner and no panic (err %v)", err)
		}
	}
	if w > 0 {
		if w > sent {
			c.fail("winner %d of %d copies", w, sent)
			return
		}
		r := results[w]
		if r != err {
			c.fail("winner %d returned %v, Run returned %v", w, r, err)
		}
		if r != nil && (errors.Is(r, sErrNonFatal) || resilience.IsRejection(r)) {
			c.fail("winner %d answered %v, not an answer that wins", w, r)
		}
		return
	}
	// No winner: every copy's answer was non-fatal, a rejection, or the
	// caller's context's.
	found := err == nil
	for n := 1; n <= sent; n++ {
		r := results[n]
		if r == nil || !(errors.Is(r, sErrNonFatal) || resilience.IsRejection(r) || errors.Is(r, context.Canceled) || errors.Is(r, context.DeadlineExceeded)) {
			if !c.plan[n].panics && !(r != nil && ctx.Err() != nil) {
				c.fail("no winner, but copy %d answered %v", n, r)
			}
		}
		if r == err {
			found = true
		}
	}
	if err == nil {
		c.fail("no winner and no error")
	}
	if !found && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		c.fail("Run returned %v, which no copy answered", err)
	}
}

// randomPlan makes copies that end around delay.
func randomPlan(rng *rand.Rand, c *stressCall, delay time.Duration, withPanics, withRejections bool) {
	for n := 1; n <= MaxHedgedAttempts; n++ {
		p := &c.plan[n]
		switch k := rng.IntN(10); {
		case k < 3:
			p.wait = 0
		case k < 7:
			// around the delay: from half to twice
			p.wait = delay/2 + time.Duration(rng.Int64N(int64(delay)*3/2+1))
			p.spin = rng.IntN(2) == 0
		case k < 9:
			p.wait = delay * time.Duration(2+rng.IntN(4))
		default:
			p.block = true
		}
		switch k := rng.IntN(12); {
		case k < 5:
			p.err = nil
		case k < 8:
			p.err = sErrNonFatal
		case k < 9:
			p.err = sErrFatal
		case k < 10 && withRejections:
			p.err = sErrRejected
		case k < 11:
			p.err = &sPushback{d: time.Duration(rng.IntN(3)-1) * delay}
		default:
			p.err = sErrNonFatal
		}
		if withPanics && rng.IntN(40) == 0 {
			p.panics = true
		}
	}
	if rng.IntN(4) == 0 { // no copy ever succeeds: the hedge runs out
		for n := 1; n <= MaxHedgedAttempts; n++ {
			c.plan[n].err = sErrNonFatal
			c.plan[n].block = false
		}
	}
}

func stressHedge(t *testing.T, maxAttempts int, delay time.Duration, opts ...HedgeOption) *Hedge {
	t.Helper()
	cfg := DefaultHedgeConfig()
	cfg.MaxAttempts, cfg.HedgingDelay = maxAttempts, delay
	h, err := NewHedge(append([]HedgeOption{
		WithHedgeConfig(cfg),
		WithNonFatal(func(err error) bool { return errors.Is(err, sErrNonFatal) }),
		WithHedgePushback(func(err error) (time.Duration, bool) {
			var p *sPushback
			if errors.As(err, &p) {
				return p.d, true
			}
			return 0, false
		}),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// runOne runs one call on path: "fn" (Hedge.Run) or "copies" (runCopies,
// outside a bubble as the engine says).
func runOne(h *Hedge, c *stressCall, path string, ctx context.Context) {
	var w int
	var err error
	pv, panicked := func() (pv any, panicked bool) {
		defer func() {
			if v := recover(); v != nil {
				pv, panicked = v, true
			}
		}()
		if path == "fn" {
			w, err = h.Run(ctx, c.body)
		} else {
			w, err = h.runCopies(ctx, c)
		}
		return nil, false
	}()
	c.check(ctx, h, w, err, panicked, pv)
}

func TestHedgeStress(t *testing.T) {
	for _, path := range []string{"fn", "copies"} {
		for _, delay := range []time.Duration{time.Microsecond, 20 * time.Microsecond, 100 * time.Microsecond} {
			for _, workers := range []int{1, 4} {
				name := fmt.Sprintf("%s/delay=%v/workers=%d", path, delay, workers)
				t.Run(name, func(t *testing.T) {
					ignore := goleak.IgnoreCurrent()
					h := stressHedge(t, 3, delay)
					var wg sync.WaitGroup
					var mu sync.Mutex
					var bad []string
					iters := 400
					for g := range workers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
							for i := range iters {
								c := &stressCall{id: g*iters + i, outside: true}
								randomPlan(rng, c, delay, true, true)
								ctx := context.Background()
								var cancel context.CancelFunc
								if rng.IntN(8) == 0 {
									c.deadlined.Store(true)
									ctx, cancel = context.WithTimeout(ctx, time.Duration(rng.Int64N(int64(delay)*3+1)))
								}
								runOne(h, c, path, ctx)
								if cancel != nil {
									cancel()
								}
								if len(c.bad) > 0 {
									mu.Lock()
									bad = append(bad, c.bad...)
									mu.Unlock()
								}
							}
						}()
					}
					wg.Wait()
					for i, b := range bad {
						if i > 20 {
							break
						}
						t.Error(b)
					}
					goleak.VerifyNone(t, ignore)
				})
			}
		}
	}
}

// The first copy answers a success just as the first timer fires, over and
// over, on one Hedge: the call must return the first copy's answer (or the
// hedge's, which answers a distinct success), and no copy of an earlier
// call may run after it returned. Here the first copy spins exactly
// hedgingDelay.
func TestHedgeFirstAnswerAtTheTimer(t *testing.T) {
	for _, path := range []string{"fn", "copies"} {
		t.Run(path, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			const delay = 30 * time.Microsecond
			h := stressHedge(t, 2, delay)
			var wg sync.WaitGroup
			var failures atomic.Int32
			for g := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 3000 {
						c := &stressCall{id: g*100000 + i, outside: true}
						c.plan[1] = copyPlan{wait: delay, spin: i%2 == 0, err: sErrFatal}
						c.plan[2] = copyPlan{wait: time.Duration(i%3) * time.Microsecond}
						runOne(h, c, path, context.Background())
						for _, b := range c.bad {
							if failures.Add(1) < 20 {
								t.Error(b)
							}
						}
					}
				}()
			}
			wg.Wait()
			goleak.VerifyNone(t, ignore)
		})
	}
}

type callKey struct{}

// recordingObserver checks each call's events against its copies:
// EventHedge for copy n only while copies before it ran, and
// EventHedgeDone once, with the copies sent, the winner Run returns.
func recordingObserver() resilience.Observer {
	return resilience.ObserverFunc(func(resilience.Source) resilience.Recorder {
		return resilience.RecorderFunc(func(ctx context.Context, e resilience.Event) {
			c, _ := ctx.Value(callKey{}).(*stressCall)
			if c == nil {
				return
			}
			if c.returned.Load() {
				c.fail("event %v after Run returned", e.Type)
			}
			switch e.Type {
			case resilience.EventHedgeDone:
				c.mu.Lock()
				c.doneEvents++
				c.doneEvent = e
				c.mu.Unlock()
			case resilience.EventHedge:
				if e.Attempt < 2 || e.Attempt > MaxHedgedAttempts {
					c.fail("EventHedge for copy %d", e.Attempt)
				}
			}
		})
	})
}

func TestHedgeStressVariants(t *testing.T) {
	th, err := NewThrottle(10, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		name    string
		max     int
		delay   time.Duration
		opts    []HedgeOption
		observe bool
		events  bool
	}{
		{"delay0", 3, 0, nil, false, false},
		{"max5", 5, 10 * time.Microsecond, nil, false, false},
		{"throttle", 3, 10 * time.Microsecond, []HedgeOption{WithHedgeThrottle(th)}, false, false},
		{"observer", 3, 10 * time.Microsecond, []HedgeOption{WithHedgeObserver(recordingObserver())}, false, true},
		{"observer-delay0", 4, 0, []HedgeOption{WithHedgeObserver(recordingObserver())}, false, true},
		{"observe-mode", 3, 10 * time.Microsecond, []HedgeOption{WithHedgeObserve(), WithHedgeObserver(recordingObserver())}, true, true},
	} {
		for _, path := range []string{"fn", "copies"} {
			t.Run(v.name+"/"+path, func(t *testing.T) {
				ignore := goleak.IgnoreCurrent()
				h := stressHedge(t, v.max, v.delay, v.opts...)
				var wg sync.WaitGroup
				var failures atomic.Int32
				for g := range 3 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
						for i := range 300 {
							c := &stressCall{id: g*100000 + i, outside: true}
							d := v.delay
							if d == 0 {
								d = 10 * time.Microsecond
							}
							randomPlan(rng, c, d, true, true)
							ctx := context.WithValue(context.Background(), callKey{}, c)
							runOne(h, c, path, ctx)
							if v.observe && c.started[2].Load() > 0 {
								c.fail("observe mode sent copy 2")
							}
							if v.events {
								c.mu.Lock()
								n, e := c.doneEvents, c.doneEvent
								c.mu.Unlock()
								sent := 0
								for k := 1; k <= MaxHedgedAttempts; k++ {
									if c.started[k].Load() > 0 {
										sent = k
									}
								}
								panicked := false
								for k := 1; k <= sent; k++ {
									panicked = panicked || c.plan[k].panics
								}
								if !panicked && (n != 1 || e.Attempt != sent) {
									c.fail("%d EventHedgeDone, last %+v; %d copies sent", n, e, sent)
								}
							}
							for _, b := range c.bad {
								if failures.Add(1) < 20 {
									t.Error(b)
								}
							}
						}
					}()
				}
				wg.Wait()
				goleak.VerifyNone(t, ignore)
			})
		}
	}
}

// In a synctest bubble: copies answer at exactly hedgingDelay multiples, so
// that every timer fires at the instant a copy answers, with calls
// concurrent on one Hedge (its pooled states). Deterministic in time; the
// scheduler picks which of the simultaneous events comes first.
func TestHedgeSimultaneousInABubble(t *testing.T) {
	for _, path := range []string{"fn", "copies"} {
		t.Run(path, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const delay = 10 * time.Millisecond
				h := stressHedge(t, 3, delay)
				var wg sync.WaitGroup
				var failures atomic.Int32
				for g := range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(g), 42))
						for i := range 200 {
							c := &stressCall{id: g*100000 + i, outside: false}
							for n := 1; n <= MaxHedgedAttempts; n++ {
								c.plan[n] = copyPlan{wait: delay * time.Duration(rng.IntN(4))}
								switch rng.IntN(4) {
								case 0:
									c.plan[n].err = sErrNonFatal
								case 1:
									c.plan[n].err = sErrFatal
								case 2:
									c.plan[n].err = &sPushback{d: time.Duration(rng.IntN(3)-1) * delay}
								}
								c.plan[n].panics = rng.IntN(50) == 0
							}
							runOne(h, c, path, context.Background())
							for _, b := range c.bad {
								if failures.Add(1) < 20 {
									t.Error(b)
								}
							}
						}
					}()
				}
				wg.Wait()
			})
		})
	}
}
