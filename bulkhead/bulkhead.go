package bulkhead

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	fsbulkhead "github.com/failsafe-go/failsafe-go/bulkhead"

	"github.com/meshless/meshless/internal/timely"
	"github.com/meshless/meshless/resilience"
)

// Bulkhead limits how many calls run at once. Its limit is fixed or
// adaptive (failsafe-go's adaptivelimiter, which moves the limit with the
// calls' latency). A fixed bulkhead that does not wait keeps its permits in
// per-processor shards of its own (slots), so that calls on different cores
// share nothing; one that waits uses failsafe-go's bulkhead, a semaphore
// whose waiters are woken by every permit given back. It is safe for
// concurrent use.
type Bulkhead struct {
	cfg config
	rec resilience.Recorder

	// Exactly one of slots, fixed and adaptive is set.
	slots    *slots
	fixed    fsbulkhead.Bulkhead[any]
	adaptive adaptivelimiter.AdaptiveLimiter[any]

	active atomic.Int64 // calls holding a permit of fixed or adaptive
	// full is the rejection of a call that found every permit taken, shared
	// by every such rejection; an adaptive bulkhead replaces it when its
	// limit has moved.
	full atomic.Pointer[FullError]
}

// New returns a bulkhead configured by opts, with the defaults of
// docs/bulkhead.md for everything not set: a fixed limit of 100 calls and no
// wait. An invalid option is an error that names it (a
// *[resilience.OptionError] per problem, joined); New never panics.
func New(opts ...Option) (*Bulkhead, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("bulkhead: %w", err)
	}
	b := &Bulkhead{cfg: cfg}
	if cfg.Adaptive {
		d := cfg.AdaptiveLimits.withDefaults()
		b.cfg.AdaptiveLimits = d
		b.adaptive = adaptivelimiter.NewBuilder[any]().
			WithLimits(uint(d.MinLimit), uint(d.MaxLimit), uint(d.InitialLimit)).
			Build()
	} else if cfg.MaxWaitDuration == 0 && cfg.MaxConcurrentCalls <= maxSlotsLimit {
		b.slots = newSlots(cfg.MaxConcurrentCalls)
	} else {
		b.fixed = fsbulkhead.New[any](uint(cfg.MaxConcurrentCalls))
	}
	b.full.Store(&FullError{Name: cfg.Name, Limit: b.Limit()})
	b.rec = resilience.Attach(cfg.observer, resilience.Source{
		Kind:     resilience.KindBulkhead,
		Name:     cfg.Name,
		Queues:   cfg.MaxWaitDuration > 0,
		Snapshot: b.snapshot,
	})
	return b, nil
}

// Name returns the bulkhead's name.
func (b *Bulkhead) Name() string { return b.cfg.Name }

// Limit returns how many calls may be in flight now: maxConcurrentCalls for
// a fixed bulkhead; the current limit of an adaptive one, which moves.
func (b *Bulkhead) Limit() int {
	if b.adaptive != nil {
		return b.adaptive.Limit()
	}
	return b.cfg.MaxConcurrentCalls
}

// Active returns how many calls hold a permit now. It can briefly exceed an
// adaptive bulkhead's Limit right after the limit was lowered: calls in
// flight are never interrupted, but no new call is admitted until Active
// is below the limit again.
func (b *Bulkhead) Active() int {
	if b.slots != nil {
		return b.slots.held()
	}
	return int(b.active.Load())
}

func (b *Bulkhead) snapshot() resilience.Snapshot {
	return resilience.Snapshot{Limit: b.Limit(), Active: b.Active()}
}

// permit is a bulkhead's admission of one call, for [Bulkhead.Execute]: end
// it exactly once with Release, Drop or Done. Ending a permit twice is a bug,
// like unlocking a mutex twice: it would let one call too many in, so when
// the bulkhead notices it (no call is in flight), it panics. The zero permit
// ends as a no-op.
type permit struct {
	b   *Bulkhead
	ap  adaptivelimiter.Permit // the adaptive limiter's permit; nil for a fixed bulkhead
	ctx context.Context
	// waited: the call waited for its permit (acquireWaiting), so the time
	// it was entered is no longer its start.
	waited bool
}

// acquireWaiting waits up to maxWaitDuration for a permit, through
// failsafe-go's AcquirePermitWithMaxWait. failsafe-go returns its own
// "full" sentinel when the wait is over and ctx.Err() when ctx ended first.
func (b *Bulkhead) acquireWaiting(ctx context.Context) (permit, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	start := b.cfg.clock.Now()
	var ap adaptivelimiter.Permit
	var err error
	if b.fixed != nil {
		err = b.fixed.AcquirePermitWithMaxWait(ctx, b.cfg.MaxWaitDuration)
	} else {
		ap, err = b.adaptive.AcquirePermitWithMaxWait(ctx, b.cfg.MaxWaitDuration)
	}
	waited := b.cfg.clock.Now().Sub(start)
	if err == nil {
		p := b.admit(ctx, ap, waited)
		p.waited = true
		return p, nil
	}
	var full *FullError
	if errors.Is(err, fsbulkhead.ErrFull) || errors.Is(err, adaptivelimiter.ErrExceeded) {
		full = b.fullError()
	} else {
		full = &FullError{Name: b.cfg.Name, Limit: b.Limit(), Cause: err}
	}
	return permit{}, b.reject(ctx, full, waited)
}

func (b *Bulkhead) admit(ctx context.Context, ap adaptivelimiter.Permit, waited time.Duration) permit {
	b.active.Add(1)
	p := permit{b: b, ap: ap, ctx: ctx}
	if b.rec != nil {
		b.acquired(p, waited)
	}
	return p
}

// acquired records that p was admitted. A recorder that panics gives p
// back before the panic goes on: the caller never got the permit to end.
func (b *Bulkhead) acquired(p permit, waited time.Duration) {
	recorded := false
	defer func() {
		if !recorded {
			p.end(false)
		}
	}()
	b.rec.Record(orBackground(p.ctx), resilience.Event{Type: resilience.EventAcquired, Duration: waited})
	recorded = true
}

func (b *Bulkhead) reject(ctx context.Context, err *FullError, waited time.Duration) error {
	if b.rec != nil {
		b.rec.Record(orBackground(ctx), resilience.Event{Type: resilience.EventRejection, Duration: waited, Err: err})
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

// fullError returns the shared rejection, rebuilt when an adaptive limit
// has moved since it was built.
func (b *Bulkhead) fullError() *FullError {
	e := b.full.Load()
	if b.adaptive == nil {
		return e
	}
	if limit := b.adaptive.Limit(); e.Limit != limit {
		e = &FullError{Name: b.cfg.Name, Limit: limit}
		b.full.Store(e)
	}
	return e
}

// Release ends the admitted call normally and gives its permit back. On an
// adaptive bulkhead the call's latency, from acquire to Release, is a sample
// for the limit: failsafe-go's Permit.Record.
func (p permit) Release() { p.end(true) }

// Drop gives the permit back without the call's latency counting for an
// adaptive limit (failsafe-go's Permit.Drop): for a call that ended early,
// cancelled or timed out, whose duration says nothing about the
// dependency. On a fixed bulkhead Drop is Release.
func (p permit) Drop() { p.end(false) }

func endedEarly(err error) bool {
	return resilience.IsRejection(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// errEndedTwice is the panic of a permit ended twice.
const errEndedTwice = "bulkhead: a permit ended twice, or more permits ended than were acquired"

// Close releases the bulkhead's observer gauges ([resilience.Releaser]).
// Permits still out may end; a closed bulkhead must not admit new calls.
func (b *Bulkhead) Close() { resilience.Release(b.rec) }

// Config returns the bulkhead's settings (an adaptive limit's with its
// defaults filled).
func (b *Bulkhead) Config() Config { return b.cfg.Config }

func init() {
	// A fixed bulkhead without an observer hands a call's error on
	// unchanged and counts nothing by it (Apply): a breaker outside it can
	// take a timeout's word from inside it (internal/timely).
	timely.Register(func(p any) (timely.Role, bool) {
		b, ok := p.(*Bulkhead)
		if !ok || b == nil {
			return timely.Role{}, false
		}
		return timely.Role{Passes: b.slots != nil && b.rec == nil}, true
	})
}
