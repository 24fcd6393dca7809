package engine

import (
	"time"

	"github.com/meshless/meshless/internal/codeset"
	"github.com/meshless/meshless/internal/pushback"
	"github.com/meshless/meshless/resilience"
)

// classes is one method's classification of its attempts.
type classes struct {
	t                Transport
	failure, ignored codeset.Set
	cl               Classer // the transport's, if its codes have classes
}

// classerOf returns t as a Classer, or nil.
func classerOf(t Transport) Classer {
	cl, _ := t.(Classer)
	return cl
}

// byClass is outcome's verdict on a code that neither list names: its
// class's code counts as the lists say, else it is a success.
func (c *classes) byClass(code uint32) resilience.Outcome {
	if k, ok := c.cl.Class(code); ok {
		switch {
		case c.failure.Has(k):
			return resilience.Failure
		case c.ignored.Has(k):
			return resilience.Ignored
		}
	}
	return resilience.Success
}

// matcher is a method's retryableStatusCodes or nonFatalStatusCodes.
type matcher struct {
	t     Transport
	codes codeset.Set
	// uncoded: an error without a code matches too (Options.RetryUncoded).
	uncoded bool
	cl      Classer // the transport's, if its codes have classes
}

// match: one of the codes (or, with uncoded, an error that carries none and
// is no local rejection nor a panic), and not a rejection a downstream
// meshless made (an answer, never retried nor hedged, at any hop).
func (m *matcher) match(err error) bool {
	code, ok := m.t.Code(err)
	if !ok {
		return m.uncoded && !resilience.IsRejection(err) && err != resilience.ErrPanicked
	}
	if !m.codes.Has(code) {
		if m.cl == nil {
			return false
		}
		if k, ok := m.cl.Class(code); !ok || !m.codes.Has(k) {
			return false
		}
	}
	_, relayed := m.t.Relayed(err)
	return !relayed
}

// pushbackOf reads the pushback an attempt's error carries (pushback.With);
// a relayed rejection has none.
func (c *classes) pushbackOf(err error) (d time.Duration, ok bool) {
	inner, d, ok := pushback.Of(err)
	if !ok {
		return 0, false
	}
	if _, relayed := c.t.Relayed(inner); relayed {
		return 0, false
	}
	return d, true
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
