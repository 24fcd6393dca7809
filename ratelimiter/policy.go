package ratelimiter

import (
	"context"

	"github.com/meshless/meshless/resilience"
)

var _ resilience.Policy = (*Limiter)(nil)

// Execute runs fn if the limiter admits it. When the limiter refuses the
// call, fn does not run and Execute returns the rejection (errors.Is(err,
// [ErrLimited])). Otherwise it returns fn's error unchanged. The permit is
// spent whatever fn does, panics included. On the permitted path Execute
// allocates nothing.
func (l *Limiter) Execute(ctx context.Context, fn func(context.Context) error) error {
	p, err := l.Acquire(ctx)
	if err != nil {
		return err
	}
	err = fn(ctx)
	p.Done(err)
	return err
}

// Apply is [Limiter.Execute] as a [resilience.Policy], for chains.
func (l *Limiter) Apply(ctx context.Context, next resilience.Next) error {
	return l.Execute(ctx, next.Run)
}

// Enter is [Limiter.Acquire] as a [resilience.Gate], for pipelines: each
// attempt spends one permit.
func (l *Limiter) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	_, err := l.Acquire(ctx)
	return ctx, resilience.Permit{}, err
}

// Exit does nothing: a spent permit is not given back.
func (l *Limiter) Exit(_ context.Context, _ resilience.Permit, r resilience.Result) error {
	return r.Err
}
