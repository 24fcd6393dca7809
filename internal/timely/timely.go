package timely

import (
	"errors"
	"sync/atomic"
)

// Err is what a telling timeout returns in place of nil for a call that
// succeeded while its deadline was live. The breaker outside it returns nil
// in its place: Err never reaches a caller.
var Err = errors.New("meshless: internal: a success within its per-attempt deadline")

// Role is a policy's part.
type Role struct {
	// Bound, for a breaker: the longest timeout whose live deadline proves
	// one of its successes not slow, in nanoseconds (half its slow-call
	// threshold; 0 when it takes no such proof: another clock, an
	// observer). It follows Reconfigure.
	Bound *atomic.Int64
	// Passes: the policy returns the error of the call inside it
	// unchanged, and counts nothing by it (a fixed bulkhead without a
	// maxWaitDuration or an observer, a rate limiter).
	Passes bool
	// Tell, for a timeout: a copy of it that returns Err for a call that
	// succeeded while its deadline was live, when its duration is at most
	// bound's and its deadline counts from the start the policy outside
	// passed on (resilience.Next.Entered: the breaker's, when nothing
	// between them may wait; a rate limiter with a timeoutDuration passes
	// none).
	Tell func(bound *atomic.Int64) any
}

var roles []func(p any) (Role, bool)

// Register adds f, which returns p's role, or false when p is not a policy
// of f's package. Call it from an init only.
func Register(f func(p any) (Role, bool)) { roles = append(roles, f) }

// Of returns p's role: the zero Role for a policy no package registered.
func Of(p any) Role {
	for _, f := range roles {
		if r, ok := f(p); ok {
			return r
		}
	}
	return Role{}
}

// Tellers returns ps with each timeout that a breaker outside it can take
// as proof replaced by its telling copy: the breaker, then only policies
// that pass (nil ones skipped), then the timeout; ps itself is not changed.
// as converts a copy back to the caller's policy type.
func Tellers[P comparable](ps []P, as func(any) (P, bool)) []P {
	var zero P
	var out []P
	var bound *atomic.Int64
	for i, p := range ps {
		if p == zero {
			continue // skipped by the chain: the policies either side are adjacent
		}
		r := Of(p)
		switch {
		case r.Bound != nil:
			bound = r.Bound
		case r.Passes:
		case r.Tell != nil && bound != nil:
			if q, ok := as(r.Tell(bound)); ok {
				if out == nil {
					out = append([]P(nil), ps...)
				}
				out[i] = q
			}
			bound = nil
		default:
			bound = nil
		}
	}
	if out == nil {
		return ps
	}
	return out
}
