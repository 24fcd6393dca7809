package retry

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/meshless/meshless/resilience"
)

// Hedge is gRPC's hedging (gRFC A6 hedgingPolicy) for any call: it sends a
// copy of the call, and while no answer has come, another copy every
// hedgingDelay, up to maxAttempts copies. The first answer that is a
// success or a fatal error wins; the other copies are cancelled at once,
// and the call returns only when each of them has returned, so that every
// permit they hold is back and no copy outlives the call. A non-fatal
// failure sends the next copy at once, or after the server's pushback; a
// negative pushback, a [resilience.Rejection] (a local policy refused a
// copy) or a spent [Throttle] send no more copies. Copies run concurrently,
// each with its own context, a child of the caller's: none outlives the
// caller's deadline.
//
// Hedge only idempotent calls: a copy that loses may still have done its
// work at the server.
//
// Each copy is one attempt: put the policies that apply per attempt (a
// breaker, a rate limiter, a bulkhead, an attempt timeout) inside it — as
// the rest of a [resilience.Chain] after it, or in the function it runs —
// and the ones that apply per call (an overall timeout) outside.
//
// A Hedge is safe for concurrent use. It allocates per hedged call (a
// channel, a context, a goroutine per copy).
type Hedge struct {
	cfg hedgeConfig
	rec resilience.Recorder
}

var _ resilience.Policy = (*Hedge)(nil)

// NewHedge returns a hedging policy configured by opts, with the defaults
// of docs/hedging.md for everything not set. An invalid option is an error
// that names it; NewHedge never panics.
func NewHedge(opts ...HedgeOption) (*Hedge, error) {
	cfg := hedgeConfig{
		HedgeConfig: DefaultHedgeConfig(),
		nonFatal:    func(error) bool { return false },
		clock:       resilience.SystemClock(),
	}
	for _, o := range opts {
		if o != nil {
			o.applyHedge(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("retry: hedging: %w", err)
	}
	h := &Hedge{cfg: cfg}
	h.rec = resilience.Attach(cfg.observer, resilience.Source{Kind: resilience.KindHedging, Name: cfg.Name})
	return h, nil
}

// Config returns the policy's settings.
func (h *Hedge) Config() HedgeConfig { return h.cfg.HedgeConfig }

// Apply runs the rest of the chain once per copy, as a [resilience.Policy].
func (h *Hedge) Apply(ctx context.Context, next resilience.Next) error {
	_, err := h.Run(ctx, func(ctx context.Context, _ int) error { return next.Run(ctx) })
	return err
}

// Execute runs fn hedged and returns the winning answer's error, or the
// last non-fatal failure when no answer won. fn runs concurrently, once per
// copy: it must be safe for that, and must return when its context ends.
func (h *Hedge) Execute(ctx context.Context, fn func(context.Context) error) error {
	_, err := h.Run(ctx, func(ctx context.Context, _ int) error { return fn(ctx) })
	return err
}

// Run is [Hedge.Execute] for calls whose copies each need their own result
// (a reply message): fn gets the copy's number, from 1, and Run returns the
// number of the copy whose answer won, or 0 when none did. Run returns
// after every copy has returned, so the caller may read each copy's result.
// A panic in a copy cancels the others and goes on up from Run, once they
// have returned.
func (h *Hedge) Run(ctx context.Context, fn func(ctx context.Context, copy int) error) (winner int, err error) {
	run := hedgeRun{h: h, fn: fn, results: make(chan hedgeResult, h.cfg.MaxAttempts)}
	run.ctx, run.cancel = context.WithCancel(ctx)
	defer func() {
		run.cancel()
		run.wg.Wait()
		run.stopTimer()
	}()
	winner, err = run.loop(ctx)
	if h.rec != nil {
		h.rec.Record(ctx, resilience.Event{Type: resilience.EventHedgeDone, Attempt: run.sent, Winner: winner, Err: err})
	}
	return winner, err
}

type hedgeResult struct {
	copy     int
	err      error
	panicked bool
	panicVal any
}

// hedgeRun is one hedged call.
type hedgeRun struct {
	h       *Hedge
	fn      func(context.Context, int) error
	ctx     context.Context // the copies' context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	results chan hedgeResult
	sent    int
	pending int
	lastAt  time.Time
	timer   resilience.Timer
	stopped bool // no more copies: pushback, a rejection, the caller's context
}

func (r *hedgeRun) loop(caller context.Context) (int, error) {
	var lastErr error // the last non-fatal answer, or the last rejection
	r.send(nil)
	for {
		var fire <-chan time.Time
		if r.timer != nil {
			fire = r.timer.C()
		}
		var done <-chan struct{}
		if !r.stopped {
			done = caller.Done()
		}
		select {
		case res := <-r.results:
			r.pending--
			if res.panicked {
				r.cancel()
				r.wg.Wait()
				panic(res.panicVal)
			}
			if w, err, over := r.answer(caller, res, &lastErr); over {
				return w, err
			}
		case <-fire:
			r.timer = nil
			if r.canSend() {
				r.send(nil)
			}
		case <-done:
			r.stopped = true
			r.stopTimer()
		}
		if r.pending == 0 && r.timer == nil && !r.canSend() {
			if caller.Err() != nil && lastErr == nil {
				return 0, caller.Err()
			}
			return 0, lastErr
		}
	}
}

// answer takes a copy's result. It reports over when the call is decided.
func (r *hedgeRun) answer(caller context.Context, res hedgeResult, lastErr *error) (int, error, bool) {
	c := &r.h.cfg
	switch {
	case res.err == nil:
		if c.throttle != nil {
			c.throttle.success()
		}
		return res.copy, nil, true
	case resilience.IsRejection(res.err):
		// Refused here: the copy never left. Send no more, and keep
		// waiting for the copies in flight.
		r.stopped = true
		r.stopTimer()
		if *lastErr == nil || resilience.IsRejection(*lastErr) {
			*lastErr = res.err
		}
		return 0, nil, false
	case caller.Err() != nil:
		// The caller's context ended: the copies' errors say only that.
		r.stopped = true
		if *lastErr == nil || resilience.IsRejection(*lastErr) {
			*lastErr = res.err
		}
		return 0, nil, false
	case !c.nonFatal(res.err):
		return res.copy, res.err, true // a fatal answer wins
	}
	if c.throttle != nil {
		c.throttle.failure()
	}
	*lastErr = res.err
	if c.pushback != nil {
		if d, ok := c.pushback(res.err); ok {
			r.stopTimer()
			if d < 0 {
				r.stopped = true // the server asks for no more copies
			} else if r.canSend() {
				r.timer = c.clock.NewTimer(d)
			}
			return 0, nil, false
		}
	}
	if r.canSend() {
		r.stopTimer()
		r.send(res.err)
	}
	return 0, nil, false
}

// canSend reports whether another copy may go now.
func (r *hedgeRun) canSend() bool {
	c := &r.h.cfg
	if r.stopped || r.sent >= c.MaxAttempts || r.ctx.Err() != nil {
		return false
	}
	return r.sent == 0 || c.throttle == nil || c.throttle.allow()
}

// send starts the next copy and arms the delay before the one after it.
// cause is the non-fatal failure that sends it at once, if any.
func (r *hedgeRun) send(cause error) {
	c := &r.h.cfg
	n := r.sent + 1
	now := c.clock.Now()
	if n > 1 && r.h.rec != nil {
		r.h.rec.Record(r.ctx, resilience.Event{Type: resilience.EventHedge, Attempt: n, Backoff: now.Sub(r.lastAt), Err: cause})
	}
	if n > 1 && c.observe {
		// Observe mode: the copy was decided and reported, and is not sent.
		r.stopped = true
		r.stopTimer()
		return
	}
	r.sent++
	r.pending++
	r.lastAt = now
	r.wg.Add(1)
	go r.copy(n)
	if n < c.MaxAttempts {
		if c.HedgingDelay == 0 {
			if r.canSend() {
				r.send(nil)
			}
			return
		}
		r.timer = c.clock.NewTimer(c.HedgingDelay)
	}
}

// copy runs one copy and reports its result, or its panic.
func (r *hedgeRun) copy(n int) {
	defer r.wg.Done()
	res := hedgeResult{copy: n, panicked: true}
	defer func() {
		if res.panicked {
			res.panicVal = recover()
		}
		r.results <- res // buffered for every copy: never blocks
	}()
	res.err = r.fn(r.ctx, n)
	res.panicked = false
}

func (r *hedgeRun) stopTimer() {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}
