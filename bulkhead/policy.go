package bulkhead

import (
	"context"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"

	"github.com/meshless/meshless/resilience"
)

var (
	_ resilience.Policy = (*Bulkhead)(nil)
	_ resilience.Gate   = (*Bulkhead)(nil)
)

// Execute runs fn if the bulkhead admits it and gives the permit back when
// fn returns. When the bulkhead is full, a call waits up to maxWaitDuration
// for a permit, or until ctx ends; when the bulkhead refuses the call, fn
// does not run and Execute returns the rejection (errors.Is(err, [ErrFull]);
// a rejection of a call whose ctx ended while it waited also wraps
// ctx.Err()). Otherwise it returns fn's error unchanged.
//
// An adaptive limit learns from the call's latency unless the call ended
// early: fn's error is a [resilience.Rejection] from further in,
// [context.Canceled] or [context.DeadlineExceeded]. Any other call, failed or
// not, is a sample, so a dependency that fails slowly lowers the limit.
//
// A panic in fn gives the permit back (dropped: a panic is no latency
// sample) and goes on up. On a fixed bulkhead Execute allocates nothing.
func (b *Bulkhead) Execute(ctx context.Context, fn func(context.Context) error) error {
	return b.execute(ctx, fn, resilience.Next{})
}

// execute is Execute, of fn, or of next when fn is nil: a call admitted at
// once passes on the time next was entered ([resilience.Next.RunAt]).
func (b *Bulkhead) execute(ctx context.Context, fn func(context.Context) error, next resilience.Next) error {
	p, err := b.acquire(ctx)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			p.Drop()
		}
	}()
	if fn != nil {
		err = fn(ctx)
	} else {
		entered, _ := next.Entered()
		if p.waited {
			entered = time.Time{}
		}
		err = next.RunAt(ctx, entered)
	}
	done = true
	p.Done(err)
	return err
}

// Apply is [Bulkhead.Execute] in the shape of [resilience.Policy], the method
// through which [resilience.NewChain] composes policies; it is not a second
// way in: call Execute, or put the bulkhead in a chain.
//
// A call admitted at once passes on the time the policy outside passed
// ([resilience.Next.Entered]); a call that waited for its permit does not.
func (b *Bulkhead) Apply(ctx context.Context, next resilience.Next) error {
	return b.execute(ctx, nil, next)
}

// Enter is the first step of the [resilience.Gate] contract, for meshless's
// engine, which runs a call's gates in order around each attempt: it takes a
// permit or rejects the attempt, as [Bulkhead.Execute] does (waiting up to
// maxWaitDuration, or until ctx ends, when the bulkhead is full), and
// [Bulkhead.Exit] must then give it back, exactly once. Users run calls with
// [Bulkhead.Execute].
func (b *Bulkhead) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	p, err := b.acquire(ctx)
	if err != nil {
		return ctx, resilience.Permit{}, err
	}
	if p.ap != nil {
		return ctx, resilience.Permit{Ref: p.ap}, nil
	}
	return ctx, resilience.Permit{}, nil
}

// Exit gives back the permit of a call that [Bulkhead.Enter] admitted. As in
// [Bulkhead.Execute], a call that ended early (cancelled, timed out, refused
// further in, or panicked) is no latency sample for an adaptive limit.
func (b *Bulkhead) Exit(ctx context.Context, pm resilience.Permit, r resilience.Result) error {
	ap, _ := pm.Ref.(adaptivelimiter.Permit)
	record := r.Err == nil || !(endedEarly(r.Err) || r.Err == resilience.ErrPanicked)
	b.end(ctx, ap, record)
	return r.Err
}
