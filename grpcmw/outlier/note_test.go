package outlier

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/internal/picknote"
	"github.com/meshless/meshless/resilience"
)

// readsClock is a clock that counts its reads.
type readsClock struct {
	resilience.Clock
	reads int
}

func (c *readsClock) Now() time.Time { c.reads++; return c.Clock.Now() }

// A call whose attempt carries a note (package picknote) is timed by the
// call path: the pick notes its endpoint and reads no clock, Done counts
// the result as an untimed call's, and the time the call path passes on
// counts the call slow when it is longer than the threshold, exactly, and
// its result is not ignored.
func TestANotedCallIsTimedByTheCallPath(t *testing.T) {
	const threshold = 64 * time.Millisecond
	clock := &readsClock{Clock: resilience.SystemClock()}
	e, b := timedEndpoint(clock, threshold)
	p := &picker{child: fixedPicker{&subConn{ep: e}}, b: b}
	unavailable := status.Error(codes.Unavailable, "down")
	for _, tc := range []struct {
		name               string
		err                error
		took               time.Duration
		success, fail, slo int64
	}{
		{"fast", nil, time.Millisecond, 1, 0, 0},
		{"at the threshold", nil, threshold, 1, 0, 0},
		{"just over it", nil, threshold + 1, 1, 0, 1},
		{"a slow failure", unavailable, time.Second, 0, 1, 1},
		{"a slow NOT_FOUND", status.Error(codes.NotFound, "no"), time.Second, 1, 0, 1},
		{"a slow CANCELLED, ignored", status.Error(codes.Canceled, "gone"), time.Second, 0, 0, 0},
		{"a slow context.Canceled, ignored", context.Canceled, time.Second, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.success.Store(0)
			e.failure.Store(0)
			e.slow.Store(0)
			clock.reads = 0
			note := picknote.New(t.Context())
			res, err := p.Pick(balancer.PickInfo{FullMethodName: "/s/m", Ctx: context.WithValue(note, ctxKey{}, 1)})
			if err != nil {
				t.Fatal(err)
			}
			res.Done(balancer.DoneInfo{Err: tc.err})
			note.Took(tc.err, tc.took)
			if s, f, sl := e.success.Load(), e.failure.Load(), e.slow.Load(); s != tc.success || f != tc.fail || sl != tc.slo {
				t.Errorf("success, failure, slow = %d, %d, %d; want %d, %d, %d", s, f, sl, tc.success, tc.fail, tc.slo)
			}
			if clock.reads != 0 {
				t.Errorf("the pick and Done read the balancer's clock %d times, want none", clock.reads)
			}
		})
	}
	// Without a note, the picker times the call itself: one read at the
	// pick, one at Done.
	clock.reads = 0
	res, err := p.Pick(balancer.PickInfo{FullMethodName: "/s/m", Ctx: t.Context()})
	if err != nil {
		t.Fatal(err)
	}
	res.Done(balancer.DoneInfo{})
	if clock.reads != 2 {
		t.Errorf("an unnoted timed call read the clock %d times, want 2 (pick and Done)", clock.reads)
	}
}

type ctxKey struct{}

// With the slow-call detector off, a note is left alone: nothing is timed,
// and the time passed on counts nothing.
func TestANoteIsIgnoredWhenCallsAreNotTimed(t *testing.T) {
	e, b := timedEndpoint(resilience.SystemClock(), 0)
	p := &picker{child: fixedPicker{&subConn{ep: e}}, b: b}
	note := picknote.New(t.Context())
	res, err := p.Pick(balancer.PickInfo{FullMethodName: "/s/m", Ctx: note})
	if err != nil {
		t.Fatal(err)
	}
	res.Done(balancer.DoneInfo{})
	note.Took(nil, time.Hour)
	if e.success.Load() != 1 || e.slow.Load() != 0 {
		t.Fatalf("success %d, slow %d; want 1, 0", e.success.Load(), e.slow.Load())
	}
}

// A noted pick, its Done and the time passed on allocate nothing (the note
// is the call path's one allocation, made before the pick).
func TestANotedPickAllocatesNothing(t *testing.T) {
	e, b := timedEndpoint(resilience.SystemClock(), 500*time.Millisecond)
	p := &picker{child: fixedPicker{&subConn{ep: e}}, b: b}
	note := picknote.New(t.Context())
	info := balancer.PickInfo{FullMethodName: "/s/m", Ctx: note}
	if n := testing.AllocsPerRun(10_000, func() {
		res, err := p.Pick(info)
		if err != nil {
			t.Fatal(err)
		}
		res.Done(balancer.DoneInfo{})
		note.Took(nil, time.Second)
	}); n != 0 {
		t.Errorf("%v allocations per noted pick, want 0", n)
	}
	if e.slow.Load() == 0 {
		t.Error("no call was counted slow")
	}
}
