package engine

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/resilience"
)

// watched is a caller's context that is not one of package context's,
// and counts the contexts derived from it that are live: package context
// registers each with its AfterFunc, and stops that when it ends.
type watched struct {
	context.Context
	done chan struct{}
	live atomic.Int32
}

func (c *watched) Done() <-chan struct{} { return c.done }

func (c *watched) AfterFunc(func()) func() bool {
	c.live.Add(1)
	var stopped atomic.Bool
	return func() bool {
		if stopped.Swap(true) {
			return false
		}
		c.live.Add(-1)
		return true
	}
}

// A call whose gate panics as it admits the attempt — meshless's own code,
// or an observer the gate tells (here the bulkhead's, at its acquired
// event) — is recorded as a call that panicked, on every unary path, as
// the hedged path and a stream's opening record it, and its context ends.
// Before, runPlain's, a Call's and RunOnce's calls were missing from
// meshless.call.duration, their overall timeout's and their retry policy's
// metrics, and a Call's context (the overall deadline's, of a method whose
// gates may make attempts wait) stayed live until that deadline.
func TestACallWhoseGatePanicsAsItAdmitsIsRecorded(t *testing.T) {
	for _, path := range []string{"plain", "call", "once", "hedged"} {
		t.Run(path, func(t *testing.T) {
			cfg := panicPolicies(t, path)
			if cfg.Defaults.Bulkhead == nil {
				cfg.Defaults.Bulkhead = &config.BulkheadSection{MaxConcurrentCalls: config.Ptr(4)}
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			var log []string
			obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
				return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
					if src.Kind == resilience.KindBulkhead && ev.Type == resilience.EventAcquired {
						panic("observer")
					}
					if src.Kind == resilience.KindCall {
						log = append(log, ev.Outcome.String()+" "+errString(ev.Err))
					}
				})
			})
			e, err := New(cfg, fakeTransport{}, Options{MaxKeys: 10, Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			m := lookup(e, "/a.B/C")
			if want := path != "call"; m.plain != want && path != "hedged" {
				t.Fatalf("plain = %v, want %v", m.plain, want)
			}
			ctx := &watched{Context: context.Background(), done: make(chan struct{})}
			a := &scripted{script: func(int) error { return nil }}
			r := recovered(func() {
				if path == "once" {
					_ = m.RunOnce(ctx, a)
					return
				}
				_, _ = m.Run(ctx, a)
			})
			if r != "observer" {
				t.Fatalf("recovered %v, want the observer's panic unchanged", r)
			}
			if len(a.marks) != 0 {
				t.Errorf("%d attempts made, want none", len(a.marks))
			}
			if b := m.Bulkhead(); b.Active() != 0 {
				t.Errorf("%d bulkhead permits out after the panic, want 0", b.Active())
			}
			want := "failure " + resilience.ErrPanicked.Error()
			if len(log) != 1 || log[0] != want {
				t.Errorf("call events %q, want one %q", log, want)
			}
			if n := ctx.live.Load(); n != 0 {
				t.Errorf("%d contexts derived from the caller's are live after the panic, want 0", n)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// panickingEntry is an attempt that fails, and whose call's dead-letter
// entry panics as it is made (a request whose encoding panics).
type panickingEntry struct{}

func (panickingEntry) Attempt(context.Context, int) error { return &codeError{code: 14} }

func (panickingEntry) Entry(context.Context) (deadletter.Entry, bool) { panic("entry") }

// A call whose dead-letter entry panics as the call is deferred, once its
// attempts have failed, is recorded as a call that panicked, and its
// context ends, on every unary path that defers. Before, it was missing
// from meshless.call.duration and its overall timeout's metrics, and a
// Call's context stayed live until its overall deadline.
func TestACallWhoseDeferralPanicsIsRecorded(t *testing.T) {
	for _, path := range []string{"plain", "call", "hedged"} {
		t.Run(path, func(t *testing.T) {
			cfg := panicPolicies(t, path)
			if cfg.Defaults.Retry != nil {
				cfg.Defaults.Retry.MaxAttempts = config.Ptr(1)
			}
			cfg.Defaults.DeadLetter = &config.DeadLetterSection{On: []string{"RETRIES_EXHAUSTED"}, Path: config.Ptr(t.TempDir() + "/dl.db")}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			var log []string
			obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
				return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
					if src.Kind == resilience.KindCall {
						log = append(log, ev.Outcome.String()+" "+errString(ev.Err))
					}
				})
			})
			e, err := New(cfg, dlTransport{}, Options{MaxKeys: 10, Observer: obs})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			m := lookup(e, "/a.B/C")
			ctx := &watched{Context: context.Background(), done: make(chan struct{})}
			if r := recovered(func() { _, _ = m.Run(ctx, panickingEntry{}) }); r != "entry" {
				t.Fatalf("recovered %v, want the entry's panic unchanged", r)
			}
			want := "failure " + resilience.ErrPanicked.Error()
			if len(log) != 1 || log[0] != want {
				t.Errorf("call events %q, want one %q", log, want)
			}
			if n := ctx.live.Load(); n != 0 {
				t.Errorf("%d contexts derived from the caller's are live after the panic, want 0", n)
			}
		})
	}
}
