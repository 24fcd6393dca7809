package retry

import "github.com/meshless/meshless/resilience"

// The end of a hedged call, as its policy reports it: once run has
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
