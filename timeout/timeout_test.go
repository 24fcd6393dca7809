package timeout_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshless/meshless/internal/pipeline"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/timeout"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hang waits for its context, as a well-behaved client of a hung server does.
func hang(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestTheEarlierDeadlineWins(t *testing.T) {
	tests := []struct {
		name     string
		timeout  time.Duration
		caller   time.Duration // 0: no deadline
		want     time.Duration // the deadline the call sees, from now
		timedOut bool
	}{
		{name: "no caller deadline", timeout: time.Second, want: time.Second, timedOut: true},
		{name: "caller's is later", timeout: time.Second, caller: 5 * time.Second, want: time.Second, timedOut: true},
		{name: "caller's is earlier", timeout: time.Second, caller: 300 * time.Millisecond, want: 300 * time.Millisecond},
		{name: "equal", timeout: time.Second, caller: time.Second, want: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				obs := new(resiliencetest.Observer)
				to, err := timeout.New(tt.timeout, timeout.WithObserver(obs), timeout.WithName("pkg.Svc/Get"))
				if err != nil {
					t.Fatal(err)
				}
				ctx := t.Context()
				if tt.caller > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.caller)
					defer cancel()
				}
				start := time.Now()
				var seen time.Duration
				err = to.Execute(ctx, func(ctx context.Context) error {
					dl, _ := ctx.Deadline()
					seen = dl.Sub(start)
					return hang(ctx)
				})
				if seen != tt.want || time.Since(start) != tt.want {
					t.Fatalf("call saw a deadline in %v and ended after %v, want %v", seen, time.Since(start), tt.want)
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err = %v, want a deadline error", err)
				}
				if got := errors.Is(err, timeout.ErrTimeout); got != tt.timedOut {
					t.Fatalf("errors.Is(err, ErrTimeout) = %v, want %v: %v", got, tt.timedOut, err)
				}
				ev := obs.Events(resilience.EventCall)
				if len(ev) != 1 || ev[0].TimedOut != tt.timedOut || ev[0].Duration != tt.want {
					t.Fatalf("events %+v, want one with TimedOut=%v after %v", ev, tt.timedOut, tt.want)
				}
			})
		})
	}
}

func TestTimeoutError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		to, _ := timeout.New(time.Second, timeout.WithScope(timeout.Overall))
		cause := errors.New("transport closed")
		err := to.Execute(t.Context(), func(ctx context.Context) error { <-ctx.Done(); return cause })
		var te *timeout.Error
		if !errors.As(err, &te) || te.Scope != timeout.Overall || te.Timeout != time.Second || !errors.Is(err, cause) {
			t.Fatalf("err = %#v, want an overall *timeout.Error wrapping the call's error", err)
		}
		if got := err.Error(); got != "overall timeout of 1s exceeded: transport closed" {
			t.Fatalf("Error() = %q", got)
		}
		if resilience.DefaultClassifier(err) != resilience.Failure {
			t.Fatal("a timeout is not a failure for the default classifier")
		}
	})
}

func TestFastCallsAndSuccessesAreUntouched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		to, _ := timeout.New(time.Second)
		want := errors.New("not found")
		if err := to.Execute(t.Context(), func(context.Context) error { return want }); err != want {
			t.Fatalf("err = %v, want the call's error unchanged", err)
		}
		// A call that succeeds just as its deadline passes is a success.
		err := to.Execute(t.Context(), func(ctx context.Context) error { <-ctx.Done(); return nil })
		if err != nil {
			t.Fatalf("err = %v, want nil", err)
		}
	})
}

func TestCallerCancellationIsNotATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		to, _ := timeout.New(time.Second)
		ctx, cancel := context.WithCancel(t.Context())
		go func() { time.Sleep(100 * time.Millisecond); cancel() }()
		err := to.Execute(ctx, hang)
		if err != context.Canceled {
			t.Fatalf("err = %v, want context.Canceled unchanged", err)
		}
	})
}

func TestZeroIsNoTimeout(t *testing.T) {
	to, err := timeout.New(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		_ = to.Execute(ctx, func(c context.Context) error {
			if c != ctx {
				t.Fatal("a zero timeout changed the context")
			}
			return nil
		})
	}); n != 0 {
		t.Fatalf("a zero timeout allocates %v times", n)
	}
}

func TestAllocations(t *testing.T) {
	to, _ := timeout.New(time.Second)
	ok := func(context.Context) error { return nil }
	short, cancel := context.WithTimeout(context.Background(), time.Millisecond*500)
	defer cancel()
	if n := testing.AllocsPerRun(100, func() { _ = to.Execute(short, ok) }); n != 0 {
		t.Errorf("under an earlier caller deadline: %v allocations, want 0", n)
	}
	n := testing.AllocsPerRun(100, func() { _ = to.Execute(context.Background(), ok) })
	if n > 4 {
		t.Errorf("deriving the deadline: %v allocations, want at most context.WithDeadline's 4", n)
	}
	t.Logf("deriving the deadline costs %v allocations", n)
}

func TestInvalidOptions(t *testing.T) {
	_, err := timeout.New(-time.Second)
	if err == nil || err.Error() != "timeout: perAttempt: must not be negative (0 means none), got -1s" {
		t.Fatalf("New(-1s) = %v", err)
	}
	_, err = timeout.New(-time.Second, timeout.WithScope(timeout.Overall))
	if err == nil || !strings.Contains(err.Error(), "overall: must not be negative") {
		t.Fatalf("New(-1s, Overall) = %v", err)
	}
	_, err = timeout.New(time.Second, timeout.WithScope(7))
	if err == nil || !strings.Contains(err.Error(), "scope: must be Attempt or Overall, got Scope(7)") {
		t.Fatalf("New with a bad scope = %v", err)
	}
	var oe *resilience.OptionError
	if !errors.As(err, &oe) {
		t.Fatal("not an OptionError")
	}
}

// TestFailureAtTheDeadlineIsOursBeforeTheContextNotices: a gRPC server
// enforces the same deadline, and its DEADLINE_EXCEEDED can come back before
// the client's context timer has fired. It is still the timeout's doing.
func TestFailureAtTheDeadlineIsOursBeforeTheContextNotices(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		to, _ := timeout.New(time.Second)
		serverSays := errors.New("rpc error: code = DeadlineExceeded")
		for range 20 {
			err := to.Execute(t.Context(), func(ctx context.Context) error {
				time.Sleep(time.Second) // wakes at the deadline, racing the context's timer
				return serverSays
			})
			if !errors.Is(err, timeout.ErrTimeout) || !errors.Is(err, serverSays) {
				t.Fatalf("err = %v, want the timeout's error wrapping the server's", err)
			}
		}
	})
}

func TestGateDerivesTheDeadlineAndReportsIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := new(resiliencetest.Observer)
		to, _ := timeout.New(time.Second, timeout.WithObserver(obs))
		p, err := pipeline.NewPipeline(nil, nil, to)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = p.Run(t.Context(), hang)
		if !errors.Is(err, timeout.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Second {
			t.Fatalf("err %v after %v, want the deadline at 1s", err, time.Since(start))
		}
		// The caller's earlier deadline governs: no timeout of ours.
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		if err := p.Run(ctx, func(ctx context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		ev := obs.Events(resilience.EventCall)
		if len(ev) != 2 || !ev[0].TimedOut || ev[0].Duration != time.Second || ev[1].TimedOut {
			t.Fatalf("events %+v, want a timed-out call of 1s, then a completed one", ev)
		}
	})
}

// A call that panics under the timeout releases the deadline's context on
// the way up, through Execute and through Apply in a chain: its timer does
// not wait for the deadline to go.
func TestAPanicReleasesTheDeadline(t *testing.T) {
	to, err := timeout.New(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, run := range map[string]func(fn func(context.Context) error) error{
		"Execute": func(fn func(context.Context) error) error { return to.Execute(context.Background(), fn) },
		"Apply": func(fn func(context.Context) error) error {
			return resilience.NewChain(to).Execute(context.Background(), fn)
		},
	} {
		var inner context.Context
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("%s: recovered %v, want the call's panic", name, r)
				}
			}()
			_ = run(func(ctx context.Context) error {
				inner = ctx
				panic("boom")
			})
		}()
		if inner == nil {
			t.Fatalf("%s: the call did not run", name)
		}
		if err := inner.Err(); err != context.Canceled {
			t.Errorf("%s: after the panic the call's context has Err() = %v, want context.Canceled", name, err)
		}
	}
}
