package resilience

import (
	"context"
	"strconv"
	"time"
)

// Observer receives what policies do, for metrics, traces and logs.
//
// A policy instance calls Attach once, when it is created, and then sends each
// of its events to the [Recorder] that Attach returned. This lets an observer
// do its per-instance work once (an OpenTelemetry observer builds its
// attribute sets there) and record each event without allocating.
//
// Implementations must be safe for concurrent use.
type Observer interface {
	// Attach returns the recorder for one policy instance's events, or nil to
	// receive none of them.
	Attach(src Source) Recorder
}

// Recorder receives the events of one policy instance. Record is called on
// the call path: it must be fast, must not block and must not call back into
// the policy that sent the event. It is called concurrently.
type Recorder interface {
	Record(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to an [Observer].
type ObserverFunc func(src Source) Recorder

// Attach calls f(src).
func (f ObserverFunc) Attach(src Source) Recorder { return f(src) }

// Releaser is implemented by a [Recorder] that keeps something for its
// policy instance beyond events: gauges an observer reads through the
// instance's Snapshot. A policy's Close calls Release once the instance is
// gone (grpcmw's Close, and its Reload for instances it replaced); the
// recorder then stops reading it.
type Releaser interface {
	Release()
}

// Release calls r.Release when r is a [Releaser].
func Release(r Recorder) {
	if rl, ok := r.(Releaser); ok {
		rl.Release()
	}
}

// RecorderFunc adapts a function to a [Recorder].
type RecorderFunc func(ctx context.Context, e Event)

// Record calls f(ctx, e).
func (f RecorderFunc) Record(ctx context.Context, e Event) { f(ctx, e) }

// Source describes the policy instance that an [Observer] is attached to.
type Source struct {
	Kind Kind
	// Name identifies the instance: a breaker's or bulkhead's key, a
	// method's name for retries and timeouts.
	Name string
	// Scope tells apart instances of one kind that play different parts: a
	// timeout's is "attempt" or "overall".
	Scope string
	// Queues is set by a bulkhead that may make calls wait for a permit
	// (maxWaitDuration > 0), so that an observer records every wait,
	// zero waits included.
	Queues bool
	// Snapshot reads the instance's live figures, for observable gauges. It is
	// nil for policies that keep none. It is safe to call from any goroutine,
	// but not from inside Record.
	Snapshot func() Snapshot
}

// Snapshot is a point-in-time reading of a policy instance's gauges.
type Snapshot struct {
	// State is the policy's state (circuitbreaker.State for a breaker), nil
	// for policies without one.
	State Label
	// FailureRate and SlowCallRate are a breaker's rates in percent, or -1
	// while its window holds fewer than the minimum number of calls.
	FailureRate, SlowCallRate float64
	// Limit and Active are a bulkhead's current limit and calls in flight.
	Limit, Active int
}

// Attach calls o.Attach when o is not nil and returns its recorder.
func Attach(o Observer, src Source) Recorder {
	if o == nil {
		return nil
	}
	return o.Attach(src)
}

// Observers returns an [Observer] that attaches each of the given observers
// and sends every event to each recorder they return.
func Observers(obs ...Observer) Observer {
	return ObserverFunc(func(src Source) Recorder {
		var recs multiRecorder
		for _, o := range obs {
			if r := Attach(o, src); r != nil {
				recs = append(recs, r)
			}
		}
		switch len(recs) {
		case 0:
			return nil
		case 1:
			return recs[0]
		}
		return recs
	})
}

type multiRecorder []Recorder

func (m multiRecorder) Record(ctx context.Context, e Event) {
	for _, r := range m {
		r.Record(ctx, e)
	}
}

// Release releases each recorder that is a [Releaser].
func (m multiRecorder) Release() {
	for _, r := range m {
		Release(r)
	}
}

// EventType says what an [Event] reports.
type EventType uint8

const (
	// EventCall: a call the policy admitted has finished. Outcome, Duration,
	// Slow (breaker) are set.
	EventCall EventType = iota + 1
	// EventRejection: the policy refused a call. State (breaker) and Err are
	// set.
	EventRejection
	// EventTransition: a breaker changed state. From, To and Reason are set.
	EventTransition
	// EventAttempt: one attempt of a retry policy has finished. Attempt (1
	// for the first call), Err and Outcome are set.
	EventAttempt
	// EventRetry: a retry policy will try again. Attempt is the number of the
	// attempt to come, Backoff the wait before it, Err the error that caused
	// it.
	EventRetry
	// EventRetryDone: a retry policy's logical call is over. Attempt is the
	// number of attempts made, Outcome the final outcome, Err the error
	// returned, Reason why no further attempt was made (retry.ReasonNone
	// after a success).
	EventRetryDone
	// EventAcquired: a bulkhead admitted a call. Duration is the time it
	// waited for its permit.
	EventAcquired
	// EventReleased: a call that a bulkhead admitted has finished.
	EventReleased
	// EventEjected: an outlier-ejecting balancer took an endpoint out of load
	// balancing. Endpoint and Reason (why: "consecutive_failures",
	// "failure_percentage", "success_rate" or "slow_calls") are set.
	EventEjected
	// EventReturned: an ejected endpoint is back in load balancing. Endpoint
	// is set.
	EventReturned
	// EventHedge: a hedging policy sends another copy of the call. Attempt
	// is the copy's number (2 for the first hedge), Backoff the time since
	// the copy before it was sent, Err the non-fatal failure that made it go
	// at once (nil when its delay elapsed).
	EventHedge
	// EventHedgeDone: a hedging policy's call is over. Attempt is the number
	// of copies sent, the first included; Winner the copy whose answer the
	// call returned (1 for the first), or 0 when no copy's answer won (every
	// copy failed with a non-fatal code, was refused, or the caller's
	// context ended); Err the error returned.
	EventHedgeDone
)

// String returns the event type's name, e.g. "call".
func (t EventType) String() string {
	switch t {
	case EventCall:
		return "call"
	case EventRejection:
		return "rejection"
	case EventTransition:
		return "transition"
	case EventAttempt:
		return "attempt"
	case EventRetry:
		return "retry"
	case EventRetryDone:
		return "retry_done"
	case EventAcquired:
		return "acquired"
	case EventReleased:
		return "released"
	case EventEjected:
		return "ejected"
	case EventReturned:
		return "returned"
	case EventHedge:
		return "hedge"
	case EventHedgeDone:
		return "hedge_done"
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// Event is one thing a policy did. Which fields are set depends on Type; the
// rest are zero. Events are passed by value and never retained by policies.
type Event struct {
	Type EventType
	// Outcome of a finished call or attempt.
	Outcome Outcome
	// Duration of a finished call; for a bulkhead, the time spent waiting
	// for a permit (EventAcquired, EventRejection).
	Duration time.Duration
	// TimedOut is set on a timeout policy's EventCall when its own deadline
	// ended the call.
	TimedOut bool
	// Attempt numbers a retry policy's attempts from 1.
	Attempt int
	// Backoff is the wait before the next attempt (EventRetry), or the time
	// between a hedged copy and the one before it (EventHedge).
	Backoff time.Duration
	// Winner is the copy whose answer a hedged call returned, from 1; 0 for
	// none (EventHedgeDone).
	Winner int
	// Slow is set when a finished call took longer than the breaker's
	// slow-call threshold, whatever its outcome.
	Slow bool
	// From and To are a transition's states; State is the state that
	// rejected a call. The policy defines them (circuitbreaker.State).
	From, To, State Label
	// Reason says why a transition happened (circuitbreaker.Reason), why a
	// retry policy stopped (retry.Reason) or why an endpoint was ejected.
	Reason Label
	// Endpoint is the address of the endpoint an outlier ejection or return
	// concerns, as the resolver gave it.
	Endpoint string
	// Err is the error of a rejection, an attempt or a call.
	Err error
	// ErrorType names a failed call's error for metrics (OpenTelemetry's
	// error.type): grpcmw sets the gRPC code's name ("UNAVAILABLE"; "_OTHER"
	// for a number no gRPC code has, which a server may send) or
	// "circuit_open" / "bulkhead_full" for its own rejections on KindCall
	// events; "" when the call succeeded.
	ErrorType string
}

// Label is a word of a policy's own vocabulary carried by an [Event] or a
// [Snapshot]: a breaker's state, why it changed state, why a retry stopped.
// Each policy package defines its labels as small constants
// (circuitbreaker.State and circuitbreaker.Reason, retry.Reason), so the core
// names none of them; String returns the name used in metrics and logs.
// Compare a label with a policy's constant directly:
//
//	if e.To == circuitbreaker.StateOpen { ... }
//
// Labels are one-byte values, so carrying one in an event does not allocate.
type Label interface {
	String() string
}
