package retry

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/meshless/meshless/resilience"
)

// Throttle is gRPC's retry throttling (gRFC A6): a token bucket shared by the
// retry policies of one client. It starts full with maxTokens. Each attempt
// that fails with a retryable error takes a token, each success gives back
// tokenRatio, and retries are allowed only while more than half the tokens
// are left. During a total outage the tokens drain and the client makes
// first attempts only, instead of multiplying the load on a dependency that
// is down; as successes return, so do retries.
//
// A Throttle is safe for concurrent use.
type Throttle struct {
	max   int64 // in thousandths of a token
	ratio int64 // thousandths of a token given back per success
	n     atomic.Int64
}

// NewThrottle returns a full throttle. maxTokens must be in (0, 1000] and
// tokenRatio in (0, maxTokens], as in gRPC's service config; tokenRatio keeps
// three decimal places.
func NewThrottle(maxTokens, tokenRatio float64) (*Throttle, error) {
	var errs []error
	if !(maxTokens > 0 && maxTokens <= 1000) {
		errs = append(errs, &resilience.OptionError{Option: "maxTokens", Value: maxTokens, Problem: "must be in (0, 1000]"})
	}
	maxOK := maxTokens > 0 && maxTokens <= 1000
	if !(tokenRatio >= 0.001) || (maxOK && tokenRatio > maxTokens) {
		errs = append(errs, &resilience.OptionError{Option: "tokenRatio", Value: tokenRatio, Problem: "must be at least 0.001 and at most maxTokens"})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("retry: retryThrottling: %w", err)
	}
	t := &Throttle{max: int64(math.Round(maxTokens * 1000)), ratio: int64(math.Round(tokenRatio * 1000))}
	t.n.Store(t.max)
	return t, nil
}

// Tokens returns the tokens left.
func (t *Throttle) Tokens() float64 { return float64(t.n.Load()) / 1000 }

// allow reports whether a retry may be made now.
func (t *Throttle) allow() bool { return t.n.Load()*2 > t.max }

// failure takes a token for an attempt that failed with a retryable error.
func (t *Throttle) failure() {
	for {
		n := t.n.Load()
		if n <= 0 || t.n.CompareAndSwap(n, max(n-1000, 0)) {
			return
		}
	}
}

// success gives back tokenRatio. A full bucket is only read, so a healthy
// client's successes write nothing shared.
func (t *Throttle) success() {
	for {
		n := t.n.Load()
		if n >= t.max || t.n.CompareAndSwap(n, min(n+t.ratio, t.max)) {
			return
		}
	}
}
