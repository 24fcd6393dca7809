// Package circuitbreaker is a circuit breaker with Resilience4j's semantics,
// built for the per-call path of a gRPC client.
//
// A [Breaker] watches the outcomes of the calls it admits in a sliding
// window (the last N calls, or the calls of the last N seconds). Once the
// window holds at least the minimum number of calls, it opens when the
// failure rate or the slow-call rate reaches its threshold. While open it
// rejects calls at once with an [*OpenError] (errors.Is [ErrOpen]); after the
// open wait it lets a fixed number of probes through (HALF_OPEN) and decides
// on their results: close, or open again for twice as long, up to a cap.
//
//	cb, err := circuitbreaker.New(
//		circuitbreaker.WithName("payments"),
//		circuitbreaker.WithFailureRateThreshold(50),
//		circuitbreaker.WithSlowCallDurationThreshold(2*time.Second),
//	)
//	...
//	err = cb.Execute(ctx, func(ctx context.Context) error {
//		return client.Charge(ctx, req)
//	})
//
// # Outcomes
//
// Each call's error is classified by a [resilience.Classifier] into a
// success, a failure or ignored. Ignored calls (a cancelled call, a local
// rejection) never enter the window, and an ignored half-open probe gives its
// place back. A call slower than the slow-call threshold is also slow,
// whatever its outcome. Only a nil error is always a success, and a
// [resilience.Rejection] is always ignored: a breaker never counts a refusal
// by itself or another policy against the dependency.
//
// # States
//
// CLOSED, OPEN and HALF_OPEN are the automatic states. DISABLED (always
// closed, nothing recorded), METRICS_ONLY (recorded and reported, never
// opens) and FORCED_OPEN (rejects every call) are set by [WithMode] or by
// [Breaker.Disable], [Breaker.MetricsOnly] and [Breaker.ForceOpen];
// [Breaker.Reset] returns to CLOSED.
//
// A result counts only in the state in which its call was admitted: when the
// state changes while calls are in flight, their results are dropped. A
// half-open probe whose caller never reports is settled when its context ends,
// and [WithMaxWaitDurationInHalfOpenState] re-opens a breaker whose probes do
// not report in time, so HALF_OPEN cannot wedge.
//
// # Two steps
//
// Interceptors and streams cannot wrap the call in a closure. [Breaker.Acquire]
// returns a [Permit], a value, that the caller reports on with [Permit.Done]
// or [Permit.Record] when the call is over.
//
// # Cost
//
// A closed-path call through a COUNT_BASED breaker whose window is full of fast
// successes reads a few atomics (the state, the window's "clean" flag, the
// coarse clock) and writes no memory that other cores read, so it costs a few
// tens of nanoseconds and scales across cores. A rejection reads the state,
// counts itself and returns an error built when the breaker opened. Neither
// allocates. Recording any other outcome, and every call through a TIME_BASED
// window, takes the breaker's mutex. See docs/benchmarks.md.
//
// # Cluster mode
//
// Package cluster shares breakers' decisions between instances through
// Redis. It reaches a breaker through hooks kept out of this package's API
// (they read the window, lease half-open probes, open on the cluster's
// counts or another instance's wait, close after another instance's probes
// succeeded), none of them on the call path. A breaker outside a cluster
// works alone, as it always has; manual changes (ForceOpen, Reset, …) stay
// local. See docs/cluster.md.
//
// A Breaker is safe for concurrent use.
package circuitbreaker
