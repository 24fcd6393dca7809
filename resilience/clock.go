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

// CoarseResolution is the step in which [SystemClock]'s Now advances.
const CoarseResolution = time.Millisecond

// SystemClock is the real [Clock]. Its timers are those of package time.
//
// Its Now is coarse: it returns a time, with a monotonic reading, that a
// background goroutine refreshes every [CoarseResolution] while the clock is
// read. Reading it costs an atomic load instead of a system clock read
// (about 50 ns on a virtual machine). The goroutine starts on first use and
// exits by itself when the clock has not been read for 50 ms, so an idle
// program has no timer waking it up.
var SystemClock Clock = systemClock{}

type systemClock struct{}

// PreciseClock is a [Clock] whose Now reads [time.Now] on every call. It
// costs about 50 ns a read on a virtual machine; use it where exact
// durations matter more than that, and in tests run under testing/synctest,
// where time.Now is the bubble's fake time.
var PreciseClock Clock = preciseClock{}

type preciseClock struct{ systemClock }

func (preciseClock) Now() time.Time { return time.Now() }

func (systemClock) Now() time.Time { return coarse.now() }

func (systemClock) NewTimer(d time.Duration) Timer { return timeTimer{time.NewTimer(d)} }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer {
	return timeTimer{time.AfterFunc(d, f)}
}

type timeTimer struct{ t *time.Timer }

func (t timeTimer) C() <-chan time.Time { return t.t.C }
func (t timeTimer) Stop() bool          { return t.t.Stop() }

// coarseClock is the shared coarse time source behind SystemClock.
type coarseClock struct {
	cur     atomic.Pointer[time.Time] // refreshed by the ticker; carries a monotonic reading
	running atomic.Bool               // the ticker goroutine is refreshing cur
	used    atomic.Bool               // read since the ticker last looked
	mu      sync.Mutex                // serialises starting the ticker
}

var coarse = new(coarseClock)

// idleAfter is how long the ticker runs on without a read before it stops.
const idleAfter = 50 * time.Millisecond

func (c *coarseClock) now() time.Time {
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
func (c *coarseClock) start() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	c.cur.Store(&now)
	if !c.running.Load() {
		c.running.Store(true)
		go c.tick()
	}
	return now
}

func (c *coarseClock) tick() {
	t := time.NewTicker(CoarseResolution)
	defer t.Stop()
	lastRead := time.Now()
	for range t.C {
		now := time.Now()
		c.cur.Store(&now)
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
