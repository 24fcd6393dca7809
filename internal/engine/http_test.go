package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/retry"
)

// countAttempts is an Attempt that fails every attempt with err.
type countAttempts struct {
	n   int
	err error
}

func (a *countAttempts) Attempt(context.Context, int) error { a.n++; return a.err }

// With RetryUncoded an error that carries no code (a transport error) is
// retried, besides the listed codes; without it, it is not; a local
// rejection never is.
func TestRetryUncoded(t *testing.T) {
	cfg := &config.Config{Defaults: config.Policies{
		Retry:          &config.RetrySection{MaxAttempts: config.Ptr(3), InitialBackoff: config.Dur(time.Millisecond)},
		CircuitBreaker: &config.CircuitBreakerSection{Enabled: config.Ptr(false)},
	}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	uncoded := errors.New("connection refused")
	for _, tc := range []struct {
		name    string
		on      bool
		err     error
		attempt int
	}{
		{"uncoded, on", true, uncoded, 3},
		{"uncoded, off", false, uncoded, 1},
		{"a listed code, off", false, &codeError{code: 14}, 3},
		{"a code not listed, on", true, &codeError{code: 5}, 1},
		{"a relayed rejection, on", true, &codeError{code: 14, relayed: resilience.KindCircuitBreaker}, 1},
		{"a local rejection, on", true, circuitbreaker.ErrOpen, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := New(cfg, fakeTransport{}, Options{MaxKeys: 10, RetryUncoded: tc.on})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			a := &countAttempts{err: tc.err}
			if _, err := lookup(e, "/a.B/C").Run(t.Context(), a); err == nil {
				t.Fatal("the call succeeded")
			}
			if a.n != tc.attempt {
				t.Errorf("%d attempts, want %d", a.n, tc.attempt)
			}
		})
	}
}

// RunOnce on a retrying method makes one attempt and ends the attempt
// policy's call: its observer hears the call end, committed, after one
// attempt.
func TestRunOnceEndsTheRetryCall(t *testing.T) {
	var (
		mu     sync.Mutex
		events []resilience.Event
	)
	obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		if src.Kind != resilience.KindRetry {
			return nil
		}
		return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, ev)
		})
	})
	cfg := &config.Config{Defaults: config.Policies{Retry: &config.RetrySection{MaxAttempts: config.Ptr(3)}}}
	e, err := New(cfg, fakeTransport{}, Options{MaxKeys: 10, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	a := &countAttempts{err: &codeError{code: 14}}
	if err := lookup(e, "/a.B/C").RunOnce(t.Context(), a); err == nil || a.n != 1 {
		t.Fatalf("RunOnce: %v after %d attempts, want a failure after 1", err, a.n)
	}
	mu.Lock()
	defer mu.Unlock()
	var done []resilience.Event
	for _, ev := range events {
		if ev.Type == resilience.EventRetryDone {
			done = append(done, ev)
		}
	}
	if len(done) != 1 || done[0].Attempt != 1 || done[0].Reason != retry.ReasonCommitted {
		t.Fatalf("retry done events %+v, want one: 1 attempt, committed", done)
	}
}
