package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshless/meshless/resilience"
)

// tookAttempt is a Timed attempt that succeeds; its Took notes that it was
// told, and panics when panics is set.
type tookAttempt struct {
	panics bool
	told   int
}

func (a *tookAttempt) Attempt(context.Context, int) error { return nil }
func (a *tookAttempt) Took(int, error, time.Duration) {
	a.told++
	if a.panics {
		panic("Took")
	}
}

// runTook makes one call of a on a new engine (the defaults: breaker,
// throttler, bulkhead, timeouts; TimedAttempts), plain or through a Call,
// with an observer that panics at the bulkhead's release when
// panicAtRelease is set. It returns what the gates and the timeouts
// reported, the panic, and how many times Took was told.
func runTook(t *testing.T, plain bool, a *tookAttempt, panicAtRelease bool) (events []string, p any, told int) {
	t.Helper()
	var mu sync.Mutex
	recording := false
	obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
			mu.Lock()
			if recording && (src.Kind == resilience.KindCircuitBreaker || src.Kind == resilience.KindTimeout) {
				events = append(events, fmt.Sprintf("%v %v outcome=%v timedOut=%v", src.Kind, ev.Type, ev.Outcome, ev.TimedOut))
			}
			mu.Unlock()
			if panicAtRelease && src.Kind == resilience.KindBulkhead && ev.Type == resilience.EventReleased {
				panic("observer")
			}
		})
	})
	e, err := New(nil, fakeTransport{}, Options{MaxKeys: 10, Observer: obs, TimedAttempts: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	m := lookup(e, "/a.B/C")
	if !m.plain {
		t.Fatal("the method is not plain")
	}
	m.plain = plain // false: the same method through a Call (begin, attempt, Finish, End)
	mu.Lock()
	recording = true
	mu.Unlock()
	p = recovered(func() { _, _ = m.Run(context.Background(), a) })
	if n := m.Bulkhead().Active(); n != 0 {
		t.Errorf("plain=%v: %d bulkhead permits out", plain, n)
	}
	mu.Lock()
	defer mu.Unlock()
	return events, p, a.told
}

// A Timed attempt's Took that panics after the attempt succeeded: through
// a Call, the attempt's deadline and every gate have already been told the
// attempt succeeded (Call.attempt: Finish, then tellTook); runPlain tells
// Took before it ends the attempt's deadline and exits the gates, while its
// stage is still "running", so the panic makes its deferred exit tell every
// gate ErrPanicked as a Failure (the breaker counts a failure for a
// healthy backend) and the per-attempt timeout's event is never reported.
func TestPlainTookPanicTellsTheGatesWhatACallTellsThem(t *testing.T) {
	callEv, callP, _ := runTook(t, false, &tookAttempt{panics: true}, false)
	plainEv, plainP, _ := runTook(t, true, &tookAttempt{panics: true}, false)
	if fmt.Sprint(callP) != fmt.Sprint(plainP) {
		t.Errorf("panic: plain %v, Call %v", plainP, callP)
	}
	if !slices.Equal(plainEv, callEv) {
		t.Errorf("events:\nplain %q\nCall  %q", plainEv, callEv)
	}
}

// An observer that panics at the bulkhead's release (in a gate's Exit)
// after an attempt succeeded: through a Call the attempt is never told how
// long it took (Finish panics before tellTook); runPlain has told it
// already, before the gates' exits.
func TestPlainTellsTookLikeACallWhenAnExitPanics(t *testing.T) {
	_, callP, callTold := runTook(t, false, &tookAttempt{}, true)
	_, plainP, plainTold := runTook(t, true, &tookAttempt{}, true)
	if fmt.Sprint(callP) != fmt.Sprint(plainP) {
		t.Errorf("panic: plain %v, Call %v", plainP, callP)
	}
	if plainTold != callTold {
		t.Errorf("Took told %d times on the plain path, %d through a Call", plainTold, callTold)
	}
}
