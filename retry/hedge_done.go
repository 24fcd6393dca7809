package retry

import (
	"github.com/meshless/meshless/internal/hedgehooks"
	"github.com/meshless/meshless/resilience"
)

// The end of a hedged call: its copies cancelled once it is decided
// (cancelCopies), and its end as its policy reports it, once run has
// returned (done), or on a copy's panic's way up (panicked).

// done records the call's event.
func (r *hedgeRun) done(winner int, err error) (int, error) {
	if rec := r.h.rec; rec != nil {
		rec.Record(r.caller, resilience.Event{Type: resilience.EventHedgeDone, Attempt: r.sent, Winner: winner, Err: err})
	}
	return winner, err
}

// panicked ends a call whose copy panicked (run did not return: *ran is
// false), on the panic's way up, which it does not stop: the copies'
// context ends, and the call is reported over with no winner and
// resilience.ErrPanicked, the copies sent counted.
func (r *hedgeRun) panicked(ran *bool) {
	if *ran {
		return
	}
	r.cancelCopies()
	r.done(0, resilience.ErrPanicked)
}

// cancelCopies cancels the copies that may still run, after telling the
// copies that want to know (hedgehooks.Decider) that the call is decided.
func (r *hedgeRun) cancelCopies() {
	if !r.told && r.copies != nil && (r.cancel != nil || r.firstOut) {
		r.told = true // once: a decided call is decided when its copies were first cancelled
		if d, ok := r.copies.(hedgehooks.Decider); ok {
			d.Decided()
		}
	}
	if r.cancel != nil {
		r.cancel()
	}
	if r.firstOut && r.copies != nil {
		r.firstOut = false // once
		r.copies.CancelFirst()
	}
}
