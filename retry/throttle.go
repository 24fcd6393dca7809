package retry

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/meshless/meshless/resilience"
)

// Throttle is gRPC's retry throttling (gRFC A6): a token bucket shared by
// every RPC of one client. It starts full with maxTokens. Each RPC that fails
// with a retryable error, or whose server pushback says not to retry, takes a
// token; each RPC that succeeds gives back tokenRatio; retries are allowed
// only while more than half the tokens are left. During a total outage the
// tokens drain and the client makes first attempts only, instead of
// multiplying the load on a dependency that is down; as successes return, so
// do retries.
//
// A [Retry] given the throttle with [WithThrottle] moves it for each of its
// attempts. RPCs that no retry policy runs (a method with retries off) move
// it through [Throttle.RecordSuccess] and [Throttle.RecordFailure]; grpcmw
// does this for every method of a client.
//
// A Throttle is safe for concurrent use.
type Throttle struct {
	max   int64 // in thousandths of a token
	ratio int64 // thousandths of a token given back per success
	n     atomic.Int64
}

// NewThrottle returns a full throttle. maxTokens must be in (0, 1000] and
// tokenRatio in [0.001, maxTokens], as in gRPC's service config. As gRFC A6
// says, tokenRatio keeps three decimal places and ignores the others: 0.5466
// is 0.546.
func NewThrottle(maxTokens, tokenRatio float64) (*Throttle, error) {
	var errs []error
	maxOK := maxTokens > 0 && maxTokens <= 1000
	if !maxOK {
		errs = append(errs, &resilience.OptionError{Option: "maxTokens", Value: maxTokens, Problem: "must be in (0, 1000]"})
	}
	ratio := thousandths(tokenRatio)
	if ratio < 1 || (maxOK && tokenRatio > maxTokens) {
		errs = append(errs, &resilience.OptionError{Option: "tokenRatio", Value: tokenRatio, Problem: "must be at least 0.001 and at most maxTokens"})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("retry: retryThrottling: %w", err)
	}
	t := &Throttle{max: int64(math.Round(maxTokens * 1000)), ratio: ratio}
	t.n.Store(t.max)
	return t, nil
}

// thousandths returns x in thousandths, the decimals past the third dropped
// (not rounded): 0.5466 is 546. It reads the shortest decimal that is x, so
// 0.546, which a float64 holds as 0.54599999…, is 546 too. It returns 0 for
// a value that is not a finite number in [0, 1000].
func thousandths(x float64) int64 {
	if !(x >= 0 && x <= 1000) {
		return 0
	}
	s := strconv.FormatFloat(x, 'f', -1, 64)
	whole, frac, _ := strings.Cut(s, ".")
	frac = (frac + "000")[:3]
	w, err1 := strconv.ParseInt(whole, 10, 64)
	f, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return w*1000 + f
}

// Tokens returns the tokens left.
func (t *Throttle) Tokens() float64 { return float64(t.n.Load()) / 1000 }

// TokenRatio returns the tokens a success gives back, as the throttle uses
// it (three decimal places).
func (t *Throttle) TokenRatio() float64 { return float64(t.ratio) / 1000 }

// RecordSuccess gives back tokenRatio for an RPC that succeeded (status OK).
// A [Retry] holding the throttle calls it for its own calls; call it for RPCs
// that no such policy runs. A full bucket is only read, so a healthy
// client's successes write nothing shared.
func (t *Throttle) RecordSuccess() { t.success() }

// RecordFailure takes a token for an RPC that failed with a retryable error
// or whose server pushback said not to retry. A [Retry] holding the throttle
// calls it for its own calls; call it for RPCs that no such policy runs.
func (t *Throttle) RecordFailure() { t.failure() }

// allow reports whether a retry may be made now.
func (t *Throttle) allow() bool { return t.n.Load()*2 > t.max }

// failure takes a token, never going below 0.
func (t *Throttle) failure() {
	for {
		n := t.n.Load()
		if n <= 0 || t.n.CompareAndSwap(n, max(n-1000, 0)) {
			return
		}
	}
}

// success gives back tokenRatio, never going above maxTokens.
func (t *Throttle) success() {
	for {
		n := t.n.Load()
		if n >= t.max || t.n.CompareAndSwap(n, min(n+t.ratio, t.max)) {
			return
		}
	}
}
