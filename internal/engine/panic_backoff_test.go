package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshless/meshless/resilience"
)

// timerPanics is wallClock whose timers panic: a retry's backoff panics.
type timerPanics struct{ wallClock }

func (timerPanics) NewTimer(time.Duration) resilience.Timer { panic("backoff") }

// A unary call whose retry panics between attempts — in the backoff's
// wait (the clock's timer) or as it decides the retry (an observer told
// of it) — is recorded as a call that failed with resilience.ErrPanicked,
// and its retry policy's call ends with the one attempt made
// (meshless.retry.attempts 1, meshless.retry.calls failed_without_retry).
// Nothing recovered the panic there: the call and the policy's call were
// missing from every record, as for an attempt that panics before
// TestAPanickingCallIsRecordedAsAFailedCall.
func TestAPanicBetweenAttemptsEndsTheCallWithTheAttemptsMade(t *testing.T) {
	for _, path := range []string{"plain", "call"} {
		for _, where := range []string{"clock", "observer"} {
			t.Run(path+"/"+where, func(t *testing.T) {
				var (
					mu  sync.Mutex
					log []string
				)
				obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
					return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
						line := fmt.Sprintf("%s %v outcome=%v attempt=%d err=%v", src.Kind, ev.Type, ev.Outcome, ev.Attempt, ev.Err)
						mu.Lock()
						log = append(log, line)
						mu.Unlock()
						if where == "observer" && ev.Type == resilience.EventRetry {
							panic("backoff")
						}
					})
				})
				opts := Options{MaxKeys: 10, Observer: obs}
				if where == "clock" {
					opts.Clock = timerPanics{}
				}
				e, err := New(panicPolicies(t, path), fakeTransport{}, opts)
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				m := lookup(e, "/a.B/C")
				mu.Lock()
				log = log[:0]
				mu.Unlock()
				a := &scripted{script: func(int) error { return &codeError{code: 14} }} // UNAVAILABLE: retried
				if r := recovered(func() { _, _ = m.Run(t.Context(), a) }); r != "backoff" {
					t.Fatalf("recovered %v, want the backoff's panic unchanged", r)
				}
				if b := m.Bulkhead(); b != nil && b.Active() != 0 {
					t.Errorf("%d bulkhead permits out after the call, want 0", b.Active())
				}
				mu.Lock()
				defer mu.Unlock()
				for _, want := range []string{
					"retry attempt outcome=failure attempt=1 err=code 14",
					"retry retry_done outcome=failure attempt=1 err=" + resilience.ErrPanicked.Error(),
					"call call outcome=failure attempt=0 err=" + resilience.ErrPanicked.Error(),
				} {
					if got := countPrefix(log, want); got != 1 {
						t.Errorf("%d events %q, want 1; events:\n%s", got, want, strings.Join(log, "\n"))
					}
				}
				if got := countPrefix(log, "retry attempt"); got != 1 {
					t.Errorf("%d attempt events, want 1: one attempt was made; events:\n%s", got, strings.Join(log, "\n"))
				}
			})
		}
	}
}
