package engine

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshless/meshless/resilience"
)

// steppingClock is a real-time clock whose every reading is step after
// the one before it, from the time it was made.
type steppingClock struct {
	resilience.Clock
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}
func (c *steppingClock) RealTime() bool { return true }

// timedScript is a scripted attempt that is Timed, and notes what it is
// told.
type timedScript struct {
	scripted
	told []told
}

type told struct {
	n    int
	err  error
	took time.Duration
}

func (s *timedScript) Took(n int, err error, took time.Duration) {
	s.told = append(s.told, told{n, err, took})
}

// With Options.TimedAttempts, each attempt that ran is told its error as
// Attempt returned it and the time between the engine's readings of its
// start and end — on a plain method's path and a Call's, the first
// attempt and a retry — and nothing more is read from the clock for it.
// Without the option, nothing is told.
func TestATimedAttemptIsToldHowLongItTook(t *testing.T) {
	unavailable := &codeError{code: 14}
	both := []told{{1, unavailable, 10 * time.Millisecond}, {2, nil, 10 * time.Millisecond}}
	for _, tc := range []struct {
		name         string
		timed, plain bool
		want         []told
	}{
		{"plain, timed", true, true, both},
		{"through a Call, timed", true, false, both},
		{"not timed", false, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &steppingClock{Clock: resilience.SystemClock(), now: time.Now(), step: 10 * time.Millisecond}
			var c resilience.Clock = clk
			if !tc.plain {
				c = &stepOther{clk}
			}
			e, err := New(nil, fakeTransport{}, Options{MaxKeys: 10, Clock: c, TimedAttempts: tc.timed})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			m := lookup(e, "/a.B/C")
			if m.plain != tc.plain {
				t.Fatalf("plain = %v", m.plain)
			}
			a := &timedScript{scripted: scripted{script: func(n int) error {
				if n == 1 {
					return unavailable
				}
				return nil
			}}}
			n, err := m.Run(t.Context(), a)
			if err != nil || n != 2 {
				t.Fatalf("Run = %d, %v; want the second attempt's success", n, err)
			}
			if !slices.EqualFunc(a.told, tc.want, func(x, y told) bool {
				return x.n == y.n && errors.Is(x.err, y.err) && x.took == y.took
			}) {
				t.Fatalf("told %+v, want %+v", a.told, tc.want)
			}
		})
	}
}

// stepOther is a stepping clock that does not say its readings are real
// time: a method on it takes a Call.
type stepOther struct{ c *steppingClock }

func (s *stepOther) Now() time.Time { return s.c.Now() }
func (s *stepOther) NewTimer(d time.Duration) resilience.Timer {
	return resilience.SystemClock().NewTimer(d)
}
func (s *stepOther) AfterFunc(d time.Duration, f func()) resilience.Timer {
	return resilience.SystemClock().AfterFunc(d, f)
}
