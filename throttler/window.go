package throttler

import (
	"math"
	"runtime"
	"sync/atomic"
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

// rate is the rejection probability for these counts.
func (t *Throttler) rate(requests, accepts int64) float64 {
	if requests < int64(t.cfg.MinimumRequests) {
		return 0
	}
	p := (float64(requests) - t.cfg.Multiplier*float64(accepts)) / float64(requests+1)
	return min(max(p, 0), t.cfg.MaxRejectionRate/100)
}
