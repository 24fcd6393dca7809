package timeout

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/meshless/meshless/internal/timely"
	"github.com/meshless/meshless/internal/timeouthooks"
	"github.com/meshless/meshless/resilience"
)

// Scope says which part of a call a [Timeout] bounds.
type Scope uint8

const (
	// Attempt bounds each attempt: it sits inside the retry policy.
	Attempt Scope = iota
	// Overall bounds the whole call, every attempt and backoff: it sits
	// outside the retry policy.
	Overall
)

// String returns "attempt" or "overall", the values of the
// meshless.timeout.kind metric attribute.
func (s Scope) String() string {
	switch s {
	case Attempt:
		return "attempt"
	case Overall:
		return "overall"
	}
	return "Scope(" + strconv.Itoa(int(s)) + ")"
}

// ErrTimeout is matched with errors.Is by every [*Error].
var ErrTimeout = errors.New("timeout")

// Error is the error of a call that a [Timeout] ended. It matches both
// [ErrTimeout] and [context.DeadlineExceeded] with errors.Is (grpcmw reports
// it as DEADLINE_EXCEEDED), and unwraps to the error the call returned.
type Error struct {
	Scope   Scope
	Timeout time.Duration
	Err     error // what the call returned when its context ended
}

func (e *Error) Error() string {
	s := e.Scope.String() + " timeout of " + e.Timeout.String() + " exceeded"
	if e.Err != nil && e.Err != context.DeadlineExceeded {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is [ErrTimeout] or [context.DeadlineExceeded].
func (e *Error) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}

// Unwrap returns the call's own error.
func (e *Error) Unwrap() error { return e.Err }

// Timeout bounds a call's time with a deadline on its context. It never
// extends the caller's deadline: when the caller's is earlier, the call runs
// under the caller's context unchanged (and nothing is allocated). It starts
// no goroutine.
//
// The deadline is real time, read from package time, because that is the
// time context deadlines are measured in (tests use testing/synctest).
//
// A Timeout is safe for concurrent use.
type Timeout struct {
	d       time.Duration
	scope   Scope
	observe bool
	rec     resilience.Recorder
	// tell: in a chain, the breaker outside this copy takes a success
	// while the deadline was live as proof (internal/timely): not nil, the
	// longest timeout it takes, in nanoseconds.
	tell *atomic.Int64
}

var (
	_ resilience.Policy = (*Timeout)(nil)
	_ resilience.Gate   = (*Timeout)(nil)
)

// New returns a timeout of d for the given scope. d = 0 means no timeout:
// the policy passes calls through untouched, as `perAttempt: 0` does in
// configuration. A negative d is an error that names the key.
func New(d time.Duration, opts ...Option) (*Timeout, error) {
	var c config
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	key := "perAttempt"
	if c.scope == Overall {
		key = "overall"
	}
	switch {
	case d < 0:
		return nil, fmt.Errorf("timeout: %w", &resilience.OptionError{Option: key, Value: d, Problem: "must not be negative (0 means none)"})
	case c.scope > Overall:
		return nil, fmt.Errorf("timeout: %w", &resilience.OptionError{Option: "scope", Value: c.scope, Problem: "must be Attempt or Overall"})
	}
	t := &Timeout{d: d, scope: c.scope, observe: c.observe}
	t.rec = resilience.Attach(c.observer, resilience.Source{Kind: resilience.KindTimeout, Name: c.name, Scope: c.scope.String()})
	return t, nil
}

// Duration returns the timeout (0: none).
func (t *Timeout) Duration() time.Duration { return t.d }

// Scope returns what the timeout bounds.
func (t *Timeout) Scope() Scope { return t.scope }

// Execute runs fn with a context that ends at the earlier of the caller's
// deadline and now + the timeout. If the timeout's own deadline ended the
// call and fn failed, Execute returns an [*Error] wrapping fn's error;
// otherwise it returns fn's error unchanged (a caller's own shorter deadline
// is the caller's, not the timeout's).
func (t *Timeout) Execute(ctx context.Context, fn func(context.Context) error) error {
	if t.d <= 0 {
		return fn(ctx)
	}
	if t.observe {
		if t.rec == nil {
			return fn(ctx) // nothing to tell: observing costs nothing
		}
		start := time.Now()
		err := fn(ctx)
		d := time.Since(start)
		t.report(ctx, d, d >= t.d)
		return err
	}
	start := time.Now()
	deadline := start.Add(t.d)
	if t.governed(ctx, deadline) {
		err := fn(ctx) // the caller's deadline comes first: it governs
		if t.rec != nil {
			t.reportSince(ctx, start, false)
		}
		return err
	}
	tctx, cancel := context.WithDeadline(ctx, deadline)
	done := false
	defer func() {
		if !done {
			cancel() // fn panicked: the deadline's timer goes now, not when it fires
		}
	}()
	err := fn(tctx)
	done = true
	if err == nil && t.rec == nil {
		cancel()
		return nil
	}
	return t.ended(ctx, err, tctx, cancel, start)
}

// governed reports whether ctx's deadline comes no later than deadline: the
// caller's deadline then governs, and the timeout derives none.
func (t *Timeout) governed(ctx context.Context, deadline time.Time) bool {
	dl, ok := ctx.Deadline()
	return ok && !deadline.Before(dl)
}

// ended ends a call that began at start and returned err under tctx, the
// deadline's context, derived from ctx: it releases tctx, reports the call,
// and returns err, wrapped in an [*Error] when the deadline ended the call.
// Execute and Apply call fn (next) from their own frame, and only then
// ended: every frame between a caller and its call costs a mispredicted
// return once the call has been deep in the runtime or the kernel
// (docs/benchmarks/b4-parts.md, the depth run).
func (t *Timeout) ended(ctx context.Context, err error, tctx context.Context, cancel context.CancelFunc, start time.Time) error {
	ours := err != nil && timedOut(ctx, tctx, start.Add(t.d), err)
	cancel()
	if t.rec != nil {
		t.reportSince(ctx, start, ours)
	}
	if ours {
		return &Error{Scope: t.scope, Timeout: t.d, Err: err}
	}
	return err
}

// timedOut reports whether the deadline of tctx, derived from ctx, ended a
// call that failed with err: the call failed once the deadline had passed
// and the caller's context is still live. tctx's own error may not be set
// yet: a gRPC server enforces the same deadline (sent as grpc-timeout) and
// its DEADLINE_EXCEEDED can arrive before the client's timer fires.
func timedOut(ctx, tctx context.Context, deadline time.Time, err error) bool {
	return err != nil && ctx.Err() == nil &&
		(tctx.Err() == context.DeadlineExceeded || !time.Now().Before(deadline))
}

// Enter derives the attempt's deadline, as [Timeout.Execute] does, for a
// gate pipeline: the timeout is then a gate, and the innermost one
// in meshless's order. It never refuses.
func (t *Timeout) Enter(ctx context.Context) (context.Context, resilience.Permit, error) {
	if t.d <= 0 {
		return ctx, resilience.Permit{}, nil
	}
	if t.observe {
		return ctx, resilience.Permit{Ref: t, Aux: observed{}}, nil
	}
	deadline := time.Now().Add(t.d)
	if dl, ok := ctx.Deadline(); ok && !deadline.Before(dl) {
		return ctx, resilience.Permit{Ref: t}, nil // the caller's deadline governs
	}
	tctx, cancel := context.WithDeadline(ctx, deadline)
	return tctx, resilience.Permit{Ref: tctx, Aux: cancel}, nil
}

// Exit ends an attempt that [Timeout.Enter] admitted: it releases the
// deadline's context, reports whether the deadline ended the attempt, and
// then returns an [*Error] wrapping the attempt's error, as Execute does;
// otherwise the error unchanged.
func (t *Timeout) Exit(ctx context.Context, p resilience.Permit, r resilience.Result) error {
	switch tctx := p.Ref.(type) {
	case context.Context:
		dl, _ := tctx.Deadline()
		ours := timedOut(ctx, tctx, dl, r.Err)
		if cancel, ok := p.Aux.(context.CancelFunc); ok {
			cancel()
		}
		t.report(ctx, r.Duration, ours)
		if ours {
			return &Error{Scope: t.scope, Timeout: t.d, Err: r.Err}
		}
	case *Timeout:
		_, obs := p.Aux.(observed)
		t.report(ctx, r.Duration, obs && r.Duration >= t.d)
	}
	return r.Err
}

// observed marks the permit of an observe-only timeout (WithObserve).
type observed struct{}

// Apply is [Timeout.Execute] as a [resilience.Policy].
//
// In a chain the timeout takes its start from the policy outside when that
// policy read the clock ([resilience.Next.Entered]: a circuit breaker's
// reading of the call's start), instead of reading it again, and passes its
// start on ([resilience.Next.RunAt]).
func (t *Timeout) Apply(ctx context.Context, next resilience.Next) error {
	if t.d <= 0 || t.observe {
		return t.Execute(ctx, next.Run)
	}
	start, entered := next.Entered()
	if !entered {
		start = time.Now()
	}
	deadline := start.Add(t.d)
	if t.governed(ctx, deadline) {
		err := next.RunAt(ctx, start) // the caller's deadline comes first: it governs
		if t.rec != nil {
			t.reportSince(ctx, start, false)
		}
		return err
	}
	tctx, cancel := context.WithDeadline(ctx, deadline)
	done := false
	defer func() {
		if !done {
			cancel() // the call panicked: the deadline's timer goes now
		}
	}()
	err := next.RunAt(tctx, start)
	done = true
	if err == nil && t.rec == nil {
		// The word holds only for a deadline from the breaker's own start,
		// passed on to it (entered): a policy between them that waited (a
		// rate limiter's timeoutDuration) passes none, and the breaker's
		// time, the wait included, may then be slow.
		if t.tell != nil && entered && tctx.Err() == nil && int64(t.d) <= t.tell.Load() {
			cancel()
			return timely.Err // the deadline's timer had not fired: it took less than t.d since the breaker's start
		}
		cancel()
		return nil
	}
	return t.ended(ctx, err, tctx, cancel, start)
}

// reportSince reports a call that began at start. Without an observer it
// reads no clock: a call's clock reads are what it costs beyond its context.
func (t *Timeout) reportSince(ctx context.Context, start time.Time, timedOut bool) {
	if t.rec != nil {
		t.rec.Record(ctx, resilience.Event{Type: resilience.EventCall, Duration: time.Since(start), TimedOut: timedOut})
	}
}

func (t *Timeout) report(ctx context.Context, d time.Duration, timedOut bool) {
	if t.rec != nil {
		t.rec.Record(ctx, resilience.Event{Type: resilience.EventCall, Duration: d, TimedOut: timedOut})
	}
}

type config struct {
	name     string
	scope    Scope
	observer resilience.Observer
	observe  bool
}

// Option configures a [Timeout].
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithName names the timeout for observers; grpcmw uses the method.
func WithName(name string) Option { return optionFunc(func(c *config) { c.name = name }) }

// WithScope says what the timeout bounds. Default [Attempt].
func WithScope(s Scope) Option { return optionFunc(func(c *config) { c.scope = s }) }

// WithObserve makes the timeout observe only (observe mode): it never
// shortens a call's deadline, and its EventCall says TimedOut when the
// call took the timeout or longer — what it would have cut. Record it with
// an observed context (resilience.Observe) so that observers tell it apart.
// Default off.
func WithObserve() Option { return optionFunc(func(c *config) { c.observe = true }) }

// WithObserver sets the observer that receives an EventCall per call, with
// TimedOut set when the timeout ended it. Default none.
func WithObserver(o resilience.Observer) Option {
	return optionFunc(func(c *config) { c.observer = o })
}

// The engine applies timeouts through internal/deadline, which reads these.
func init() {
	timely.Register(func(p any) (timely.Role, bool) {
		t, ok := p.(*Timeout)
		if !ok || t == nil {
			return timely.Role{}, false
		}
		return timely.Role{Tell: func(bound *atomic.Int64) any {
			c := *t
			c.tell = bound
			return &c
		}}, true
	})
	timeouthooks.Observes = func(t any) bool { return t.(*Timeout).observe }
	timeouthooks.Reports = func(t any) bool { return t.(*Timeout).rec != nil }
	timeouthooks.Report = func(ctx context.Context, t any, d time.Duration, timedOut bool) {
		t.(*Timeout).report(ctx, d, timedOut)
	}
}
