package grpcmw

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errStreamPanicked is what a stream's RecvMsg returns once a method of
// its inner stream panicked (the panic itself went up the goroutine that
// called that method).
var errStreamPanicked = status.Error(codes.Internal, "grpcmw: the stream's inner stream panicked")

// guard is deferred by the stream's methods around a call of the current
// attempt's inner stream (an interceptor inside meshless's, a codec), made
// without the lock: when that call panicked (returned still false), the
// stream ends as a call that panics (panickedLocked) on the panic's way
// up, which it does not stop.
func (s *streamState) guard(returned *bool) {
	if *returned {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.panickedLocked()
}

// panickedLocked ends the stream whose inner stream panicked, as openHeld
// ends one whose retry's opening panicked: the current attempt's permits
// are given back as a failure (Abort), the attempt policy's call and the
// call end failed, once (EndPanicked: docs/metrics.md, "A call that
// panics"), and the contexts and the watcher end. A stream that was over
// holds nothing. When a RecvMsg or Header is waiting out a retry's backoff
// (the failed attempt is settled, the next not yet open), that goroutine
// owns the attempt policy's call until it wakes: failedLocked ends the call
// then. Called with s.mu held.
func (s *streamState) panickedLocked() {
	if s.ended {
		return
	}
	s.panicked, s.done = true, true
	s.over.Broadcast()
	if s.stopWatch != nil {
		s.stopWatch()
	}
	s.cancel()
	s.sent, s.sentBytes = nil, 0
	if s.waiting {
		return
	}
	s.call.Abort(&s.adm, &s.dl)
	if s.cancelCur != nil {
		s.cancelCur()
	}
	s.ended = true
	s.call.EndPanicked()
}

// heldLocked runs f, which tells observers (the gates' exits or commit,
// the attempt policy, the call's end), with s.mu held: when f panics, the
// stream ends as a call that panics and s.mu is released on the panic's
// way up, so that its other methods and its context's watcher do not block
// for ever. Called with s.mu held.
func (s *streamState) heldLocked(f func()) {
	returned := false
	defer s.unlessReturned(&returned)
	f()
	returned = true
}

// unlessReturned is heldLocked's deferred end: unless the function it
// guards returned, the stream ends as a call that panics and s.mu is
// released, also when that end panics in turn.
func (s *streamState) unlessReturned(returned *bool) {
	if !*returned {
		defer s.mu.Unlock()
		s.panickedLocked()
	}
}

// nextLocked is the call's Next; when it panics (an observer told of the
// retry), the stream ends as a call that panics and s.mu is released on
// the panic's way up. Called with s.mu held.
func (s *streamState) nextLocked(err error) (time.Duration, bool) {
	returned := false
	defer s.unlessReturned(&returned)
	wait, again := s.call.Next(err)
	returned = true
	return wait, again
}

// waitUnlocked is the call's Wait, run without s.mu while s.waiting is
// set; when it panics (the backoff's clock), the stream ends as a call
// that panics, on the panic's way up.
func (s *streamState) waitUnlocked(d time.Duration) bool {
	returned := false
	defer func() {
		if !returned {
			s.mu.Lock()
			s.waiting = false
			s.over.Broadcast()
			s.unlessReturned(&returned)
		}
	}()
	ok := s.call.Wait(d)
	returned = true
	return ok
}
