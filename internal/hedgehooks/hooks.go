package hedgehooks

import (
	"context"
	"time"
)

// Copies makes a hedged call's copies for [Run].
type Copies interface {
	// Copy makes copy n (from 1) under ctx and returns its answer; copies
	// run concurrently. Copy 1 gets the caller's context itself, and must
	// run under a context of its own that CancelFirst ends; the others get
	// a context the policy cancels.
	Copy(ctx context.Context, n int) error
	// CancelFirst ends copy 1 once the call is decided, when a hedge was
	// sent while it ran. It is called at most once, from a goroutine other
	// than copy 1's, maybe before copy 1 has derived its context: copy 1
	// must then end as soon as it has.
	CancelFirst()
}

// Decider is Copies that are told when their call is decided: Decided is
// called once, before the policy cancels the copies still running (and
// before CancelFirst), from the goroutine that cancels them, only when a
// copy may still run. A copy whose context that cancel ended before its own
// deadline was ended by the answer that decided the call, not by its
// deadline (deadline.AttemptDeadline.CutAt).
type Decider interface {
	Decided()
}

// Deadliner is Copies whose call has a deadline that the caller's context
// does not carry (meshless's overall timeout, applied to each copy's
// context): the policy sends no copy, and waits no pushback, past it.
type Deadliner interface {
	// Deadline returns the call's deadline, if it has one.
	Deadline() (time.Time, bool)
}

// OutsideBubble is Copies that know whether their call runs outside a
// testing/synctest bubble. The policy keeps a stopped timer for a later
// call, and arms a kept one again, only for such a call: a bubble's timer
// must not be armed outside it, nor a timer from outside inside one.
type OutsideBubble interface {
	// OutsideBubble reports that the call is known to run outside a
	// bubble; false when it runs in one or is not known not to.
	OutsideBubble() bool
}

// Run is (*retry.Hedge).Run with copies made by c: h is a *retry.Hedge.
var Run func(h any, ctx context.Context, c Copies) (winner int, err error)
