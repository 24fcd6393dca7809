// Package retry retries failed calls the way gRPC does (gRFC A6), without
// turning an outage into a retry storm.
//
//	cfg := retry.DefaultConfig()
//	cfg.MaxAttempts = 3 // the first call included
//	cfg.InitialBackoff = 100 * time.Millisecond
//	r, err := retry.New(
//		retry.WithConfig(cfg),
//		retry.WithRetryable(func(err error) bool { return status.Code(err) == codes.Unavailable }),
//	)
//	...
//	err = r.Execute(ctx, func(ctx context.Context) error { return client.Get(ctx, req) })
//
// A policy's settings are one [Config], started from [DefaultConfig] and
// given to [New] with [WithConfig]; a hedging policy's are one [HedgeConfig]
// given to [NewHedge] with [WithHedgeConfig]. The other options set what is
// not a setting: the name, the predicates, the throttle, the clock, the
// observer. [Retry.Execute] and [Hedge.Execute] are the ways to run a call
// ([Hedge.Run] when each copy needs its own result); [Retry.Apply] and
// [Hedge.Apply] are the same calls in the shape of a [resilience.Policy], the
// method through which [resilience.NewChain] composes policies.
// [Retry.Begin] and [Retry.BeginWithDeadline] drive the attempts one step at a
// time, for meshless's engine, whose attempts are interceptors' calls.
//
// The rules, in the order they are checked after a failed attempt (gRFC
// A6's order):
//
//   - a [resilience.Rejection] (a breaker open, a bulkhead full, here or one
//     hop down) is never retried, whatever the predicate says, and moves no
//     throttle token;
//   - nothing is retried once the caller's context is done;
//   - a server-requested stop ([WithPushback] returning a negative delay)
//     ends the call and takes a throttle token, whatever the error;
//   - only errors the [WithRetryable] predicate accepts are retried; each
//     such failure takes a throttle token;
//   - at most maxAttempts calls are made, the first one included;
//   - a shared [Throttle] (gRPC's token bucket) holds retries back while half
//     its tokens or more are gone;
//   - a server-requested delay replaces the backoff; one longer than 300s
//     is not waited, deadline or not: the last error is returned at once;
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
