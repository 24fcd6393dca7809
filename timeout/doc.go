// Package timeout bounds calls with deadlines: per attempt (inside a retry
// policy) and overall (outside it, bounding every attempt and backoff).
//
//	perAttempt, _ := timeout.New(time.Second)
//	overall, _ := timeout.New(3*time.Second, timeout.WithScope(timeout.Overall))
//	chain := resilience.NewChain(overall, retryPolicy, breaker, bulkhead, perAttempt)
//
// A timeout derives a context whose deadline is the earlier of its own and the
// caller's; it never extends the caller's deadline, and when the caller's
// deadline is already earlier it does not derive anything. It starts no
// goroutine: the deadline is a context timer.
//
// When its own deadline ends a call that then fails, the error becomes an
// [*Error], which matches [context.DeadlineExceeded] (so grpcmw reports
// DEADLINE_EXCEEDED and a breaker counts a failure) and unwraps to the call's
// error. A caller's own shorter deadline stays the caller's: the error is
// returned unchanged and not reported as the timeout's.
//
// Deriving the context costs what context.WithDeadline costs (4 allocations
// on Go 1.26); a call that needs no new deadline allocates nothing.
package timeout
