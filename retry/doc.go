// Package retry retries failed calls the way gRPC does (gRFC A6), without
// turning an outage into a retry storm.
//
//	r, err := retry.New(
//		retry.WithMaxAttempts(3), // the first call included
//		retry.WithInitialBackoff(100*time.Millisecond),
//		retry.WithRetryable(func(err error) bool { return status.Code(err) == codes.Unavailable }),
//	)
//	...
//	err = r.Execute(ctx, func(ctx context.Context) error { return client.Get(ctx, req) })
//
// The rules, in the order they are checked after a failed attempt:
//
//   - a [resilience.Rejection] (a breaker open, a bulkhead full, here or one
//     hop down) is never retried, whatever the predicate says;
//   - nothing is retried once the caller's context is done;
//   - only errors the [WithRetryable] predicate accepts are retried;
//   - at most maxAttempts calls are made, the first one included;
//   - a server-requested delay ([WithPushback]) replaces the backoff, and a
//     negative one stops retrying;
//   - a shared [Throttle] (gRPC's token bucket) holds retries back while more
//     than half its tokens are gone;
//   - a backoff that would not end before the context's deadline is not
//     slept: the last error is returned at once.
//
// Waits grow from initialBackoff by backoffMultiplier, spread by ±jitter, and
// never exceed maxBackoff. Every attempt, every retry and the final outcome go
// to the [resilience.Observer].
//
// In a chain, put the retry outside the circuit breaker (each attempt is one
// breaker call, and an open breaker ends the retries at once) and the
// per-attempt timeout inside; see docs/order.md.
//
// A call whose first attempt succeeds allocates nothing. A [Retry] is safe
// for concurrent use.
package retry
