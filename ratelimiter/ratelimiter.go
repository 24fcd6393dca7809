package ratelimiter

import (
	"context"
	"fmt"
	"time"

	fsratelimiter "github.com/failsafe-go/failsafe-go/ratelimiter"

	"github.com/meshless/meshless/resilience"
)

// Limiter admits at most limitForPeriod calls per limitRefreshPeriod, all at
// once ([Bursty]) or evenly spaced ([Smooth]). A bursty limiter that does not
// wait keeps its permits in per-processor shards of its own, so that calls on
// different cores share nothing; a smooth one, or one that waits, uses
// failsafe-go's rate limiter. It is safe for concurrent use.
type Limiter struct {
	cfg config
	sh  *shards                        // a bursty limiter's that does not wait
	rl  fsratelimiter.RateLimiter[any] // otherwise
	rec resilience.Recorder
	// limited is the rejection of a call that found the period's permits
	// spent, shared by every such rejection.
	limited *LimitedError
}

// New returns a rate limiter configured by opts, with the defaults of
// docs/ratelimiter.md for everything not set: 50 calls per second, bursty,
// no wait. An invalid option is an error that names it (a
// *[resilience.OptionError] per problem, joined); New never panics.
//
// Periods are counted from the limiter's creation, with [time.Now]: the
// limiter's time is failsafe-go's, which takes no injected clock (tests run
// it in a testing/synctest bubble, where time.Now is fake).
func New(opts ...Option) (*Limiter, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("ratelimiter: %w", err)
	}
	l := &Limiter{cfg: cfg}
	switch {
	case cfg.mode == Bursty && cfg.timeout == 0:
		l.sh = newShards(cfg.limit, cfg.period)
	case cfg.mode == Smooth:
		l.rl = fsratelimiter.NewSmooth[any](uint(cfg.limit), cfg.period)
	default:
		l.rl = fsratelimiter.NewBursty[any](uint(cfg.limit), cfg.period)
	}
	l.limited = &LimitedError{Name: cfg.name, LimitForPeriod: cfg.limit, LimitRefreshPeriod: cfg.period}
	l.rec = resilience.Attach(cfg.observer, resilience.Source{Kind: resilience.KindRateLimiter, Name: cfg.name})
	return l, nil
}

// Name returns the limiter's name.
func (l *Limiter) Name() string { return l.cfg.name }

// LimitForPeriod returns how many calls the limiter admits per period.
func (l *Limiter) LimitForPeriod() int { return l.cfg.limit }

// LimitRefreshPeriod returns the limiter's period.
func (l *Limiter) LimitRefreshPeriod() time.Duration { return l.cfg.period }

// TimeoutDuration returns how long a call may wait for a permit.
func (l *Limiter) TimeoutDuration() time.Duration { return l.cfg.timeout }

// Mode returns how the limiter spreads a period's permits.
func (l *Limiter) Mode() Mode { return l.cfg.mode }

// acquire asks the limiter to admit one call. It returns nil, or a
// *[LimitedError] (errors.Is [ErrLimited]) when the period's permits are
// spent and none would come free in time.
//
// When a permit is free, acquire takes it at once and does not look at ctx.
// When none is, a limiter with a timeoutDuration reserves the first permit
// that comes free within timeoutDuration — and, when ctx has a deadline,
// before that deadline — and waits for it; a call for which no permit comes
// free in time is rejected at once, without waiting and without spending
// one. Without a timeoutDuration, or for an observed context
// (resilience.Observe: observe mode never delays a call), it rejects at
// once. Waiters are served first
// come, first served.
//
// If ctx ends while the call waits (or has already ended when it would
// wait), the rejection wraps ctx.Err() as its Cause: errors.Is(err,
// context.Canceled) is then true too, and the error is still a
// [resilience.Rejection]. A call that stops waiting has spent its reserved
// permit all the same (failsafe-go cannot take a reservation back).
//
// acquire allocates nothing when it admits a call at once or rejects it at
// once; a call that waits allocates its timer.
func (l *Limiter) acquire(ctx context.Context) error {
	if l.sh != nil {
		if l.sh.tryAcquire() {
			if l.rec != nil {
				l.rec.Record(orBackground(ctx), resilience.Event{Type: resilience.EventAcquired})
			}
			return nil
		}
		return l.reject(ctx, l.limited, 0)
	}
	if l.rl.TryAcquirePermit() {
		if l.rec != nil {
			l.rec.Record(orBackground(ctx), resilience.Event{Type: resilience.EventAcquired})
		}
		return nil
	}
	if l.cfg.timeout == 0 || resilience.Observing(ctx) {
		return l.reject(ctx, l.limited, 0)
	}
	return l.acquireWaiting(ctx)
}

// waits reports whether a call may wait for its permit: a permit that
// is not free at once is reserved and waited for (timeoutDuration).
func (l *Limiter) waits() bool { return l.sh == nil && l.cfg.timeout != 0 }

// acquireWaiting reserves a permit that comes free within timeoutDuration
// (and before ctx's deadline) with failsafe-go's TryReservePermit, and waits
// for it.
func (l *Limiter) acquireWaiting(ctx context.Context) error {
	ctx = orBackground(ctx)
	if err := ctx.Err(); err != nil {
		return l.reject(ctx, l.withCause(err), 0)
	}
	maxWait := l.cfg.timeout
	// The clock is read after the deadline, as near the reservation as can
	// be: failsafe-go measures the wait it returns from its own reading, and
	// a permit due at the deadline would come too late.
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline {
		maxWait = max(min(maxWait, time.Until(dl)-1), 0)
	}
	wait := l.rl.TryReservePermit(maxWait)
	switch {
	case wait < 0:
		return l.reject(ctx, l.limited, 0)
	case wait == 0:
		l.admit(ctx, 0)
		return nil
	}
	// The permit falls due wait after failsafe-go's reading, at the latest
	// wait after this one.
	reserved := time.Now()
	if hasDeadline && !reserved.Add(wait).Before(dl) {
		// Held up between the two readings (its lock, the scheduler): the
		// permit is spent, but waiting for it would be in vain.
		l.refreshAt(wait)
		return l.reject(ctx, l.limited, 0)
	}
	timer := time.NewTimer(wait)
	select {
	case <-timer.C:
		l.refresh()
		l.admit(ctx, wait)
		return nil
	case <-ctx.Done():
		timer.Stop()
		waited := time.Since(reserved)
		l.refreshAt(wait - waited)
		return l.reject(ctx, l.withCause(ctx.Err()), waited)
	}
}

// refreshAt refreshes a bursty limiter after d, when a permit reserved and
// not waited for falls due: its period must still be seen to begin (see
// refresh).
func (l *Limiter) refreshAt(d time.Duration) {
	if l.cfg.mode == Bursty {
		time.AfterFunc(d, l.refresh)
	}
}

// refresh makes failsafe-go's bursty limiter roll over to the current
// period, without taking a permit, at the start of a period in which a
// reserved permit falls due. failsafe-go v0.9.8 pays a deficit of reserved
// permits back by adding limitForPeriod for every period elapsed since it
// last looked, without a cap: a limiter that lent permits of the next period
// to waiters and then went unused for k periods would admit a burst of up to
// k × limitForPeriod calls. Looking once in every period that a reservation
// reaches keeps each period's admissions within limitForPeriod.
func (l *Limiter) refresh() {
	if l.cfg.mode == Bursty {
		l.rl.TryAcquirePermits(0)
	}
}

func (l *Limiter) admit(ctx context.Context, waited time.Duration) {
	if l.rec != nil {
		l.rec.Record(ctx, resilience.Event{Type: resilience.EventAcquired, Duration: waited})
	}
}

func (l *Limiter) withCause(err error) *LimitedError {
	e := *l.limited
	e.Cause = err
	return &e
}

func (l *Limiter) reject(ctx context.Context, err *LimitedError, waited time.Duration) error {
	if l.rec != nil {
		l.rec.Record(orBackground(ctx), resilience.Event{Type: resilience.EventRejection, Duration: waited, Err: err})
	}
	return err
}

// orBackground returns ctx, or context.Background() for a nil ctx, so that
// recorders always get a context.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
