package bulkhead

import "context"

// Permit and Acquire give the package's own tests the admission that
// Execute uses, so that they can hold permits across steps (a full bulkhead,
// a permit ended twice). They are not part of the API: users run calls with
// Execute, meshless's engine with Enter and Exit.
type Permit = permit

// Acquire admits one call or rejects it; see acquire.
func (b *Bulkhead) Acquire(ctx context.Context) (Permit, error) { return b.acquire(ctx) }
