package engine

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/meshless/meshless/resilience"
)

// A unary call whose overall timeout's event panics (an observer told of
// it) is recorded as a call that panicked, on every unary path, whatever
// its result, and its context ends. Before, End stopped at that event:
// the call was missing from meshless.call.duration, and a Call's context
// (the overall deadline's, of a method whose gates may make attempts wait)
// stayed live until that deadline. An attempt that panics too, before it
// (the observer panics at every event of the overall timeout), changes
// nothing.
func TestAPanicAtTheOverallTimeoutsEventEndsTheCall(t *testing.T) {
	for _, path := range []string{"plain", "call", "once", "hedged"} {
		for _, result := range []string{"ok", "internal", "panic"} {
			t.Run(path+"/"+result, func(t *testing.T) {
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
						switch {
						case src.Kind == resilience.KindCall:
							log = append(log, ev.Outcome.String()+" "+errString(ev.Err))
						case src.Kind == resilience.KindTimeout && src.Scope == "overall":
							panic("observer")
						}
					})
				})
				e, err := New(panicPolicies(t, path), fakeTransport{}, Options{MaxKeys: 10, Observer: obs})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				m := lookup(e, "/a.B/C")
				mu.Lock()
				on = true
				mu.Unlock()
				a := &scripted{script: func(int) error {
					switch result {
					case "internal":
						return &codeError{code: 13} // not retried
					case "panic":
						panic("attempt")
					}
					return nil
				}}
				ctx := &watched{Context: context.Background(), done: make(chan struct{})}
				r := recovered(func() {
					if path == "once" {
						_ = m.RunOnce(ctx, a)
						return
					}
					_, _ = m.Run(ctx, a)
				})
				if r != "observer" {
					t.Fatalf("recovered %v, want the observer's panic", r)
				}
				if b := m.Bulkhead(); b != nil && b.Active() != 0 {
					t.Errorf("%d bulkhead permits out after the call, want 0", b.Active())
				}
				if n := ctx.live.Load(); n != 0 {
					t.Errorf("%d contexts derived from the caller's are live after the panic, want 0", n)
				}
				mu.Lock()
				defer mu.Unlock()
				if want := "failure " + resilience.ErrPanicked.Error(); len(log) != 1 || log[0] != want {
					t.Errorf("call events %q, want one %q", strings.Join(log, "; "), want)
				}
			})
		}
	}
}
