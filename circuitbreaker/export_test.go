package circuitbreaker

import "context"

// Permit and Acquire give the package's own tests the admission that
// Execute's half-open path uses, so that they can hold a call open across
// steps (a probe admitted now, reported later). They are not part of the
// API: users run calls with Execute, meshless's engine with Enter and Exit.
type Permit = permit

// Acquire admits one call or rejects it; see acquire.
func (b *Breaker) Acquire(ctx context.Context) (Permit, error) { return b.acquire(ctx) }
