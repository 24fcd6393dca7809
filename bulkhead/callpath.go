package bulkhead

import (
	"context"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"

	"github.com/meshless/meshless/internal/procpin"
	"github.com/meshless/meshless/resilience"
)

// This file is the path every call takes through the bulkhead, in the order a
// call runs it. It is one file for the sake of the code's layout: the Go
// linker keeps a package's functions in the order of its source files, so
// the path's code sits together on few pages of memory. A real call runs it
// cold, after the transport's own path has evicted it, and every page it
// spans shows (docs/benchmarks/b5-pairs.md, "What a cold call pays for").

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
	if s := b.slots; s != nil && b.rec == nil { // see fixed
		if s.full.Load() { // marked full: refused before finding the processor
			return b.reject(ctx, b.full.Load(), 0)
		}
		i := s.home()
		if !s.tryAcquireAt(i) {
			return b.reject(ctx, b.full.Load(), 0)
		}
		defer func() {
			if !s.releaseAt(i) {
				panic(errEndedTwice)
			}
		}()
		return fn(ctx)
	}
	return b.execute(ctx, fn, nil)
}

// execute is Execute on a bulkhead that is adaptive or observed, of fn, or
// of next when fn is nil: a call admitted at once passes on the time next
// was entered ([resilience.Next.RunAt]).
func (b *Bulkhead) execute(ctx context.Context, fn func(context.Context) error, next *resilience.Next) error {
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

// fixed: on a fixed bulkhead without an observer, Execute and Apply take
// their permit and give it back in one call each, without a permit value:
// from and to the calling processor's shard (tryAcquireAt looks at every
// shard, so its refusal is the bulkhead's; a bulkhead marked full refuses
// on one read of the mark, before it looks for the processor: slots.mark),
// given back to the shard it came from on every path, a panic's included.
// They do it inline, and call fn (next) from their own frame: every frame
// between a caller and its call costs a mispredicted return once the call
// has been deep in the runtime or the kernel, and a helper's call costs
// more than its work (docs/benchmarks/b4-parts.md, the depth run).

// Apply is [Bulkhead.Execute] in the shape of [resilience.Policy], the method
// through which [resilience.NewChain] composes policies; it is not a second
// way in: call Execute, or put the bulkhead in a chain.
//
// A call admitted at once passes on the time the policy outside passed
// ([resilience.Next.Entered]); a call that waited for its permit does not.
func (b *Bulkhead) Apply(ctx context.Context, next resilience.Next) error {
	if s := b.slots; s != nil && b.rec == nil { // see fixed
		if s.full.Load() { // marked full: refused before finding the processor
			return b.reject(ctx, b.full.Load(), 0)
		}
		i := s.home()
		if !s.tryAcquireAt(i) {
			return b.reject(ctx, b.full.Load(), 0)
		}
		defer func() {
			if !s.releaseAt(i) {
				panic(errEndedTwice)
			}
		}()
		entered, _ := next.Entered()
		return next.RunAt(ctx, entered) // it never waited: it passes on when it was entered
	}
	return b.execute(ctx, nil, &next)
}

// Enter is the first step of the [resilience.Gate] contract, for meshless's
// engine, which runs a call's gates in order around each attempt: it takes a
// permit or rejects the attempt, as [Bulkhead.Execute] does (waiting up to
// maxWaitDuration, or until ctx ends, when the bulkhead is full), and
// [Bulkhead.Exit] must then give it back, exactly once. Users run calls with
// [Bulkhead.Execute].
func (b *Bulkhead) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	if s := b.slots; s != nil && b.rec == nil { // a fixed bulkhead's permit, in one call
		if s.full.Load() { // the mark: every shard was empty
			return ctx, resilience.Permit{}, b.reject(ctx, b.full.Load(), 0)
		}
		i := s.home()
		if !s.tryAcquireAt(i) { // it looked at every shard
			return ctx, resilience.Permit{}, b.reject(ctx, b.full.Load(), 0)
		}
		// The shard goes back in Exit without a second processor lookup.
		return ctx, resilience.Permit{Ref: &s.shards[i]}, nil
	}
	if a := b.adaptive; a != nil && b.rec == nil { // an adaptive permit admitted at once, in one call
		if ap, ok := a.TryAcquirePermit(); ok {
			b.active.Add(1)
			return ctx, resilience.Permit{Ref: ap}, nil
		}
	}
	p, err := b.acquire(ctx)
	if err != nil {
		return ctx, resilience.Permit{}, err
	}
	if p.ap != nil {
		return ctx, resilience.Permit{Ref: p.ap}, nil
	}
	return ctx, resilience.Permit{}, nil
}

// acquire asks the bulkhead to admit one call. It returns a permit to end
// when the call is over, or a *[FullError] (errors.Is [ErrFull]) when every
// permit is taken and none came free in time.
//
// When a permit is free, acquire takes it at once and does not look at ctx.
// When none is, a bulkhead with a maxWaitDuration waits for one, first come
// first served, until the wait is over or ctx ends, whichever comes first;
// without a maxWaitDuration, or for an observed context
// (resilience.Observe: observe mode never delays a call), it rejects at
// once. If ctx ends while the call waits (or has already ended when it would
// wait), the rejection wraps ctx.Err() as its Cause: errors.Is(err,
// context.Canceled) is then true too, and the error is still a
// [resilience.Rejection], which a breaker ignores and a retry never retries.
//
// On a fixed bulkhead acquire allocates nothing, rejection included; an
// adaptive one allocates failsafe-go's permit (one allocation).
func (b *Bulkhead) acquire(ctx context.Context) (permit, error) {
	// The fixed bulkhead's paths first, without a call of their own: a free
	// permit, or the shared rejection.
	if s := b.slots; s != nil {
		if s.tryAcquire() {
			p := permit{b: b, ctx: ctx}
			if b.rec != nil {
				b.acquired(p, 0)
			}
			return p, nil
		}
		return permit{}, b.reject(ctx, b.full.Load(), 0)
	}
	if b.fixed != nil {
		if b.fixed.TryAcquirePermit() {
			b.active.Add(1)
			p := permit{b: b, ctx: ctx}
			if b.rec != nil {
				b.acquired(p, 0)
			}
			return p, nil
		}
		if b.cfg.MaxWaitDuration == 0 || resilience.Observing(ctx) {
			return permit{}, b.reject(ctx, b.full.Load(), 0)
		}
		return b.acquireWaiting(ctx)
	}
	if ap, ok := b.adaptive.TryAcquirePermit(); ok {
		return b.admit(ctx, ap, 0), nil
	}
	if b.cfg.MaxWaitDuration == 0 || resilience.Observing(ctx) {
		return permit{}, b.reject(ctx, b.fullError(), 0)
	}
	return b.acquireWaiting(ctx)
}

// home returns the index of the calling goroutine's processor's shard.
func (s *slots) home() int { return procpin.ID() & s.mask }

// tryAcquire takes a free permit, or reports that there was none.
func (s *slots) tryAcquire() bool { return !s.full.Load() && s.tryAcquireAt(s.home()) }

// tryAcquireAt is tryAcquire from shard i. When that shard is empty, a
// semaphore marked full refuses on one read (slots.mark); the bulkhead's
// own calls read the mark first, before they look for their processor.
func (s *slots) tryAcquireAt(i int) bool {
	sh := &s.shards[i]
	for w := sh.w.Load(); w&freeMask != 0; w = sh.w.Load() {
		if sh.w.CompareAndSwap(w, w+acquireDelta) {
			return true
		}
	}
	if s.full.Load() {
		return false
	}
	return s.acquireElsewhere(i)
}

// Exit gives back the permit of a call that [Bulkhead.Enter] admitted. As in
// [Bulkhead.Execute], a call that ended early (cancelled, timed out, refused
// further in, or panicked) is no latency sample for an adaptive limit. An
// adaptive bulkhead gives nothing back for a permit that is not its own
// (the zero Permit of a refusal): it has no permit to end.
func (b *Bulkhead) Exit(ctx context.Context, pm resilience.Permit, r resilience.Result) error {
	if b == nil {
		return r.Err // the zero permit's bulkhead
	}
	if s := b.slots; s != nil && b.rec == nil {
		i := 0
		if sh, ok := pm.Ref.(*shard); ok && sh.owner == s { // Enter's shard
			i = sh.i
		} else {
			i = s.home()
		}
		if !s.releaseAt(i) { // a fixed bulkhead's permit, in one call
			panic(errEndedTwice)
		}
		return r.Err
	}
	ap, _ := pm.Ref.(adaptivelimiter.Permit)
	if ap == nil && b.adaptive != nil {
		return r.Err // not a permit of this bulkhead's: nothing to give back
	}
	record := r.Err == nil || !(endedEarly(r.Err) || r.Err == resilience.ErrPanicked)
	b.end(ctx, ap, record)
	return r.Err
}

// Done ends the admitted call with its error, choosing between Release and
// Drop as failsafe-go's own executor does: a call that ended early — err
// is a [resilience.Rejection] (an inner policy refused it),
// [context.Canceled] or [context.DeadlineExceeded] — is dropped; any other
// call, failed or not, is released, so a dependency that fails slowly
// lowers an adaptive limit. Callers that classify errors themselves (gRPC
// status codes) call Release or Drop directly.
func (p permit) Done(err error) {
	if err != nil && endedEarly(err) {
		p.end(false)
		return
	}
	p.end(true)
}

func (p permit) end(record bool) { p.b.end(p.ctx, p.ap, record) }

// end gives back one permit: ap is the adaptive limiter's, nil on a fixed
// bulkhead; record says whether the call's latency is a sample for it.
func (b *Bulkhead) end(ctx context.Context, ap adaptivelimiter.Permit, record bool) {
	if b == nil {
		return
	}
	if b.slots != nil {
		if !b.slots.release() {
			panic(errEndedTwice)
		}
		if b.rec != nil {
			b.rec.Record(orBackground(ctx), resilience.Event{Type: resilience.EventReleased})
		}
		return
	}
	// Active goes down before the permit goes back, so that Active never
	// counts more calls than hold a permit.
	if b.active.Add(-1) < 0 {
		b.active.Add(1)
		panic(errEndedTwice)
	}
	switch {
	case ap == nil:
		b.fixed.ReleasePermit()
	case record:
		ap.Record()
	default:
		ap.Drop()
	}
	if b.rec != nil {
		b.rec.Record(orBackground(ctx), resilience.Event{Type: resilience.EventReleased})
	}
}

// release gives a permit back; false when every shard was at its quota
// (no permit was out), and then it adds nothing.
func (s *slots) release() bool { return s.releaseAt(s.home()) }

// releaseAt is release from shard i.
func (s *slots) releaseAt(i int) bool {
	sh := &s.shards[i]
	for w := sh.w.Load(); w&freeMask < sh.quota; w = sh.w.Load() {
		if sh.w.CompareAndSwap(w, w+releaseDelta) {
			s.unmark()
			return true
		}
	}
	if !s.releaseElsewhere(i) {
		return false
	}
	s.unmark()
	return true
}
