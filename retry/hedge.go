package retry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/meshless/meshless/internal/hedgehooks"
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
// A Hedge is safe for concurrent use. Its first copy runs on the caller's
// goroutine under a timer; a call that sends no hedge allocates that timer
// alone (its state is reused; through meshless's engine, on the system
// clock, the timer too), and what concurrent copies need (a channel, a
// context, a goroutine per copy) is made only when a copy after the first
// is sent.
type Hedge struct {
	cfg hedgeConfig
	rec resilience.Recorder
	// system: the clock is the system clock, whose stopped timers may be
	// armed again by a later call (see resettable).
	system bool
	// runs are the states of calls that sent no hedge, reused: such a
	// call's state is given back once nothing can touch it (release).
	runs sync.Pool
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
	h := &Hedge{cfg: cfg, system: cfg.clock == resilience.SystemClock()}
	h.rec = resilience.Attach(cfg.observer, resilience.Source{Kind: resilience.KindHedging, Name: cfg.Name})
	return h, nil
}

// Config returns the policy's settings.
func (h *Hedge) Config() HedgeConfig { return h.cfg.HedgeConfig }

// Apply runs the rest of the chain once per copy, as a [resilience.Policy].
func (h *Hedge) Apply(ctx context.Context, next resilience.Next) error {
	_, err := h.Run(ctx, func(ctx context.Context, _ int) error {
		n := next // a copy per copy: next itself stays on Apply's stack
		return n.Run(ctx)
	})
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
//
// The first copy runs on the caller's goroutine, under a timer; the
// channel and the goroutines that the other copies need are made only when
// one is sent. A call whose first copy answers within hedgingDelay costs
// a cancellable context and a timer more than the copy itself.
func (h *Hedge) Run(ctx context.Context, fn func(ctx context.Context, copy int) error) (winner int, err error) {
	r := h.newRun(ctx)
	r.fn = fn
	r.ctx, r.cancel = context.WithCancel(ctx)
	ran := false
	defer r.panicked(&ran)
	winner, err = r.run()
	ran = true
	winner, err = r.done(winner, err)
	h.release(r)
	return winner, err
}

// runCopies is Run with copies that cancel their first copy themselves:
// the copies' context is made only when a copy after the first is sent.
func (h *Hedge) runCopies(ctx context.Context, c hedgehooks.Copies) (int, error) {
	r := h.newRun(ctx)
	r.copies = c
	ran := false
	defer r.panicked(&ran)
	winner, err := r.run()
	ran = true
	winner, err = r.done(winner, err)
	h.release(r)
	return winner, err
}

// newRun returns the state of a call under ctx: a released one, or a new
// one with the function its first timer runs (made once per state).
func (h *Hedge) newRun(ctx context.Context) *hedgeRun {
	r, _ := h.runs.Get().(*hedgeRun)
	if r == nil {
		r = &hedgeRun{h: h}
		r.fireFn = r.fire
	}
	r.caller = ctx
	return r
}

// release gives r back for another call when nothing can touch it any
// more: its call sent no copy after the first (no goroutine, no loop
// state) and stopped its first timer before it fired. A timer that fired
// runs fire, which reads r, maybe after the call has returned; such a
// state, and a hedged call's, is left to the collector.
func (h *Hedge) release(r *hedgeRun) {
	if !r.reusable {
		return
	}
	var first resilience.Timer
	if _, ok := r.first.(resettable); ok && r.keepFirst {
		first = r.first
	}
	*r = hedgeRun{h: h, fireFn: r.fireFn, first: first}
	h.runs.Put(r)
}

// resettable is a [resilience.Timer] that can be armed again (the system
// clock's): a reused state's first timer, stopped before it fired, is
// armed again for the next call instead of made anew, which saves a call
// that sends no hedge an allocation (112 B) and about 120 ns at the median
// (docs/benchmarks/hedging.md).
//
// Only a timer made and armed outside a testing/synctest bubble is kept,
// and only such a call arms it again: the runtime ends the program when a
// bubble's timer is armed outside it, and a timer from outside armed inside
// a bubble would fire on the bubble's clock at the real clock's time.
// [outsideBubble] tells, from the engine's reading of the call's start.
type resettable interface {
	Reset(d time.Duration) bool
}

// outsideBubble reports whether the call of copies c is known to run
// outside a testing/synctest bubble: c is the engine's, and read the call's
// start with time.Now, whose readings carry the monotonic clock outside a
// bubble and not inside one. A call run through Hedge.Run is not known to.
func outsideBubble(c hedgehooks.Copies) bool {
	o, ok := c.(hedgehooks.OutsideBubble)
	return ok && o.OutsideBubble()
}

func init() {
	hedgehooks.Run = func(h any, ctx context.Context, c hedgehooks.Copies) (int, error) {
		return h.(*Hedge).runCopies(ctx, c)
	}
}

type hedgeResult struct {
	copy     int
	err      error
	panicked bool
	panicVal any
}

// hedgeRun is one hedged call. Its first copy runs on the caller's
// goroutine, under a timer (first) that fires after hedgingDelay. Until
// that timer has sent a hedge, the caller's goroutine owns the run; once it
// has (hedged), the timer's goroutine coordinates the copies, the first
// one's result reaching it on the channel like the others', until the call
// is decided, and the caller's goroutine takes the run back after that.
// When the first copy answers first (firstDone), the caller's goroutine
// coordinates what follows (a non-fatal answer sends the next copy).
type hedgeRun struct {
	h       *Hedge
	fn      func(context.Context, int) error
	copies  hedgehooks.Copies // instead of fn: the first copy cancels itself
	caller  context.Context
	ctx     context.Context // the copies' context; with copies, made with the second copy
	cancel  context.CancelFunc
	sent    int
	pending int
	lastAt  time.Time // when the last copy was sent; read only for an observer
	stopped bool      // no more copies: pushback, a rejection, the caller's context
	// firstOut: with copies, the first copy runs out of the caller's
	// goroutine (hedged, or every copy at once): CancelFirst ends it.
	firstOut bool
	told     bool // cancelCopies told the copies the call is decided (hedgehooks.Decider)
	l        *hedgeLoop

	mu        sync.Mutex // orders the first timer's firing and the first copy's end
	firstDone bool       // the first copy ended before a hedge was sent
	hedged    bool       // the first timer sent a hedge: its goroutine coordinates
	// first is the timer that sends the first hedge. A released state keeps
	// its last call's, stopped before it fired, when it is resettable and
	// was made and armed outside a bubble (keepFirst): the next call outside
	// one arms it again.
	first     resilience.Timer
	keepFirst bool
	fireFn    func() // fire, the first timer's function, made with the state
	// reusable: the call sent no copy after the first and its first timer
	// was stopped before it fired (Hedge.release).
	reusable bool
}

// hedgeLoop is the state of a run that sends more than its first copy,
// made when it does.
type hedgeLoop struct {
	wg      sync.WaitGroup   // the copies that run in goroutines of their own
	results chan hedgeResult // every copy's, but a first copy's that ended first
	lastErr error            // the last non-fatal answer, or the last rejection
	timer   resilience.Timer // the delay before the next copy
	over    chan struct{}    // closed when the first timer's goroutine has decided
	out     hedgeOutcome     // its decision
}

// hedgeOutcome is the decision of a coordinating timer's goroutine.
type hedgeOutcome struct {
	winner   int
	err      error
	panicked bool
	panicVal any
}

// loopState returns the run's loop state, made on first use.
func (r *hedgeRun) loopState() *hedgeLoop {
	if r.l == nil {
		r.l = &hedgeLoop{results: make(chan hedgeResult, r.h.cfg.MaxAttempts)}
		if r.ctx == nil {
			r.ctx, r.cancel = context.WithCancel(r.caller)
		}
	}
	return r.l
}

// run runs the call and returns its decision once every copy has returned.
func (r *hedgeRun) run() (int, error) {
	defer func() {
		r.cancelCopies()
		if r.l != nil {
			r.l.wg.Wait()
			r.stopTimer()
		}
	}()
	c := &r.h.cfg
	if c.HedgingDelay == 0 { // every copy at once, each in its goroutine
		return r.loop()
	}
	r.sent, r.pending = 1, 1
	if r.h.rec != nil {
		r.lastAt = c.clock.Now()
	}
	r.keepFirst = r.h.system && outsideBubble(r.copies)
	if t, ok := r.first.(resettable); ok && r.keepFirst { // a reused state's, stopped before it fired
		t.Reset(c.HedgingDelay)
	} else {
		r.first = c.clock.AfterFunc(c.HedgingDelay, r.fireFn)
	}
	res, hedged := r.runFirst()
	if hedged {
		l := r.l         // made by fire before it set hedged
		l.results <- res // buffered for every copy: never blocks
		<-l.over
		if l.out.panicked {
			l.wg.Wait()
			panic(l.out.panicVal)
		}
		return l.out.winner, l.out.err
	}
	r.pending--
	if w, err, over := r.answer(res); over {
		r.reusable = r.reusable && r.l == nil
		return w, err
	}
	r.reusable = false
	return r.loop()
}

// runFirst runs the first copy on the caller's goroutine and reports
// whether a hedge was sent while it ran. A panic goes on up as it is when
// none was; otherwise it is recovered, for the coordinating goroutine.
func (r *hedgeRun) runFirst() (res hedgeResult, hedged bool) {
	res = hedgeResult{copy: 1, panicked: true}
	defer func() {
		r.mu.Lock()
		hedged = r.hedged
		r.firstDone = !hedged
		r.mu.Unlock()
		if !hedged {
			r.reusable = r.first.Stop() // fire will not run
			return
		}
		if res.panicked {
			if res.panicVal = recover(); res.panicVal == nil {
				// runtime.Goexit (a test's t.FailNow in the copy): the
				// goroutine goes on exiting and run never sends the
				// result, so it is sent here, as an answer that decides
				// the call, for the coordinating goroutine to end.
				r.l.results <- hedgeResult{copy: 1, err: errFirstCopyExited}
			}
		}
	}()
	if r.copies != nil {
		res.err = r.copies.Copy(r.caller, 1)
	} else {
		res.err = r.fn(r.ctx, 1)
	}
	res.panicked = false
	return res, false
}

// errFirstCopyExited is the first copy's answer when its goroutine exited
// (runtime.Goexit) after a hedge was sent: the call is decided, so that
// the goroutine coordinating the copies ends.
var errFirstCopyExited = errors.New("retry: hedging: the first copy's goroutine exited")

// fire is the end of the first hedgingDelay, in the timer's goroutine:
// unless the first copy has ended or no copy may go, it sends the second
// copy and coordinates the copies until the call is decided — in a
// goroutine of its own on a clock other than the system clock, whose
// AfterFunc may run fire in the goroutine that moves the clock on (a
// test's clock, resiliencetest.Clock: coordinating there would stop the
// clock, or the first copy that moved it, until the call is decided).
func (r *hedgeRun) fire() {
	r.mu.Lock()
	if r.firstDone || !r.canSend() {
		r.mu.Unlock()
		return
	}
	l := r.loopState()
	l.over = make(chan struct{})
	r.hedged, r.firstOut = true, true
	r.mu.Unlock()
	if r.h.system {
		r.coordinate(l)
	} else {
		go r.coordinate(l)
	}
}

// coordinate sends the second copy and coordinates the copies until the
// call is decided, then ends the others and tells the caller's goroutine.
func (r *hedgeRun) coordinate(l *hedgeLoop) {
	decided := false
	defer func() {
		if !decided {
			// A copy's panic (loop raises it), or the policy's own: the
			// caller's goroutine raises it once every copy has returned.
			l.out.panicked, l.out.panicVal = true, recover()
		}
		r.cancelCopies() // the other copies, the first among them, end now
		close(l.over)
	}()
	r.send(nil)
	l.out.winner, l.out.err = r.loop()
	decided = true
}

// loop coordinates the copies until the call is decided: it sends the
// first copy when none was sent, then takes each answer and each timer's
// end in turn.
func (r *hedgeRun) loop() (int, error) {
	l := r.loopState()
	if r.sent == 0 {
		r.send(nil)
	}
	for r.pending > 0 || l.timer != nil || r.canSend() {
		var fire <-chan time.Time
		if l.timer != nil {
			fire = l.timer.C()
		}
		var done <-chan struct{}
		if !r.stopped {
			done = r.caller.Done()
		}
		select {
		case res := <-l.results:
			r.pending--
			if res.panicked {
				r.cancelCopies()
				l.wg.Wait()
				panic(res.panicVal)
			}
			if w, err, over := r.answer(res); over {
				return w, err
			}
		case <-fire:
			l.timer = nil
			if r.canSend() {
				r.send(nil)
			}
		case <-done:
			r.stopped = true
			r.stopTimer()
		}
	}
	if r.caller.Err() != nil && l.lastErr == nil {
		return 0, r.caller.Err()
	}
	return 0, l.lastErr
}

// answer takes a copy's result. It reports over when the call is decided.
func (r *hedgeRun) answer(res hedgeResult) (int, error, bool) {
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
		if l := r.loopState(); l.lastErr == nil || resilience.IsRejection(l.lastErr) {
			l.lastErr = res.err
		}
		return 0, nil, false
	case r.caller.Err() != nil:
		// The caller's context ended: the copies' errors say only that.
		r.stopped = true
		if l := r.loopState(); l.lastErr == nil || resilience.IsRejection(l.lastErr) {
			l.lastErr = res.err
		}
		return 0, nil, false
	case !c.nonFatal(res.err):
		return res.copy, res.err, true // a fatal answer wins
	}
	if c.throttle != nil {
		c.throttle.failure()
	}
	l := r.loopState()
	l.lastErr = res.err
	if c.pushback != nil {
		if d, ok := c.pushback(res.err); ok {
			r.stopTimer()
			if d < 0 || d > maxPushback || r.waitsPast(d) {
				// The server asks for no more copies, for none before the
				// call's deadline or within maxPushback: its answer is the
				// call's, at once.
				r.stopped = true
			} else if d == 0 && r.canSend() {
				r.send(res.err) // at once: a test's clock fires a timer of 0 only when moved
			} else if r.canSend() {
				l.timer = c.clock.NewTimer(d)
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

// canSend reports whether another copy may go now: not past the call's
// deadline, where it would end at once.
func (r *hedgeRun) canSend() bool {
	c := &r.h.cfg
	ctx := r.ctx
	if ctx == nil {
		ctx = r.caller // nothing cancelled it: the call is not decided
	}
	if r.stopped || r.sent >= c.MaxAttempts || ctx.Err() != nil || r.waitsPast(0) {
		return false
	}
	return r.sent == 0 || c.throttle == nil || c.throttle.allow()
}

// waitsPast reports whether a wait of d from now reaches the call's
// deadline: the earlier of its caller's context's and, when the copies
// have one of their own (hedgehooks.Deadliner: meshless's overall
// timeout), theirs. Deadlines are real time (a synctest bubble's in
// tests), whatever clock the policy's timers run on, as for retries.
func (r *hedgeRun) waitsPast(d time.Duration) bool {
	dl, ok := r.caller.Deadline()
	if cd, is := r.copies.(hedgehooks.Deadliner); is {
		if t, has := cd.Deadline(); has && (!ok || t.Before(dl)) {
			dl, ok = t, true
		}
	}
	return ok && time.Until(dl) <= d
}

// send starts the next copy in a goroutine of its own and arms the delay
// before the one after it. cause is the non-fatal failure that sends it at
// once, if any.
func (r *hedgeRun) send(cause error) {
	c := &r.h.cfg
	n := r.sent + 1
	var now time.Time
	if r.h.rec != nil {
		now = c.clock.Now()
		if n > 1 {
			r.h.rec.Record(r.caller, resilience.Event{Type: resilience.EventHedge, Attempt: n, Backoff: now.Sub(r.lastAt), Err: cause})
		}
	}
	if n > 1 && c.observe {
		// Observe mode: the copy was decided and reported, and is not sent.
		r.stopped = true
		r.stopTimer()
		return
	}
	l := r.loopState()
	r.firstOut = r.firstOut || n == 1
	r.sent++
	r.pending++
	r.lastAt = now
	l.wg.Add(1)
	go r.copy(n)
	if n < c.MaxAttempts {
		if c.HedgingDelay == 0 {
			if r.canSend() {
				r.send(nil)
			}
			return
		}
		l.timer = c.clock.NewTimer(c.HedgingDelay)
	}
}

// copy runs one copy in its own goroutine and reports its result, or its
// panic.
func (r *hedgeRun) copy(n int) {
	l := r.l
	defer l.wg.Done()
	res := hedgeResult{copy: n, panicked: true}
	defer func() {
		if res.panicked {
			res.panicVal = recover()
		}
		l.results <- res // buffered for every copy: never blocks
	}()
	if r.copies != nil {
		ctx := r.ctx
		if n == 1 {
			ctx = r.caller // the first copy cancels itself (CancelFirst)
		}
		res.err = r.copies.Copy(ctx, n)
	} else {
		res.err = r.fn(r.ctx, n)
	}
	res.panicked = false
}

func (r *hedgeRun) stopTimer() {
	if r.l != nil && r.l.timer != nil {
		r.l.timer.Stop()
		r.l.timer = nil
	}
}
