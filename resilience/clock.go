package resilience

import (
	"sync"
	"sync/atomic"
	"time"
)

// Clock tells the time and makes timers. Policies take one through their
// WithClock option so that tests can drive time by hand (see package
// resiliencetest). Implementations must be safe for concurrent use.
type Clock interface {
	// Now returns the current time. Policies call it on their hot path.
	Now() time.Time
	// NewTimer returns a timer whose channel receives the time once d has
	// passed.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer made by a [Clock].
type Timer interface {
	// C returns the channel on which the timer delivers the time; nil for a
	// timer made by AfterFunc.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether it stopped the
	// timer (false if it had already fired or been stopped).
	Stop() bool
}

// CoarseResolution is the step in which [CoarseClock]'s Now advances.
const CoarseResolution = time.Millisecond

// SystemClock returns the real [Clock]: Now reads [time.Now], timers are
// those of package time. It is every policy's default. A read costs about
// 50 ns on a virtual machine; under testing/synctest it is the bubble's fake
// time.
func SystemClock() Clock { return preciseClock{} }

// CoarseClock returns a real [Clock] whose Now is cheaper and coarser: an
// atomic load of a time that a background goroutine refreshes every
// [CoarseResolution] while the clock is read (the goroutine starts on first
// use and exits by itself after 50 ms without a read).
//
// The trade: a read costs a few nanoseconds instead of tens, which is what
// lets a standalone breaker's closed path beat gobreaker's fourfold
// (docs/benchmarks.md), but the time it returns lags the real time by one
// resolution step when the machine is idle and by as much as the refreshing
// goroutine is delayed when it is not: up to 20 ms measured under CPU load,
// 189 ms under the race detector. A call measured with it can be counted
// slow, or not, by that much. Opt in only where calls are far longer than
// that lag and the per-call nanoseconds matter; never in tests that run
// under testing/synctest.
func CoarseClock() Clock { return coarseClock{} }

// timers are the timers of package time, shared by both real clocks.
type timers struct{}

// preciseClock is SystemClock: Now is time.Now.
type preciseClock struct{ timers }

// coarseClock is CoarseClock: Now is the shared coarse source's.
type coarseClock struct{ timers }

func (preciseClock) Now() time.Time { return time.Now() }

func (coarseClock) Now() time.Time { return coarse.now() }

func (timers) NewTimer(d time.Duration) Timer { return timeTimer{time.NewTimer(d)} }

func (timers) AfterFunc(d time.Duration, f func()) Timer {
	return timeTimer{time.AfterFunc(d, f)}
}

type timeTimer struct{ t *time.Timer }

func (t timeTimer) C() <-chan time.Time { return t.t.C }
func (t timeTimer) Stop() bool          { return t.t.Stop() }

// Reset arms the timer again to fire after d (for retry's hedging, which
// reuses a stopped timer; not part of [Timer]).
func (t timeTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

// coarseSource is the shared time source behind CoarseClock: one for the
// process, refreshed by a ticker goroutine while it is read.
type coarseSource struct {
	cur     atomic.Pointer[time.Time] // refreshed by the ticker; carries a monotonic reading
	running atomic.Bool               // the ticker goroutine is refreshing cur
	used    atomic.Bool               // read since the ticker last looked
	mu      sync.Mutex                // serialises starting the ticker
}

var coarse = new(coarseSource)

// idleAfter is how long the ticker runs on without a read before it stops.
const idleAfter = 50 * time.Millisecond

func (c *coarseSource) now() time.Time {
	if !c.used.Load() {
		c.used.Store(true)
	}
	if c.running.Load() {
		return *c.cur.Load()
	}
	return c.start()
}

// start refreshes the time from the precise clock and starts the ticker if
// it is not running.
func (c *coarseSource) start() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.advance(time.Now())
	if !c.running.Load() {
		c.running.Store(true)
		go c.tick()
	}
	return now
}

// advance stores now as the time, unless the time already reads later, and
// returns the time. The ticker reads the clock and then stores it, and start
// may store a later reading between the two: the clock never steps back.
func (c *coarseSource) advance(now time.Time) time.Time {
	for {
		old := c.cur.Load()
		if old != nil && !now.After(*old) {
			return *old
		}
		if c.cur.CompareAndSwap(old, &now) {
			return now
		}
	}
}

func (c *coarseSource) tick() {
	t := time.NewTicker(CoarseResolution)
	defer t.Stop()
	lastRead := time.Now()
	for range t.C {
		now := time.Now()
		c.advance(now)
		if c.used.Swap(false) {
			lastRead = now
			continue
		}
		if now.Sub(lastRead) < idleAfter {
			continue
		}
		c.mu.Lock()
		if c.used.Load() { // read while we decided: keep going
			c.mu.Unlock()
			lastRead = now
			continue
		}
		c.running.Store(false)
		c.mu.Unlock()
		return
	}
}
