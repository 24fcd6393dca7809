package circuitbreaker

import (
	"sync/atomic"
	"time"
)

// counts is what a window holds.
type counts struct {
	calls, failures, slow, slowFailures int64
}

func (n *counts) add(failed, slow bool, sign int64) {
	n.calls += sign
	if failed {
		n.failures += sign
	}
	if slow {
		n.slow += sign
		if failed {
			n.slowFailures += sign
		}
	}
}

// window is a sliding window of call outcomes. record and snapshot are called
// with the breaker's lock held; clean is read without it.
type window interface {
	record(failed, slow bool, now time.Time) counts
	snapshot(now time.Time) counts
	// clean reports whether recording a fast success would leave the window
	// as it is, so that the caller may skip recording it.
	clean() bool
}

func newWindow(c *config, now time.Time) window {
	if c.SlidingWindowType == TimeBased {
		return newTimeWindow(c.SlidingWindowSize, now)
	}
	return &countWindow{ring: make([]uint8, c.SlidingWindowSize)}
}

const (
	slotUsed uint8 = 1 << iota
	slotFailed
	slotSlow
)

// countWindow holds the last len(ring) calls.
//
// When the window is full and holds only fast successes, one more fast success
// changes nothing: the window is the same multiset of outcomes, whichever slot
// is overwritten. The breaker then skips recording it, so a healthy breaker's
// closed path writes no shared memory. Skipping only ever replaces a success
// with a success, so the ring order stays right for every other outcome.
type countWindow struct {
	ring    []uint8
	next    int
	n       counts
	isClean atomic.Bool
}

func (w *countWindow) record(failed, slow bool, _ time.Time) counts {
	if old := w.ring[w.next]; old&slotUsed != 0 {
		w.n.add(old&slotFailed != 0, old&slotSlow != 0, -1)
	}
	s := slotUsed
	if failed {
		s |= slotFailed
	}
	if slow {
		s |= slotSlow
	}
	w.ring[w.next] = s
	w.n.add(failed, slow, 1)
	if w.next++; w.next == len(w.ring) {
		w.next = 0
	}
	w.isClean.Store(w.n.calls == int64(len(w.ring)) && w.n.failures == 0 && w.n.slow == 0)
	return w.n
}

func (w *countWindow) snapshot(time.Time) counts { return w.n }

// timeWindow holds the calls of the last len(buckets) seconds, one bucket per
// epoch second (as Resilience4j), counted from the second the window was made
// by elapsed time. Elapsed time is measured with time.Time.Sub,
// which reads the monotonic clock when the clock's times carry it (the
// system clock's do): a wall-clock step (NTP, a VM restored) neither empties
// the window nor freezes it. A time earlier than the newest second seen (a
// clock without a monotonic reading stepping back) counts in the newest
// second, so the window keeps counting.
type timeWindow struct {
	buckets []counts
	base    time.Time
	last    int64 // the newest second the window has moved to
	n       counts
}

func newTimeWindow(size int, now time.Time) *timeWindow {
	return &timeWindow{buckets: make([]counts, size), base: now, last: now.Unix()}
}

// second returns the epoch second of now, as elapsed since the window was
// made, and never before the newest second seen.
func (w *timeWindow) second(now time.Time) int64 {
	into := now.Sub(w.base) + time.Duration(w.base.Nanosecond()) // since base's whole second
	if into < 0 {
		return w.last
	}
	return max(w.base.Unix()+int64(into/time.Second), w.last)
}

// advance moves the window to the second sec, dropping the buckets that fall
// out of it.
func (w *timeWindow) advance(sec int64) {
	if sec <= w.last {
		return
	}
	size := int64(len(w.buckets))
	from := w.last + 1
	if sec-from >= size {
		from = sec - size + 1
	}
	for s := from; s <= sec; s++ {
		b := &w.buckets[mod(s, size)]
		w.n.calls -= b.calls
		w.n.failures -= b.failures
		w.n.slow -= b.slow
		w.n.slowFailures -= b.slowFailures
		*b = counts{}
	}
	w.last = sec
}

func (w *timeWindow) record(failed, slow bool, now time.Time) counts {
	sec := w.second(now)
	w.advance(sec)
	w.buckets[mod(sec, int64(len(w.buckets)))].add(failed, slow, 1)
	w.n.add(failed, slow, 1)
	return w.n
}

func (w *timeWindow) snapshot(now time.Time) counts {
	w.advance(w.second(now))
	return w.n
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
