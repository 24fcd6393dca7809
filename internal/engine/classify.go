package engine

import (
	"time"

	"github.com/meshless/meshless/config"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/throttler"
)

// codeSet is a set of status codes: gRPC's 0–16 and HTTP's 100–599.
type codeSet [10]uint64

func newCodeSet(cs config.Codes) codeSet {
	var s codeSet
	for _, c := range cs {
		if c < 640 {
			s[c/64] |= 1 << (c % 64)
		}
	}
	return s
}

func (s *codeSet) has(c uint32) bool { return c < 640 && s[c/64]&(1<<(c%64)) != 0 }

// classes is one method's classification of its attempts.
type classes struct {
	t                Transport
	failure, ignored codeSet
}

// outcome classifies an attempt's error for the breaker: a failure code or
// an error that carries no code is a failure, an ignored code or a local
// rejection is ignored, every other code (NOT_FOUND, 404…) is a success. A
// rejection relayed from a downstream meshless counts as its kind says
// (resilience.Kind.RelayedOutcome), whatever the configured codes say.
func (c *classes) outcome(err error) resilience.Outcome {
	if err == nil {
		return resilience.Success
	}
	if resilience.IsRejection(err) {
		return resilience.Ignored
	}
	code, ok := c.t.Code(err)
	if !ok {
		return resilience.Failure
	}
	if k, ok := c.t.Relayed(err); ok {
		return k.RelayedOutcome()
	}
	switch {
	case c.failure.has(code):
		return resilience.Failure
	case c.ignored.has(code):
		return resilience.Ignored
	}
	return resilience.Success
}

// matcher is a method's retryableStatusCodes or nonFatalStatusCodes.
type matcher struct {
	t     Transport
	codes codeSet
	// uncoded: an error without a code matches too (Options.RetryUncoded).
	uncoded bool
}

// match: one of the codes (or, with uncoded, an error that carries none and
// is no local rejection), and not a rejection a downstream meshless made (an
// answer, never retried nor hedged, at any hop).
func (m *matcher) match(err error) bool {
	code, ok := m.t.Code(err)
	if !ok {
		return m.uncoded && !resilience.IsRejection(err)
	}
	if !m.codes.has(code) {
		return false
	}
	_, relayed := m.t.Relayed(err)
	return !relayed
}

// verdict says what an attempt's result tells the adaptive throttler: an
// answer from a backend that did its work (OK, NOT_FOUND…) is an accept; a
// failure or a sign of overload (RESOURCE_EXHAUSTED: a backend that sheds,
// or a meshless one hop down that rejected) is a refusal; a local rejection
// inside the throttler or a call the caller gave up is not counted.
func (c *classes) verdict(r resilience.Result) throttler.Verdict {
	if r.Err == nil {
		return throttler.Accepted
	}
	if resilience.IsRejection(r.Err) {
		return throttler.Uncounted
	}
	if c.t.Overloaded(r.Err) {
		return throttler.Refused
	}
	return throttler.DefaultVerdict(r)
}

// pushbackOf reads the pushback an attempt's error carries (WithPushback);
// a relayed rejection has none.
func (c *classes) pushbackOf(err error) (d time.Duration, ok bool) {
	pe, ok := err.(*pushbackError)
	if !ok {
		return 0, false
	}
	if _, relayed := c.t.Relayed(pe.error); relayed {
		return 0, false
	}
	return pe.delay, true
}

// errorType names a call's error for metrics: a local rejection's reason in
// lower case (circuit_open…), else the transport's name for it.
func (c *classes) errorType(err error) string {
	if err == nil {
		return ""
	}
	if r, ok := resilience.AsRejection(err); ok {
		if t := r.RejectedBy().ErrorType(); t != "" {
			return t
		}
	}
	return c.t.ErrorType(err)
}
