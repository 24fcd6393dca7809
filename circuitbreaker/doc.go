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
//	cfg := circuitbreaker.DefaultConfig()
//	cfg.FailureRateThreshold = 50
//	cfg.SlowCallDurationThreshold = 2 * time.Second
//	cb, err := circuitbreaker.New(circuitbreaker.WithConfig(cfg), circuitbreaker.WithName("payments"))
//	...
//	err = cb.Execute(ctx, func(ctx context.Context) error {
//		return client.Charge(ctx, req)
//	})
//
// # Configuration and the one way in
//
// A breaker's settings are one [Config], started from [DefaultConfig] and
// given to [New] (or [Breaker.Reconfigure]) with [WithConfig]. The other
// options set what is not a setting: the name, the clock, the classifier,
// the observer.
//
// [Breaker.Execute] is the way to run a call through a breaker.
// [Breaker.Apply] is the same call in the shape of a [resilience.Policy], the
// method through which [resilience.NewChain] composes policies. [Breaker.Enter],
// [Breaker.Exit] and [Breaker.Commit] are the breaker's [resilience.Gate]
// contract, for meshless's engine (the grpcmw and httpmw interceptors),
// which admits an attempt, runs it and reports it in separate steps.
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
// opens) and FORCED_OPEN (rejects every call) are set by [Config.Mode] or by
// [Breaker.Disable], [Breaker.MetricsOnly] and [Breaker.ForceOpen];
// [Breaker.Reset] returns to CLOSED.
//
// A result counts only in the state in which its call was admitted: when the
// state changes while calls are in flight, their results are dropped. A
// half-open probe whose caller never reports is settled when its context ends,
// and [Config.MaxWaitDurationInHalfOpenState] re-opens a breaker whose probes do
// not report in time, so HALF_OPEN cannot wedge.
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
