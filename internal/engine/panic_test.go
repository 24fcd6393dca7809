package engine

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/resilience"
)

// panicPolicies are the policies of the panic tests: a retry, both
// timeouts, and what the path needs on top (a bulkhead that queues makes a
// method take a Call; hedging, a hedged call).
func panicPolicies(t *testing.T, path string) *config.Config {
	t.Helper()
	p := config.Policies{
		Retry:   &config.RetrySection{MaxAttempts: config.Ptr(3), InitialBackoff: config.Dur(time.Millisecond)},
		Timeout: &config.TimeoutSection{PerAttempt: config.Dur(time.Hour), Overall: config.Dur(2 * time.Hour)},
	}
	switch path {
	case "call":
		p.Bulkhead = &config.BulkheadSection{MaxConcurrentCalls: config.Ptr(4), MaxWaitDuration: config.Dur(time.Minute)}
	case "hedged":
		p.Retry = nil
		p.Hedging = &config.HedgingSection{MaxAttempts: config.Ptr(2), HedgingDelay: config.Dur(time.Hour)}
	}
	cfg := &config.Config{Defaults: p}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A call whose attempt panics ends its own context as a call that
// returns does: the overall deadline's context of a method whose gates may
// make attempts wait (Call.cancel) was left to its timer, an hour away.
func TestAPanickingCallEndsItsContext(t *testing.T) {
	for _, run := range []string{"Run", "RunOnce"} {
		t.Run(run, func(t *testing.T) {
			cfg := panicPolicies(t, "call")
			cfg.Defaults.Timeout.PerAttempt = config.Dur(0) // the attempt runs under the call's context
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			e, err := New(cfg, fakeTransport{}, Options{MaxKeys: 10})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			m := lookup(e, "/a.B/C")
			var seen context.Context
			a := &scripted{script: func(int) error { panic("attempt") }}
			attempt := func(ctx context.Context, n int) error { seen = ctx; return a.Attempt(ctx, n) }
			r := recovered(func() {
				if run == "Run" {
					_, _ = m.Run(t.Context(), attemptFunc(attempt))
				} else {
					_ = m.RunOnce(t.Context(), attemptFunc(attempt))
				}
			})
			if r != "attempt" {
				t.Fatalf("recovered %v, want the attempt's panic unchanged", r)
			}
			if _, ok := seen.Deadline(); !ok {
				t.Fatal("the attempt's context has no deadline: the test does not test the overall one")
			}
			if seen.Err() == nil {
				t.Fatal("the panicking call's context is still live, its deadline's timer set")
			}
		})
	}
}

type attemptFunc func(ctx context.Context, n int) error

func (f attemptFunc) Attempt(ctx context.Context, n int) error { return f(ctx, n) }

// panicEvents runs one call of script on path's method and returns the
// events it recorded, one line each, and what it panicked with.
func panicEvents(t *testing.T, path string, script func(n int) error) ([]string, any) {
	t.Helper()
	var (
		mu  sync.Mutex
		log []string
	)
	obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
			kind := src.Kind.String()
			if src.Scope != "" {
				kind += "/" + src.Scope
			}
			line := fmt.Sprintf("%s %v outcome=%v attempt=%d winner=%d timedOut=%v err=%v",
				kind, ev.Type, ev.Outcome, ev.Attempt, ev.Winner, ev.TimedOut, ev.Err)
			mu.Lock()
			log = append(log, line)
			mu.Unlock()
		})
	})
	e, err := New(panicPolicies(t, path), fakeTransport{}, Options{MaxKeys: 10, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	m := lookup(e, "/a.B/C")
	if want := path != "call"; m.plain != want {
		t.Fatalf("%s: plain = %v, want %v", path, m.plain, want)
	}
	mu.Lock()
	log = log[:0]
	mu.Unlock()
	a := &scripted{script: script}
	r := recovered(func() {
		if path == "once" {
			_ = m.RunOnce(t.Context(), a)
			return
		}
		_, _ = m.Run(t.Context(), a)
	})
	if b := m.Bulkhead(); b != nil && b.Active() != 0 {
		t.Errorf("%d bulkhead permits out after the call, want 0", b.Active())
	}
	mu.Lock()
	defer mu.Unlock()
	return append([]string(nil), log...), r
}

// countPrefix counts the lines of log that begin with prefix.
func countPrefix(log []string, prefix string) int {
	n := 0
	for _, l := range log {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// panicPaths are the paths a unary call takes: runPlain, a Call, RunOnce,
// a retry on runPlain's Call, and a hedged call.
var panicPaths = []struct {
	name, path string
	script     func(n int) error
}{
	{"plain", "plain", func(int) error { panic("attempt") }},
	{"call", "call", func(int) error { panic("attempt") }},
	{"once", "once", func(int) error { panic("attempt") }},
	{"retry", "plain", func(n int) error {
		if n == 1 {
			return &codeError{code: 14} // UNAVAILABLE: retried
		}
		panic("attempt")
	}},
	{"hedged", "hedged", func(int) error { panic("attempt") }},
}

// A call whose attempt panics is recorded as a call that failed with
// resilience.ErrPanicked (meshless.call.duration, error.type the
// transport's name for an error without a code) and counted by its
// overall timeout as completed, on every path: it was recorded by neither,
// so that a method that panics on every call looked idle.
func TestAPanickingCallIsRecordedAsAFailedCall(t *testing.T) {
	for _, tc := range panicPaths {
		t.Run(tc.name, func(t *testing.T) {
			log, r := panicEvents(t, tc.path, tc.script)
			if r != "attempt" {
				t.Fatalf("recovered %v, want the attempt's panic unchanged", r)
			}
			want := "call call outcome=failure attempt=0 winner=0 timedOut=false err=" + resilience.ErrPanicked.Error()
			if n := countPrefix(log, want); n != 1 {
				t.Errorf("%d call events %q, want 1; events:\n%s", n, want, strings.Join(log, "\n"))
			}
			want = "timeout/overall call outcome=success attempt=0 winner=0 timedOut=false"
			if n := countPrefix(log, want); n != 1 {
				t.Errorf("%d overall timeout events %q, want 1; events:\n%s", n, want, strings.Join(log, "\n"))
			}
		})
	}
}

// A call whose attempt panics is one logical call for its retry policy
// (meshless.retry.calls, failed_without_retry or failed_with_retry) and
// the panicking attempt one of its attempts (meshless.retry.attempts): the
// policy was never told, and the call was missing from both. A panic is
// not retried and, as a failure that is no answer of the backend's, takes
// no retry-throttle token, even where an error without a code is
// retryable (Options.RetryUncoded, httpmw's).
func TestAPanickingCallEndsItsRetryPolicysCall(t *testing.T) {
	for _, tc := range panicPaths {
		if tc.path == "hedged" {
			continue // a hedged unary call has no retry policy
		}
		t.Run(tc.name, func(t *testing.T) {
			log, r := panicEvents(t, tc.path, tc.script)
			if r != "attempt" {
				t.Fatalf("recovered %v, want the attempt's panic unchanged", r)
			}
			n := 1
			if tc.name == "retry" {
				n = 2
			}
			for _, want := range []string{
				fmt.Sprintf("retry attempt outcome=failure attempt=%d winner=0 timedOut=false err=%v", n, resilience.ErrPanicked),
				fmt.Sprintf("retry retry_done outcome=failure attempt=%d winner=0 timedOut=false err=%v", n, resilience.ErrPanicked),
			} {
				if got := countPrefix(log, want); got != 1 {
					t.Errorf("%d events %q, want 1; events:\n%s", got, want, strings.Join(log, "\n"))
				}
			}
		})
	}
	t.Run("throttle", func(t *testing.T) {
		cfg := panicPolicies(t, "plain")
		cfg.RetryThrottling = &config.RetryThrottlingSection{MaxTokens: config.Ptr(10.0), TokenRatio: config.Ptr(0.1)}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		e, err := New(cfg, fakeTransport{}, Options{MaxKeys: 10, RetryUncoded: true})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		m := lookup(e, "/a.B/C")
		a := &scripted{script: func(int) error { panic("attempt") }}
		for range 3 {
			if r := recovered(func() { _, _ = m.Run(t.Context(), a) }); r != "attempt" {
				t.Fatalf("recovered %v, want the attempt's panic unchanged", r)
			}
		}
		if got := e.Throttle().Tokens(); got != 10 {
			t.Errorf("the retry throttle holds %v tokens after 3 panics, want 10", got)
		}
	})
}

// A panicking attempt is counted by its per-attempt timeout
// (meshless.timeout.calls, kind attempt) as an attempt that ended at the
// panic: completed, its deadline being an hour away. It was not counted.
func TestAPanickingAttemptIsCountedByItsTimeout(t *testing.T) {
	for _, tc := range panicPaths {
		t.Run(tc.name, func(t *testing.T) {
			log, r := panicEvents(t, tc.path, tc.script)
			if r != "attempt" {
				t.Fatalf("recovered %v, want the attempt's panic unchanged", r)
			}
			want, n := "timeout/attempt call outcome=success attempt=0 winner=0 timedOut=false", 1
			if tc.name == "retry" {
				n = 2 // the failure before the panic
			}
			if got := countPrefix(log, want); got != n {
				t.Errorf("%d events %q, want %d; events:\n%s", got, want, n, strings.Join(log, "\n"))
			}
		})
	}
}

// A hedged call whose copy panics is over for its hedging policy
// (meshless.hedging.attempts, no winner), on the engine's path
// (hedgehooks.Run): it was not reported.
func TestAPanickingHedgedCallIsOverForItsHedge(t *testing.T) {
	log, r := panicEvents(t, "hedged", func(int) error { panic("attempt") })
	if r != "attempt" {
		t.Fatalf("recovered %v, want the attempt's panic unchanged", r)
	}
	want := "hedging hedge_done outcome=success attempt=1 winner=0 timedOut=false err=" + resilience.ErrPanicked.Error()
	if got := countPrefix(log, want); got != 1 {
		t.Errorf("%d events %q, want 1; events:\n%s", got, want, strings.Join(log, "\n"))
	}
}
