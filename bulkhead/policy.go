package bulkhead

import (
	"context"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"

	"github.com/meshless/meshless/resilience"
)

var (
	_ resilience.Policy = (*Bulkhead)(nil)
	_ resilience.Gate   = (*Bulkhead)(nil)
)

// Execute runs fn if the bulkhead admits it and gives the permit back when
// fn returns, with [Permit.Done] (so an adaptive limit learns from the call's
// latency unless it ended early). When the bulkhead refuses the call, fn
// does not run and Execute returns the rejection (errors.Is(err, [ErrFull])).
// Otherwise it returns fn's error unchanged.
//
// A panic in fn gives the permit back (dropped: a panic is no latency
// sample) and goes on up. On a fixed bulkhead Execute allocates nothing.
func (b *Bulkhead) Execute(ctx context.Context, fn func(context.Context) error) error {
	p, err := b.Acquire(ctx)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			p.Drop()
		}
	}()
	err = fn(ctx)
	done = true
	p.Done(err)
	return err
}

// Apply is [Bulkhead.Execute] as a [resilience.Policy], for chains.
func (b *Bulkhead) Apply(ctx context.Context, next resilience.Next) error {
	return b.Execute(ctx, next.Run)
}

// Enter is [Bulkhead.Acquire] as a [resilience.Gate], for pipelines.
func (b *Bulkhead) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	p, err := b.Acquire(ctx)
	if err != nil {
		return ctx, resilience.Permit{}, err
	}
	if p.ap != nil {
		return ctx, resilience.Permit{Ref: p.ap}, nil
	}
	return ctx, resilience.Permit{}, nil
}

// Exit gives back the permit of a call that [Bulkhead.Enter] admitted. As
// [Permit.Done] does, a call that ended early (cancelled, timed out, refused
// further in, or panicked) is no latency sample for an adaptive limit.
func (b *Bulkhead) Exit(ctx context.Context, pm resilience.Permit, r resilience.Result) error {
	ap, _ := pm.Ref.(adaptivelimiter.Permit)
	record := r.Err == nil || !(endedEarly(r.Err) || r.Err == resilience.ErrPanicked)
	b.end(ctx, ap, record)
	return r.Err
}
