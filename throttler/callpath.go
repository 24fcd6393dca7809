package throttler

import (
	"context"
	"runtime"
	"time"

	"github.com/meshless/meshless/internal/procpin"
	"github.com/meshless/meshless/resilience"
)

// This file is the path every call takes through the throttler, in the order a
// call runs it. It is one file for the sake of the code's layout: the Go
// linker keeps a package's functions in the order of its source files, so
// the path's code sits together on few pages of memory. A real call runs it
// cold, after the transport's own path has evicted it, and every page it
// spans shows (docs/benchmarks/b5-pairs.md, "What a cold call pays for").

// Enter admits the request, or rejects it with the current probability. A
// rejected request counts at once, as a request; an admitted one counts
// nothing yet: its Exit counts it, with its verdict. The permit it returns
// is for Exit.
func (t *Throttler) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	return t.EnterAt(ctx, t.clock.Now())
}

// EnterAt is Enter at now, a time read from the throttler's clock, for a
// pipeline that reads the time once for every gate (meshless's engine).
//
// It draws whether the request goes; a rejected one is counted at once.
// While no refusal was counted in the window (the common case: rateAt's
// first test, made here without a call) it goes.
func (t *Throttler) EnterAt(ctx context.Context, now time.Time) (context.Context, resilience.Permit, error) {
	if e := t.epoch(now); t.refusedAt.Load() > e-buckets {
		if p := t.rateAt(e); p > 0 && t.draw() < p {
			t.count(e, false)
			if t.rec != nil {
				t.rec.Record(ctx, resilience.Event{Type: resilience.EventRejection, Err: t.rej})
			}
			return ctx, resilience.Permit{}, t.rej
		}
	}
	if t.rec != nil {
		t.rec.Record(ctx, resilience.Event{Type: resilience.EventAcquired})
	}
	return ctx, resilience.Permit{Ref: t}, nil
}

// epoch returns the index of the window slot that holds at: counted from
// the throttler's start, plus the slots it moved on when its clock stepped
// back (see rebase).
func (t *Throttler) epoch(at time.Time) int64 {
	return max(int64(at.Sub(t.start)/t.slot)+t.shift.Load(), 0)
}

// rebase moves the window's time on when the clock has stepped back by a
// window or more (a clock without a monotonic reading: NTP, a VM
// restored; the system clock's readings carry one and never step back):
// the slot of the clock's reading becomes the newest slot counted in, and
// time goes on from there, so that the window keeps counting and sliding.
// It reads the clock; a count reaches it only when it meets a bucket a
// window or more newer than its own slot, so a count that is merely late
// (its goroutine held up) costs a clock read and is dropped, as before.
func (t *Throttler) rebase() {
	for {
		s := t.shift.Load()
		now := int64(t.clock.Now().Sub(t.start)/t.slot) + s // maybe before the start
		n := t.newest.Load()
		if now > n-buckets || t.shift.CompareAndSwap(s, s+n-now) {
			return
		}
	}
}

// rateAt is the rejection probability in slot e: [Throttler.rate] of
// [Throttler.totals], read without the sum of every shard when a cheaper
// read proves it 0. With F refusals (and rejections) and A accepts in the
// window, the requests are A + F, and A + F − K·A = F − (K−1)·A; so the
// rate is 0
//
//   - when no refusal was counted in the window (refusedAt, one word
//     written at most once a slot, and only while the backend refuses);
//   - when F ≤ (K−1)·a/2, a the accepts of the calling processor's own
//     shard (a ≤ A): then F − (K−1)·A ≤ −(K−1)·A/2, negative by a margin
//     far wider than the rounding of rate's formula, which is therefore 0
//     as well, not merely close to it.
//
// Otherwise it sums every shard, and the rate is the formula's.
func (t *Throttler) rateAt(e int64) float64 {
	if t.refusedAt.Load() <= e-buckets {
		return 0
	}
	f := t.refused.sum(e)
	if f == 0 {
		return 0
	}
	home := procpin.ID() & t.mask
	a := t.accepted[home].sum(e)
	if float64(f) <= (t.cfg.Multiplier-1)*float64(a)/2 {
		return 0
	}
	for i := range t.accepted {
		if i != home {
			a += t.accepted[i].sum(e)
		}
	}
	return t.rate(a+f, a)
}

// Exit counts the admitted request as its verdict says, at the time it
// ended, r.End: Accepted counts a request and an accept, Refused a request,
// Uncounted nothing. r.End must come from the throttler's clock (the
// engine's pipelines use the same one); when it is zero,
// Exit reads the clock. A permit without a Ref (one its caller made to let
// a request by uncounted) counts nothing.
func (t *Throttler) Exit(_ context.Context, p resilience.Permit, r resilience.Result) error {
	if p.Ref == nil {
		return r.Err
	}
	v := t.verdict(r)
	if v != Accepted && v != Refused {
		return r.Err
	}
	end := r.End
	if end.IsZero() {
		end = t.clock.Now()
	}
	if e := t.epoch(end); v == Accepted { // count's accept, without a call
		t.accepted[procpin.ID()&t.mask].b[e%buckets].add(e, t)
	} else {
		t.count(e, false)
	}
	return r.Err
}

// count counts a verdict of slot e: an accept (a request and its accept)
// in the accept shard of the calling goroutine's processor, so that calls
// ending on two cores write different cache lines; a refusal or a
// rejection (a request without accept) in the one set of refusal buckets,
// written only by refusals.
func (t *Throttler) count(e int64, accepted bool) {
	if accepted {
		t.accepted[procpin.ID()&t.mask].b[e%buckets].add(e, t)
		return
	}
	b := &t.refused.b[e%buckets]
	if !b.add(e, t) {
		return
	}
	// refusedAt must cover the slot the refusal landed in: e, or a newer
	// one if it moved (see add), read once the bucket is published.
	for {
		switch be := b.epoch.Load(); be {
		case resetting:
			runtime.Gosched()
		default:
			t.markRefused(be)
			return
		}
	}
}

// add counts one verdict in the bucket of slot e, recycling it if it holds
// an older slot; it counts nothing, and reports false, if the bucket holds
// a newer one (e is then a window or more before a verdict already counted,
// out of every window to come), as the slot's own counts would already have
// gone.
//
// Without a lock, what can go wrong is bounded, and only at a rollover:
//
//   - A bucket is recycled in three steps: its epoch is swapped from the old
//     slot to resetting (a compare-and-swap: one caller wins), its counts
//     are zeroed, and the new slot is published. A count that meets
//     resetting waits (yielding) until the slot is published and tries
//     again, so that no count of the new slot is zeroed with the old ones,
//     none is lost, and no reader takes the old counts for the new slot's.
//     The wait is the recycler's two stores.
//   - A count that read its own (old) slot in the bucket just before the
//     swap, and adds after the counts were zeroed, lands in the new slot: it
//     moves forward by a window or more (the bucket's old slot was leaving
//     the window anyway). This needs calls ending a whole window apart at
//     the same instant.
//
// Only the calls inside add at the moment a bucket is recycled for a slot a
// window newer are affected: at most one count per other goroutine counting
// at that instant is moved. Calls that end in the same slot are counted
// exactly, however many end at once (a cold burst's), on whatever
// processors. TestConcurrentCountsAtRolloversWithinTheBound checks the bound.
//
// A bucket recycled for slot e raises t.newest, the newest slot counted in,
// to e: once a slot, by the first count in it. A count a window or more
// older than its bucket's slot may be the first after the clock stepped
// back: t.rebase looks. A count more than a window past the newest slot
// counted in and past the clock's own slot has a time not read from the
// throttler's clock (a Result.End from elsewhere): it is dropped, rather
// than have its bucket hold a slot that no other count reaches for as
// long. The clock is read only in these two cases: after a window without
// a count, or for a time from elsewhere.
func (b *bucket) add(e int64, t *Throttler) bool {
	for {
		be := b.epoch.Load()
		switch {
		case be == e:
			b.n.Add(1)
			return true
		case be == resetting:
			runtime.Gosched() // another caller is recycling the bucket
		case be > e:
			if be-e >= buckets {
				t.rebase()
			}
			return false
		case e > t.newest.Load()+buckets && e > t.epoch(t.clock.Now()):
			return false
		case b.epoch.CompareAndSwap(be, resetting):
			b.n.Store(0)
			b.epoch.Store(e)
			for n := t.newest.Load(); n < e && !t.newest.CompareAndSwap(n, e); n = t.newest.Load() {
			}
		}
	}
}
