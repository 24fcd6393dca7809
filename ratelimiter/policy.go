package ratelimiter

import (
	"context"

	"github.com/meshless/meshless/internal/timely"
	"github.com/meshless/meshless/resilience"
)

var _ resilience.Policy = (*Limiter)(nil)

// Execute runs fn if the limiter admits it. When the period's permits are
// spent, a limiter with a timeoutDuration waits for the first permit that
// comes free within it (and before ctx's deadline), first come, first served;
// a call for which none comes free in time is rejected at once. When the
// limiter refuses the call, fn does not run and Execute returns the rejection (errors.Is(err,
// [ErrLimited])). Otherwise it returns fn's error unchanged. The permit is
// spent whatever fn does, panics included. On the permitted path Execute
// allocates nothing.
func (l *Limiter) Execute(ctx context.Context, fn func(context.Context) error) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	return fn(ctx)
}

// Apply is [Limiter.Execute] in the shape of [resilience.Policy], the method
// through which [resilience.NewChain] composes policies; it is not a second
// way in: call Execute, or put the limiter in a chain.
//
// A limiter that never makes a call wait (timeoutDuration 0) passes on the
// time the policy outside passed ([resilience.Next.Entered]); one that may
// does not.
func (l *Limiter) Apply(ctx context.Context, next resilience.Next) error {
	entered, ok := next.Entered()
	if !ok || l.waits() {
		return l.Execute(ctx, next.Run)
	}
	if err := l.acquire(ctx); err != nil {
		return err
	}
	return next.RunAt(ctx, entered)
}

// Enter is the first step of the [resilience.Gate] contract, for meshless's
// engine, which runs a call's gates in order around each attempt: it spends
// one permit or rejects the attempt, as [Limiter.Execute] does, waiting as
// Execute waits. Users run calls with [Limiter.Execute].
func (l *Limiter) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	return ctx, resilience.Permit{}, l.acquire(ctx)
}

// Exit does nothing: a spent permit is not given back.
func (l *Limiter) Exit(_ context.Context, _ resilience.Permit, r resilience.Result) error {
	return r.Err
}

func init() {
	// A limiter hands a call's error on unchanged and counts nothing by it
	// (Apply): a breaker outside it can take a timeout's word from inside
	// it (internal/timely).
	timely.Register(func(p any) (timely.Role, bool) {
		l, ok := p.(*Limiter)
		if !ok || l == nil {
			return timely.Role{}, false
		}
		return timely.Role{Passes: true}, true
	})
}
