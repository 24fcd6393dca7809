package bulkhead

import (
	"math"
	"runtime"
	"sync/atomic"
)

// slots is the semaphore of a fixed bulkhead that does not wait: its
// permits are spread over shards, one per processor (P) up to maxShards,
// each on a cache line of its own, so that a call takes and gives back a
// permit on its own processor's shard and two cores calling at once write
// nothing in common.
//
// Each shard holds one word: the free permits in its low 32 bits, and a
// version in its high 32 bits that every change increments. A shard never
// holds more free permits than its quota (the limit spread evenly over the
// shards; every quota is at least 1), and the quotas add up to the limit.
//
// Contracts (see slots_test.go):
//
//   - The limit is never exceeded. Every acquire takes one free permit from
//     one shard by compare-and-swap, never below zero; every release adds
//     one; so the permits held are the limit minus the free ones, and never
//     more than the limit.
//   - A rejection is exact (linearizable) but for two bounded cases:
//     tryAcquire returns false when at one instant during the call every
//     shard was empty, or after maxRounds changing views, or on the mark
//     (below). When its own shard is empty it looks at every shard, taking
//     a permit from the first that has one, and then reads every word
//     again: if none changed (the versions make an unchanged word mean no
//     operation in between; the two passes compare the sums of the words,
//     see sum), all were empty at the instant between the two passes. If
//     some did change, it starts over, up to maxRounds times; a call that
//     saw the shards change under it that often, with never a free permit
//     when it looked, is refused (only a bulkhead at its limit with permits
//     coming and going every few nanoseconds does that).
//   - The mark: a call refused after two agreeing passes marks the
//     semaphore full, and every later call is refused on one read of the
//     mark, without looking at a shard (what a full bulkhead under
//     overload does most). Every release that finds the mark takes it
//     away, after its permit is back. The marking call looks at every
//     shard once more after it marked, and takes its mark back if one has
//     a free permit: a release and a marking call each write first and
//     read after (sequentially consistent atomics), so at least one of
//     them sees the other — a free permit never sits under a mark that
//     nothing will take away. A call may still be refused on the mark
//     while a free permit is back but the call that put it back, or the
//     marking call, has not yet taken the mark away: a window of a few
//     instructions, only at the limit, the second bounded case.
//   - A release goes to its own shard unless that is at its quota, then to
//     the first shard below its quota. Since the quotas add up to the limit,
//     a stable view of every shard at its quota means that no permit was out:
//     the release is one too many (a permit ended twice) and is refused, with
//     nothing added. A release that cannot get a stable view within
//     maxRounds goes to its own shard above its quota, so that no permit is
//     ever lost; a later double end may then go unnoticed.
type slots struct {
	limit  int
	mask   int // len(shards)-1; len(shards) is a power of two
	shards []shard
	// full is the mark (see the contracts): 128 bytes past the fields
	// above, which every call reads, so that marking and unmarking, which
	// happen only at the limit, never invalidate their cache lines.
	_    [88]byte
	full atomic.Bool
	_    [127]byte
}

// shard is one processor's share of the permits, alone on its cache lines
// (128 bytes: adjacent-line prefetchers pair 64-byte lines).
type shard struct {
	w     atomic.Uint64 // version<<32 | free
	quota uint64
	owner *slots // for the gate's Exit, which is handed the shard in its permit
	i     int    // the shard's index in owner.shards
	_     [96]byte
}

const (
	freeMask     = 1<<32 - 1
	acquireDelta = 1<<32 - 1 // version+1, free-1 (free > 0: no borrow)
	releaseDelta = 1<<32 + 1 // version+1, free+1
	// maxShards bounds a bulkhead's memory (maxShards × 128 bytes).
	maxShards = 16
	// maxRounds bounds the passes of a rejection, or of a release that finds
	// its shard full, while the shards keep changing.
	maxRounds = 16
	// maxSlotsLimit is the largest limit slots can hold (free counts are 32
	// bits); a larger limit uses failsafe-go's semaphore.
	maxSlotsLimit = math.MaxInt32
)

// newSlots returns limit permits, all free, over as many shards as there
// are processors now, rounded up to a power of two, at most maxShards and at
// most limit (so that every quota is at least 1). Processors added later
// share shards.
func newSlots(limit int) *slots {
	n := 1
	for n < runtime.GOMAXPROCS(0) && n < maxShards && 2*n <= limit {
		n *= 2
	}
	return newSlotsN(limit, n)
}

// newSlotsN returns limit permits over n shards (a power of two, at most
// maxShards and at most limit).
func newSlotsN(limit, n int) *slots {
	s := &slots{limit: limit, mask: n - 1, shards: make([]shard, n)}
	for i := range s.shards {
		q := limit / n
		if i < limit%n {
			q++
		}
		s.shards[i].quota, s.shards[i].owner, s.shards[i].i = uint64(q), s, i
		s.shards[i].w.Store(uint64(q))
	}
	return s
}

// acquireElsewhere looks for a free permit in every shard, from the one
// after i; false once two passes agree that every shard is empty.
func (s *slots) acquireElsewhere(i int) bool {
	n := len(s.shards)
	for range maxRounds {
		scanned(-1)
		var seen uint64
		for k := 1; k <= n; k++ {
			j := (i + k) & s.mask
			sh := &s.shards[j]
			w := sh.w.Load()
			for ; w&freeMask != 0; w = sh.w.Load() {
				if sh.w.CompareAndSwap(w, w+acquireDelta) {
					return true
				}
			}
			seen += w
			scanned(j)
		}
		if s.sum() == seen {
			s.mark()
			return false
		}
	}
	return false
}

// mark marks the semaphore full, after two passes agreed that every shard
// was empty, and looks at every shard again: a permit given back before the
// mark was written, by a release that then read no mark, is seen here, and
// the mark is taken back.
func (s *slots) mark() {
	scanned(markBefore)
	s.full.Store(true)
	scanned(markAfter)
	for j := range s.shards {
		if s.shards[j].w.Load()&freeMask != 0 {
			s.full.Store(false)
			return
		}
	}
}

// unmark takes the mark away; a release calls it after its permit is back.
// It writes only when the semaphore is marked, so that a release below the
// limit only reads the mark's cache line.
func (s *slots) unmark() {
	if s.full.Load() {
		s.full.Store(false)
	}
}

func (s *slots) releaseElsewhere(i int) bool {
	n := len(s.shards)
	for range maxRounds {
		scanned(-1)
		var seen uint64
		for k := 1; k <= n; k++ {
			j := (i + k) & s.mask
			sh := &s.shards[j]
			w := sh.w.Load()
			for ; w&freeMask < sh.quota; w = sh.w.Load() {
				if sh.w.CompareAndSwap(w, w+releaseDelta) {
					return true
				}
			}
			seen += w
			scanned(j)
		}
		if s.sum() == seen {
			return false
		}
	}
	s.shards[i].w.Add(releaseDelta)
	return true
}

// testHookScanned, when set (by tests only), is called as a scan of the
// shards starts (j = -1), after it has looked at shard j, and just before
// and after a call marks the semaphore full (markBefore, markAfter), so
// that a test can move permits between the looks.
var testHookScanned func(j int)

// The points of testHookScanned around the mark.
const (
	markBefore = -2
	markAfter  = -3
)

func scanned(j int) {
	if testHookScanned != nil {
		testHookScanned(j)
	}
}

// sum returns the sum of every shard's word. Two sums are equal only if no
// shard changed between the reads of each: every change adds 1<<32 ± 1 to
// one word, so k changes move the sum by k<<32 plus at most ±k, which is 0
// (mod 2^64) only for k = 0 (below 2^32 changes, which a call's two passes
// never straddle).
func (s *slots) sum() uint64 {
	var sum uint64
	for j := range s.shards {
		sum += s.shards[j].w.Load()
	}
	return sum
}

// held returns how many permits are out: exact when no call is taking or
// giving one back, and within [0, limit] always.
func (s *slots) held() int {
	free := 0
	for j := range s.shards {
		free += int(s.shards[j].w.Load() & freeMask)
	}
	return min(max(s.limit-free, 0), s.limit)
}
