package throttler

import (
	"math"
	"runtime"
	"sync/atomic"

	"github.com/meshless/meshless/internal/procpin"
)

// buckets is how many parts the window is cut into: it slides by a tenth.
const buckets = 10

// maxShards bounds the accept counters' shards (one per processor, up to
// this many): a sum over the whole window reads at most maxShards+1 times
// ten buckets, however many cores the machine has.
const maxShards = 8

const (
	empty     = -1
	resetting = -2
)

// neverRefused is refusedAt before any refusal: below every window.
const neverRefused = math.MinInt64

// bucket counts the verdicts of one slot of the window (a tenth of it).
// epoch is the slot's index since the throttler started, or empty (-1) or
// resetting (being recycled for a newer slot); n is the verdicts counted.
type bucket struct {
	epoch atomic.Int64
	n     atomic.Uint64
}

// slots is a window's ten buckets, alone on their cache lines (256 bytes:
// adjacent-line prefetchers pair 64-byte lines).
type slots struct {
	b [buckets]bucket
	_ [256 - buckets*16]byte
}

// shardCount is the number of accept shards: as many as there are
// processors now, rounded up to a power of two, at most maxShards.
// Processors added later share shards.
func shardCount() int {
	n := 1
	for n < runtime.GOMAXPROCS(0) && n < maxShards {
		n *= 2
	}
	return n
}

func (s *slots) init() {
	for i := range s.b {
		s.b[i].epoch.Store(empty)
	}
}

func (s *slots) reset() {
	for i := range s.b {
		b := &s.b[i]
		b.epoch.Store(resetting)
		b.n.Store(0)
		b.epoch.Store(empty)
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
func (b *bucket) add(e int64) bool {
	for {
		be := b.epoch.Load()
		switch {
		case be == e:
			b.n.Add(1)
			return true
		case be == resetting:
			runtime.Gosched() // another caller is recycling the bucket
		case be > e:
			return false
		case b.epoch.CompareAndSwap(be, resetting):
			b.n.Store(0)
			b.epoch.Store(e)
		}
	}
}

// sum returns the verdicts counted in the slots of epoch e's window. A
// bucket whose slot changes while it is read is left out: it was being
// recycled for a slot newer than the oldest of e's window.
func (s *slots) sum(e int64) int64 {
	var n int64
	for i := range s.b {
		b := &s.b[i]
		be := b.epoch.Load()
		if be < 0 || be <= e-buckets || be > e {
			continue // empty, resetting, or out of the window
		}
		c := b.n.Load()
		if b.epoch.Load() == be {
			n += int64(c)
		}
	}
	return n
}

// count counts a verdict of slot e: an accept (a request and its accept)
// in the accept shard of the calling goroutine's processor, so that calls
// ending on two cores write different cache lines; a refusal or a
// rejection (a request without accept) in the one set of refusal buckets,
// written only by refusals.
func (t *Throttler) count(e int64, accepted bool) {
	if accepted {
		t.accepted[procpin.ID()&t.mask].b[e%buckets].add(e)
		return
	}
	b := &t.refused.b[e%buckets]
	if !b.add(e) {
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

// markRefused raises refusedAt to e: a refusal counted in slot e, or moved
// there.
func (t *Throttler) markRefused(e int64) {
	for {
		m := t.refusedAt.Load()
		if m >= e || t.refusedAt.CompareAndSwap(m, e) {
			return
		}
	}
}

// totals sums the counts within the window of epoch e.
func (t *Throttler) totals(e int64) (requests, accepts int64) {
	for i := range t.accepted {
		accepts += t.accepted[i].sum(e)
	}
	return accepts + t.refused.sum(e), accepts
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

// rate is the rejection probability for these counts.
func (t *Throttler) rate(requests, accepts int64) float64 {
	if requests < int64(t.cfg.MinimumRequests) {
		return 0
	}
	p := (float64(requests) - t.cfg.Multiplier*float64(accepts)) / float64(requests+1)
	return min(max(p, 0), t.cfg.MaxRejectionRate/100)
}
