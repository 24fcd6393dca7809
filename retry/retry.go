package retry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/meshless/meshless/internal/retryhooks"
	"github.com/meshless/meshless/resilience"
)

// Retry is a retry policy with gRPC's semantics (gRFC A6): maxAttempts
// counts the first call; waits grow exponentially with jitter; a
// server-requested delay (pushback) overrides them; a shared [Throttle]
// stops retries during an outage. It never retries a
// [resilience.Rejection], never retries once the caller's context is done,
// and never sleeps a backoff that would not end before the context's
// deadline.
//
// A Retry is safe for concurrent use.
type Retry struct {
	cfg config
	rec resilience.Recorder
}

var _ resilience.Policy = (*Retry)(nil)

// New returns a retry policy configured by opts, with the defaults of
// docs/retry.md for everything not set. An invalid option is an error that
// names it; New never panics.
func New(opts ...Option) (*Retry, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("retry: %w", err)
	}
	if cfg.rand == nil {
		cfg.rand = rand.Float64
	}
	r := &Retry{cfg: cfg}
	r.rec = resilience.Attach(cfg.observer, resilience.Source{Kind: resilience.KindRetry, Name: cfg.Name})
	return r, nil
}

// MaxAttempts returns the most attempts a call gets, the first included.
func (r *Retry) MaxAttempts() int { return r.cfg.MaxAttempts }

// Apply runs next, retrying as configured. It is the [resilience.Policy]
// form of [Retry.Execute]. The first attempt starts when the retry is
// entered: the time the policy outside passed ([resilience.Next.Entered])
// goes on to it, and not to the attempts after a backoff.
func (r *Retry) Apply(ctx context.Context, next resilience.Next) error {
	entered, _ := next.Entered()
	err := next.RunAt(ctx, entered)
	if err == nil && r.rec == nil && r.cfg.throttle == nil {
		return nil // Next's success, without a call: nothing to count or report
	}
	a := r.Begin(ctx)
	for {
		wait, again := a.Next(err)
		if !again || !a.Wait(wait) {
			return err
		}
		err = next.RunAt(ctx, time.Time{})
	}
}

// Execute calls fn, and again after a backoff while its error is retryable
// and attempts, context, deadline and throttle allow. It returns the last
// attempt's error unchanged. When the first attempt succeeds it allocates
// nothing.
func (r *Retry) Execute(ctx context.Context, fn func(context.Context) error) error {
	a := r.Begin(ctx)
	for {
		err := fn(ctx)
		if err == nil && r.rec == nil && r.cfg.throttle == nil {
			return nil // as in Apply
		}
		wait, again := a.Next(err)
		if !again || !a.Wait(wait) {
			return err
		}
	}
}

// Attempts is the retry state of one logical call, for callers that cannot
// hand the policy a function to call again, such as a gRPC stream that
// decides to retry inside RecvMsg. Begin it, report each attempt's result to
// Next, and Wait out the backoff it returns before the next attempt:
//
//	a := r.Begin(ctx)
//	for {
//		err := attempt(ctx)
//		wait, again := a.Next(err)
//		if !again || !a.Wait(wait) {
//			return err
//		}
//	}
//
// An Attempts is a value used by one goroutine at a time.
type Attempts struct {
	r             *Retry
	ctx           context.Context
	deadline      time.Time // the call's own, when its context does not carry it
	n             int       // attempts made
	sincePushback int       // retries since the last pushback: the backoff exponent
	lastErr       error
	over          bool
}

// Begin starts a logical call.
func (r *Retry) Begin(ctx context.Context) Attempts { return Attempts{r: r, ctx: ctx} }

// BeginWithDeadline starts a logical call that must end by deadline,
// although ctx does not carry it (a caller that applies an overall timeout
// to each attempt's context instead of the call's): no backoff that would
// not end before it is slept, as for a deadline of ctx.
func (r *Retry) BeginWithDeadline(ctx context.Context, deadline time.Time) Attempts {
	return Attempts{r: r, ctx: ctx, deadline: deadline}
}

// BeginInto is [Retry.BeginWithDeadline] into a, a zero Attempts (a zero
// deadline is none, as for [Retry.Begin]): a caller that keeps its
// Attempts in place saves building one and copying it.
func (r *Retry) BeginInto(a *Attempts, ctx context.Context, deadline time.Time) {
	a.r, a.ctx, a.deadline = r, ctx, deadline
}

// Attempt returns the number of attempts reported so far.
func (a *Attempts) Attempt() int { return a.n }

// Next, finish and done are together: a call that succeeds runs the three
// (see ../internal/engine/callpath.go).

// Next reports the result of the attempt just made. It returns true and the
// wait before the next attempt when the policy retries; false when the call
// is over (it is then reported to the observer as done).
func (a *Attempts) Next(err error) (time.Duration, bool) {
	r, c := a.r, &a.r.cfg
	if a.over {
		return 0, false
	}
	a.n++
	a.lastErr = err
	if r.rec != nil {
		r.rec.Record(a.ctx, resilience.Event{Type: resilience.EventAttempt, Attempt: a.n, Err: err, Outcome: c.classify(err)})
	}
	if err == nil {
		if c.throttle != nil {
			c.throttle.success()
		}
		a.finish(nil, ReasonNone)
		return 0, false
	}
	reason, wait := r.next(a.ctx, a.deadline, a.n, err, &a.sincePushback)
	if reason != ReasonNone {
		a.finish(err, reason)
		return 0, false
	}
	if r.rec != nil {
		r.rec.Record(a.ctx, resilience.Event{Type: resilience.EventRetry, Attempt: a.n + 1, Backoff: wait, Err: err})
	}
	if c.observe {
		// Observe mode: the retry was decided and reported, and is not made.
		a.finish(err, ReasonObserved)
		return 0, false
	}
	return wait, true
}

func (a *Attempts) finish(err error, reason Reason) {
	a.over = true
	if a.r.rec != nil {
		a.r.done(a.ctx, a.n, err, reason)
	}
}

func (r *Retry) done(ctx context.Context, attempts int, err error, reason Reason) {
	if r.rec != nil {
		r.rec.Record(ctx, resilience.Event{
			Type: resilience.EventRetryDone, Attempt: attempts, Err: err,
			Outcome: r.cfg.classify(err), Reason: reason,
		})
	}
}

// Done reports the result of an attempt that cannot be retried whatever it
// says (a stream that has committed: it delivered a response, or its sent
// messages outgrew the replay buffer) and ends the call. The throttle still
// counts it as [Attempts.Next] would: a retryable failure, or a pushback that
// says stop, takes a token; a success gives some back.
func (a *Attempts) Done(err error) {
	r, c := a.r, &a.r.cfg
	if a.over {
		return
	}
	a.n++
	a.lastErr = err
	if r.rec != nil {
		r.rec.Record(a.ctx, resilience.Event{Type: resilience.EventAttempt, Attempt: a.n, Err: err, Outcome: c.classify(err)})
	}
	if err == nil {
		if c.throttle != nil {
			c.throttle.success()
		}
		a.finish(nil, ReasonNone)
		return
	}
	switch reason, _ := r.verdict(a.ctx, err); reason {
	case ReasonNone:
		a.finish(err, ReasonCommitted)
	case ReasonPushback:
		a.finish(err, reason)
	default:
		a.finish(err, ReasonNotRetryable)
	}
}

// Wait sleeps d on the policy's clock. It returns false, and reports the call
// over, if the context ends first.
func (a *Attempts) Wait(d time.Duration) bool { return a.wait(d, false) }

// wait is Wait; ctxErr: the call the context ends is over with the
// context's error, not the last attempt's (retryhooks.WaitOrEnd).
func (a *Attempts) wait(d time.Duration, ctxErr bool) bool {
	if a.r.sleep(a.ctx, d) {
		return true
	}
	err := a.lastErr
	if ctxErr {
		err = a.ctx.Err()
	}
	a.finish(err, ReasonContextDone)
	return false
}

func init() {
	retryhooks.WaitOrEnd = func(a any, d time.Duration) bool { return a.(*Attempts).wait(d, true) }
	retryhooks.Stop = func(a any, err error) {
		if at := a.(*Attempts); !at.over {
			at.finish(err, ReasonNotRetryable)
		}
	}
}

// verdict judges a failed attempt's error before the attempt count and the
// throttle's level are looked at, in gRFC A6's order, and moves the throttle:
// it returns the reason to stop (no token taken for a rejection, a done
// context or an error that is not retryable; one taken for a pushback that
// says stop), or ReasonNone, one token taken, and the server's pushback
// delay when it sent one.
func (r *Retry) verdict(ctx context.Context, err error) (Reason, pushback) {
	c := &r.cfg
	switch {
	case resilience.IsRejection(err):
		return ReasonRejected, pushback{} // local refusals take no token either
	case ctx.Err() != nil:
		return ReasonContextDone, pushback{}
	}
	var pb pushback
	if c.pushback != nil {
		pb.delay, pb.set = c.pushback(err)
	}
	if pb.set && pb.delay < 0 {
		// A6: a pushback that says not to retry counts as a failure,
		// whatever the code (a pushback past maxPushback, which is not
		// waited either, is a retryable failure's: see next).
		if c.throttle != nil {
			c.throttle.failure()
		}
		return ReasonPushback, pb
	}
	if !c.retryable(err) {
		return ReasonNotRetryable, pb
	}
	if c.throttle != nil {
		c.throttle.failure()
	}
	return ReasonNone, pb
}

type pushback struct {
	delay time.Duration
	set   bool
}

// maxPushback bounds a server-requested wait (grpc-retry-pushback-ms, an
// HTTP Retry-After): a longer one is not waited, whether or not the call has
// a deadline, and the call ends at once with the server's answer (reason
// pushback), as a wait past the deadline does. Retrying sooner would defy
// the server; waiting what it says, up to almost 25 days for gRFC A6's
// largest pushback and without end for a Retry-After, would hold the caller
// as a hang does. 300s is Envoy's default for
// rate_limited_retry_back_off.max_interval, past which it discards the
// header's interval.
const maxPushback = 300 * time.Second

// next decides whether to retry after attempt failed with err: it returns
// the reason to stop, or ReasonNone and the wait before the next attempt.
func (r *Retry) next(ctx context.Context, deadline time.Time, attempt int, err error, sincePushback *int) (Reason, time.Duration) {
	c := &r.cfg
	reason, pb := r.verdict(ctx, err)
	if reason != ReasonNone {
		return reason, 0
	}
	if attempt >= c.MaxAttempts {
		return ReasonMaxAttempts, 0
	}
	if c.throttle != nil && !c.throttle.allow() {
		return ReasonThrottled, 0
	}
	var wait time.Duration
	if pb.set {
		if pb.delay > maxPushback {
			return ReasonPushback, 0
		}
		wait = pb.delay
		*sincePushback = 0
	} else {
		wait = r.backoff(*sincePushback)
		*sincePushback++
	}
	// Deadlines are real time (a synctest bubble's in tests), whatever clock
	// the backoff waits on.
	if dl, ok := ctx.Deadline(); ok && (deadline.IsZero() || dl.Before(deadline)) {
		deadline = dl
	}
	if !deadline.IsZero() && time.Until(deadline) <= wait {
		return ReasonDeadline, 0
	}
	return ReasonNone, wait
}

// backoff returns the wait before retry n (0 for the first retry):
// min(initialBackoff × multiplier^n, maxBackoff), spread by the jitter, and
// never above maxBackoff. Capping before the jitter, and drawing below the
// cap where it cuts the jitter's range, keeps waits spread at the cap, so
// clients that failed together do not retry in step.
func (r *Retry) backoff(n int) time.Duration {
	c := &r.cfg
	w := float64(c.InitialBackoff)
	for range n {
		w *= c.BackoffMultiplier
		if w >= float64(c.MaxBackoff) {
			w = float64(c.MaxBackoff)
			break
		}
	}
	if c.Jitter > 0 {
		// Uniform over [w(1-j), min(w(1+j), max)]: below the cap, w ± j·w;
		// where the cap cuts the upper half, the draws spread over what is
		// left instead of piling up on maxBackoff (clients that failed
		// together would retry in step).
		lo := w * (1 - c.Jitter)
		hi := min(w*(1+c.Jitter), float64(c.MaxBackoff))
		w = lo + (hi-lo)*c.rand()
	}
	if w >= float64(c.MaxBackoff) { // in float: a Duration near its top would overflow
		return c.MaxBackoff
	}
	return time.Duration(w)
}

// sleep waits d on the policy's clock; it returns false if ctx ended first.
func (r *Retry) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := r.cfg.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// Config returns the policy's settings.
func (r *Retry) Config() Config { return r.cfg.Config }
