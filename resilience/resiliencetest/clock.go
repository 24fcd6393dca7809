package resiliencetest

import (
	"slices"
	"sync"
	"time"

	"github.com/meshless/meshless/resilience"
)

// Clock is a fake [resilience.Clock]: its time moves only when [Clock.Advance]
// or [Clock.Set] is called. It is safe for concurrent use.
//
// Timers fire inside Advance, in order of their deadlines, with the clock set
// to each deadline as it fires. AfterFunc callbacks run synchronously in the
// goroutine that called Advance, so a test sees their effects as soon as
// Advance returns.
type Clock struct {
	mu     sync.Mutex
	cond   sync.Cond
	now    time.Time
	seq    uint64
	timers []*timer
}

var _ resilience.Clock = (*Clock)(nil)

// NewClock returns a fake clock set to start.
func NewClock(start time.Time) *Clock {
	c := &Clock{now: start}
	c.cond.L = &c.mu
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Since returns the time passed since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// NewTimer returns a timer whose channel receives the clock's time once the
// clock has advanced by d.
func (c *Clock) NewTimer(d time.Duration) resilience.Timer {
	return c.add(d, make(chan time.Time, 1), nil)
}

// AfterFunc returns a timer that calls f, in the goroutine advancing the
// clock, once the clock has advanced by d. A timer with d <= 0 fires on the
// next Advance (even Advance(0)), never inside AfterFunc.
func (c *Clock) AfterFunc(d time.Duration, f func()) resilience.Timer {
	return c.add(d, nil, f)
}

func (c *Clock) add(d time.Duration, ch chan time.Time, f func()) *timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{c: c, when: c.now.Add(d), seq: c.seq, ch: ch, f: f}
	c.timers = append(c.timers, t)
	c.cond.Broadcast()
	return t
}

// Advance moves the clock forward by d, firing every timer that falls due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.advanceTo(c.now.Add(d))
}

// Set moves the clock to t (which must not be before Now), firing every timer
// that falls due.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	if t.Before(c.now) {
		c.mu.Unlock()
		panic("resiliencetest: Clock.Set moves time backwards")
	}
	c.advanceTo(t)
}

// Step moves the clock's time by d, backwards or forwards, as a wall-clock
// step (NTP, a virtual machine restored) moves a clock whose times carry no
// monotonic reading. Timers keep the time left until they fire, as real
// timers do, and none fires.
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, t := range c.timers {
		t.when = t.when.Add(d)
	}
}

// advanceTo is called with c.mu held and releases it.
func (c *Clock) advanceTo(end time.Time) {
	for {
		i := c.nextDue(end)
		if i < 0 {
			break
		}
		t := c.timers[i]
		c.timers = slices.Delete(c.timers, i, i+1)
		if t.when.After(c.now) {
			c.now = t.when
		}
		now := c.now
		c.mu.Unlock()
		if t.f != nil {
			t.f()
		} else {
			t.ch <- now
		}
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// nextDue returns the index of the earliest timer due by end, or -1.
func (c *Clock) nextDue(end time.Time) int {
	best := -1
	for i, t := range c.timers {
		if t.when.After(end) {
			continue
		}
		if best < 0 || t.when.Before(c.timers[best].when) ||
			(t.when.Equal(c.timers[best].when) && t.seq < c.timers[best].seq) {
			best = i
		}
	}
	return best
}

// Pending returns the number of timers that have neither fired nor been
// stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// WaitPending blocks until at least n timers are pending: a test calls it to
// know that a goroutine has reached a timed wait (a retry's backoff, say)
// before it advances the clock.
func (c *Clock) WaitPending(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) < n {
		c.cond.Wait()
	}
}

type timer struct {
	c    *Clock
	when time.Time
	seq  uint64
	ch   chan time.Time
	f    func()
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.timers, t)
	if i < 0 {
		return false
	}
	c.timers = slices.Delete(c.timers, i, i+1)
	return true
}
