package deadletter

import (
	"context"
	"errors"
	"strconv"

	"github.com/meshless/meshless/resilience"
)

// ReasonDeferred is the rejection reason of a deferred call on the wire:
// the ErrorInfo reason of a gRPC UNAVAILABLE status.
const ReasonDeferred = resilience.ReasonDeferred

// ReplayIDHeader is the metadata key (gRPC) or header (HTTP) that carries a
// replay's [Entry.ID], so that a server can deduplicate: delivery is at
// least once.
const ReplayIDHeader = "meshless-replay-id"

// Errors of the queue and its stores, matched with [errors.Is].
var (
	// ErrDeferred is matched by the error of a call that was deferred: it
	// did not run now, it is kept and will be replayed ([DeferredError]).
	ErrDeferred = errors.New("deadletter: call deferred")
	// ErrFull: the key already holds its maximum of entries or bytes
	// ([Limits]); the entry was not kept.
	ErrFull = errors.New("deadletter: full")
	// ErrClosed: the queue or store is closed.
	ErrClosed = errors.New("deadletter: closed")
	// ErrNoHandler: Defer was given an entry for a key that no [Handler]
	// replays ([Queue.Handle]).
	ErrNoHandler = errors.New("deadletter: no handler for the key")
	// ErrLeased: another holder (another queue, another process) is
	// replaying the key's entries now.
	ErrLeased = errors.New("deadletter: key leased by another holder")
	// ErrLeaseLost: the lease expired and may be held by another holder;
	// the entry the call concerned was left as it was.
	ErrLeaseLost = errors.New("deadletter: lease lost")
	// ErrNotFound: no parked entry with that ID.
	ErrNotFound = errors.New("deadletter: entry not found")
)

// DeferredError is the error of a deferred call: the call did not run now,
// the entry is kept, and it will be replayed. It is a [resilience.Rejection]
// (kind [resilience.KindDeadLetter]), so that no meshless retry retries it,
// here or one hop up, and it matches [ErrDeferred].
//
// It does not unwrap to Cause: a caller that tests for the breaker's
// rejection (errors.Is(err, circuitbreaker.ErrOpen)) to redeliver an event
// must not redeliver one that is kept.
type DeferredError struct {
	// Key and ID are the entry's.
	Key, ID string
	// Cause is the rejection or failure that made the call defer.
	Cause error
}

func (e *DeferredError) Error() string {
	s := "deadletter: call deferred (key " + strconv.Quote(e.Key) + ", replay id " + e.ID + ")"
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Is reports whether target is [ErrDeferred].
func (e *DeferredError) Is(target error) bool { return target == ErrDeferred }

// RejectedBy returns [resilience.KindDeadLetter].
func (e *DeferredError) RejectedBy() resilience.Kind { return resilience.KindDeadLetter }

// Reason returns [ReasonDeferred].
func (e *DeferredError) Reason() string { return ReasonDeferred }

// CorruptError is returned by a [Lease] for an entry that the store could
// not decode: the store has removed it, and the queue counts it as
// dropped. It matches [ErrInvalidEntry].
type CorruptError struct {
	Key, Pos string
	Err      error
}

func (e *CorruptError) Error() string {
	return "deadletter: key " + strconv.Quote(e.Key) + ": entry at " + e.Pos + " dropped: " + e.Err.Error()
}

// Unwrap returns the decoding error.
func (e *CorruptError) Unwrap() error { return e.Err }

type replayKey struct{}

// WithReplayID returns ctx carrying a replay's entry ID; the queue calls it
// for every replay, and a transport sends the ID as [ReplayIDHeader].
func WithReplayID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, replayKey{}, id)
}

// ReplayID returns the entry ID of the replay that ctx belongs to, and
// false for a call that is not a replay. A transport puts it on the wire
// ([ReplayIDHeader]); the engine never defers a replay again.
func ReplayID(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(replayKey{}).(string)
	return id, ok && id != ""
}
