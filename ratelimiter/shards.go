package ratelimiter

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshless/meshless/internal/procpin"
)

// shards is the permits of a bursty limiter that does not wait: a period's
// limitForPeriod permits spread over one shard per processor (P), up to
// maxShards, each with a lock and a cache line of its own, so that a call
// takes its permit on its own processor's shard and two cores admitting
// calls at once share nothing but the clock.
//
// Periods are counted from the limiter's creation, as failsafe-go's bursty
// limiter counts them, and a shard's permits are for one period: the first
// call of a newer period refills it with its quota (the limit spread evenly
// over the shards; the quotas add up to the limit, each at least 1), and a
// shard never goes back to an older period (a call that read the clock just
// before a newer period began takes a permit of the newer one). So no period
// admits more than limitForPeriod calls, and unused permits do not carry
// over.
//
// A call whose own shard has no permit left locks every shard, in order,
// and takes a permit from the first that has one: it is refused only if no
// shard had one at that instant, as exactly as under failsafe-go's single
// lock. Only calls beyond a shard's quota pay for that.
type shards struct {
	start  time.Time // period 0 begins; carries a monotonic reading
	period time.Duration
	mask   int // len(s)-1; len(s) is a power of two
	s      []shard
	// spent is the latest period found to have no permit left in any shard
	// (-1: none yet). A rate limit's permits never come back within their
	// period, so every later call of that period is refused on this one
	// read, without a lock; it is written once per spent period.
	spent atomic.Int64
}

// shard is one processor's share of a period's permits, alone on its cache
// lines (128 bytes: adjacent-line prefetchers pair 64-byte lines).
type shard struct {
	mu    sync.Mutex
	epoch int64 // the period free is for
	free  int64
	quota int64
	_     [96]byte
}

// maxShards bounds a limiter's memory (maxShards × 128 bytes).
const maxShards = 16

// newShards returns limit permits per period, over as many shards as there
// are processors now, rounded up to a power of two, at most maxShards and at
// most limit. Processors added later share shards.
func newShards(limit int, period time.Duration) *shards {
	n := 1
	for n < runtime.GOMAXPROCS(0) && n < maxShards && 2*n <= limit {
		n *= 2
	}
	return newShardsN(limit, period, n)
}

// newShardsN is newShards over n shards (a power of two, at most limit).
func newShardsN(limit int, period time.Duration, n int) *shards {
	s := &shards{start: time.Now(), period: period, mask: n - 1, s: make([]shard, n)}
	for i := range s.s {
		q := limit / n
		if i < limit%n {
			q++
		}
		s.s[i].quota, s.s[i].free = int64(q), int64(q)
	}
	s.spent.Store(-1)
	return s
}

// tryAcquire takes a permit of the current period, or reports that every
// one is spent.
func (s *shards) tryAcquire() bool {
	e := int64(time.Since(s.start) / s.period)
	return s.tryAcquireAt(procpin.ID()&s.mask, e)
}

// tryAcquireAt is tryAcquire from shard i in period e.
func (s *shards) tryAcquireAt(i int, e int64) bool {
	if s.spent.Load() == e {
		return false
	}
	sh := &s.s[i]
	sh.mu.Lock()
	ok := sh.take(e)
	sh.mu.Unlock()
	return ok || s.acquireAny(e)
}

// acquireAny holds every shard's lock, in order, and takes a permit from
// the first that has one.
func (s *shards) acquireAny(e int64) bool {
	for i := range s.s {
		s.s[i].mu.Lock()
	}
	defer func() {
		for i := range s.s {
			s.s[i].mu.Unlock()
		}
	}()
	for i := range s.s {
		if s.s[i].take(e) {
			return true
		}
	}
	// Every shard is at period e or later, with no permit left: e is spent
	// (a shard in a later period has lent nothing to e).
	if sp := s.spent.Load(); sp < e {
		s.spent.CompareAndSwap(sp, e)
	}
	return false
}

// take takes a permit of period e, refilling the shard first if its
// permits are for an older period. Called with sh.mu held.
func (sh *shard) take(e int64) bool {
	if sh.epoch < e {
		sh.epoch, sh.free = e, sh.quota
	}
	if sh.free == 0 {
		return false
	}
	sh.free--
	return true
}
