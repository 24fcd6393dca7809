package engine

import (
	"context"
	"testing"
	"time"

	"github.com/meshless/meshless/config"
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
