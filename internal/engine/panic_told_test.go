package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/meshless/meshless/resilience"
)

// A unary call whose retry policy panics as it is told of the call's last
// attempt — an observer told of that attempt, or of the policy's call
// being done — is recorded as a call that panicked, on every unary path,
// after a success as after a failure that is not retried: its retry
// policy's call ends once (failed, with the attempts made), the overall
// timeout counts it, the call is a failed call with
// resilience.ErrPanicked, and its context ends. Before, a success's call
// (and RunOnce's, whatever its result) was missing from
// meshless.call.duration, its overall timeout's and its retry policy's
// metrics, and a Call's context (the overall deadline's, of a method whose
// gates may make attempts wait) stayed live until that deadline.
func TestAPanicAsTheRetryIsToldOfTheLastAttemptEndsTheCall(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		last       error // the last attempt's result
		n          int   // attempts made
	}{
		{"plain/ok", "plain", nil, 1},
		{"plain/retried-ok", "plain", nil, 2},
		{"call/ok", "call", nil, 1},
		{"call/retried-ok", "call", nil, 2},
		{"call/internal", "call", &codeError{code: 13}, 1},
		{"once/ok", "once", nil, 1},
		{"once/internal", "once", &codeError{code: 13}, 1},
	} {
		for _, at := range []resilience.EventType{resilience.EventAttempt, resilience.EventRetryDone} {
			t.Run(tc.name+"/"+at.String(), func(t *testing.T) {
				var (
					mu  sync.Mutex
					log []string
					on  bool
				)
				obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
					return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
						mu.Lock()
						defer mu.Unlock()
						if !on {
							return
						}
						log = append(log, fmt.Sprintf("%s/%s %v outcome=%v attempt=%d err=%v", src.Kind, src.Scope, ev.Type, ev.Outcome, ev.Attempt, ev.Err))
						if src.Kind == resilience.KindRetry && ev.Type == at && ev.Attempt == tc.n {
							panic("observer")
						}
					})
				})
				e, err := New(panicPolicies(t, tc.path), fakeTransport{}, Options{MaxKeys: 10, Observer: obs})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				m := lookup(e, "/a.B/C")
				mu.Lock()
				on = true
				mu.Unlock()
				a := &scripted{script: func(n int) error {
					if n < tc.n {
						return &codeError{code: 14} // UNAVAILABLE: retried
					}
					return tc.last
				}}
				ctx := &watched{Context: context.Background(), done: make(chan struct{})}
				r := recovered(func() {
					if tc.path == "once" {
						_ = m.RunOnce(ctx, a)
						return
					}
					_, _ = m.Run(ctx, a)
				})
				if r != "observer" {
					t.Fatalf("recovered %v, want the observer's panic unchanged", r)
				}
				if len(a.marks) != tc.n {
					t.Fatalf("%d attempts made, want %d", len(a.marks), tc.n)
				}
				if b := m.Bulkhead(); b != nil && b.Active() != 0 {
					t.Errorf("%d bulkhead permits out after the call, want 0", b.Active())
				}
				if n := ctx.live.Load(); n != 0 {
					t.Errorf("%d contexts derived from the caller's are live after the panic, want 0", n)
				}
				mu.Lock()
				defer mu.Unlock()
				done := fmt.Sprintf("retry/ retry_done outcome=failure attempt=%d err=%v", tc.n, resilience.ErrPanicked)
				if at == resilience.EventRetryDone { // told before it panicked
					done = fmt.Sprintf("retry/ retry_done outcome=%v attempt=%d err=%v", outcomeOf(tc.last), tc.n, tc.last)
				}
				for _, want := range []string{
					fmt.Sprintf("retry/ attempt outcome=%v attempt=%d err=%v", outcomeOf(tc.last), tc.n, tc.last),
					done,
					"timeout/overall call outcome=success",
					"call/ call outcome=failure attempt=0 err=" + resilience.ErrPanicked.Error(),
				} {
					if got := countPrefix(log, want); got != 1 {
						t.Errorf("%d events %q, want 1; events:\n%s", got, want, strings.Join(log, "\n"))
					}
				}
				for _, once := range []string{"retry/ retry_done", "call/ call"} {
					if got := countPrefix(log, once); got != 1 {
						t.Errorf("%d events %q, want 1; events:\n%s", got, once, strings.Join(log, "\n"))
					}
				}
			})
		}
	}
}

func outcomeOf(err error) resilience.Outcome {
	if err == nil {
		return resilience.Success
	}
	return resilience.Failure
}
