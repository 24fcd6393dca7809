package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/resilience"
)

// wallClock is the system clock behind the Clock interface, saying its
// readings are real time: a method on it is plain, and runPlain reads it
// through the interface.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
func (wallClock) RealTime() bool { return true }
func (wallClock) NewTimer(d time.Duration) resilience.Timer {
	return resilience.SystemClock().NewTimer(d)
}
func (wallClock) AfterFunc(d time.Duration, f func()) resilience.Timer {
	return resilience.SystemClock().AfterFunc(d, f)
}

// scripted is an attempt that does what its script says for attempt n,
// and notes the attempt numbers it was marked with.
type scripted struct {
	script func(n int) error
	marks  []any
}

func (s *scripted) Attempt(ctx context.Context, n int) error {
	s.marks = append(s.marks, ctx.Value(attemptsKey{}))
	return s.script(n)
}

// otherClock is the system clock behind the Clock interface, not saying
// its readings are real time: a method on it is not plain, and takes a
// Call.
type otherClock struct{ resilience.Clock }

// A plain method's call (runPlain: one function, its gates entered and
// exited in place) is the call a Call makes, seen from everywhere: the
// result, the attempts and their marks, every policy's events in order,
// the permits given back, on every path — a success, a retry, retries
// exhausted, a refusal, and a panic in the attempt, in a gate's Enter and
// in a gate's Exit. The same calls run on the system clock and on a clock
// of the options (both plain) and on the same policies through a Call.
func TestAPlainCallIsACallsCall(t *testing.T) {
	unavailable := &codeError{code: 14}
	cases := []struct {
		name   string
		script func(n int) error
		open   bool // the breaker is forced open
		// panics makes the observer panic at an event: in a gate's Enter
		// (the throttler's EventAcquired) or Exit (the bulkhead's release).
		panics resilience.EventType
	}{
		{name: "success", script: func(int) error { return nil }},
		{name: "business answer", script: func(int) error { return &codeError{code: 5} }},
		{name: "retried", script: func(n int) error {
			if n == 1 {
				return unavailable
			}
			return nil
		}},
		{name: "retries exhausted", script: func(int) error { return unavailable }},
		{name: "refused", script: func(int) error { return nil }, open: true},
		{name: "panic in the attempt", script: func(int) error { panic("attempt") }},
		{name: "panic in an Enter", script: func(int) error { return nil }, panics: resilience.EventAcquired},
		{name: "panic in an Exit", script: func(int) error { return nil }, panics: resilience.EventReleased},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			call := runScripted(t, otherClock{resilience.SystemClock()}, false, tc.script, tc.open, tc.panics)
			for _, clock := range []resilience.Clock{nil, wallClock{}} {
				if got := runScripted(t, clock, true, tc.script, tc.open, tc.panics); got != call {
					t.Fatalf("a plain call on %T\n%s\nwant a Call's\n%s", clock, got, call)
				}
			}
		})
	}
}

// runScripted makes one call of script on a new engine with clock, and
// returns what it saw, in order.
func runScripted(t *testing.T, clock resilience.Clock, plain bool, script func(int) error, open bool, panics resilience.EventType) string {
	t.Helper()
	cfg := &config.Config{Defaults: config.Policies{
		Retry: &config.RetrySection{MaxAttempts: config.Ptr(3), InitialBackoff: config.Dur(time.Millisecond)},
	}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex
		log []string
	)
	obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
			mu.Lock()
			log = append(log, fmt.Sprintf("%v %v outcome=%v attempt=%d err=%v reason=%v state=%v",
				src.Kind, ev.Type, ev.Outcome, ev.Attempt, ev.Err, ev.Reason, ev.State))
			mu.Unlock()
			if panics != 0 && ev.Type == panics {
				panic(fmt.Sprint("observer at ", ev.Type))
			}
		})
	})
	e, err := New(cfg, fakeTransport{}, Options{MaxKeys: 10, Observer: obs, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	m := lookup(e, "/a.B/C")
	if m.plain != plain {
		t.Fatalf("plain = %v, want %v", m.plain, plain)
	}
	if open {
		m.Breaker().ForceOpen()
	}
	mu.Lock()
	log = log[:0] // what building the method reported
	mu.Unlock()
	a := &scripted{script: script}
	var n int
	var cerr error
	r := recovered(func() { n, cerr = m.Run(t.Context(), a) })
	if active := m.Bulkhead().Active(); active != 0 {
		t.Errorf("%d bulkhead permits out after the call, want 0", active)
	}
	mu.Lock()
	defer mu.Unlock()
	return fmt.Sprintf("n=%d err=%v panic=%v marks=%v\n%s", n, cerr, r, a.marks, strings.Join(log, "\n"))
}

// recovered runs f and returns what it panicked with.
func recovered(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}

// countingClock counts the readings of the system clock, which it says are
// real time.
type countingClock struct {
	wallClock
	reads atomic.Int64
}

func (c *countingClock) Now() time.Time { c.reads.Add(1); return time.Now() }

// A plain call that succeeds at once reads the clock twice — its start and
// its attempt's end — and a retried one once more per attempt (B15, as
// grpcmw's TestACallReadsTheClockTwice counts it through the interceptor).
func TestAPlainCallReadsTheClockTwice(t *testing.T) {
	clk := new(countingClock)
	e, err := New(nil, fakeTransport{}, Options{MaxKeys: 10, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	m := lookup(e, "/a.B/C")
	if !m.plain {
		t.Fatal("a method on the defaults and a real-time clock is not plain")
	}
	for _, tc := range []struct {
		name   string
		script func(n int) error
		want   int64
	}{
		{"success", func(int) error { return nil }, 2},
		{"a retry", func(n int) error {
			if n == 1 {
				return &codeError{code: 14}
			}
			return nil
		}, 4},
	} {
		before := clk.reads.Load()
		if _, err := m.Run(t.Context(), &scripted{script: tc.script}); err != nil {
			t.Fatal(err)
		}
		if n := clk.reads.Load() - before; n != tc.want {
			t.Errorf("%s: %d clock reads, want %d", tc.name, n, tc.want)
		}
	}
}
