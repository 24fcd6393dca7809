// Package otelmw records what meshless's policies do as OpenTelemetry
// metrics, and adds span events for retries and rejections to the caller's
// span.
//
// An [Observer] is a resilience.Observer. Create one from a MeterProvider
// and give it to a gRPC client's chain, or to each policy's WithObserver
// option:
//
//	obs, err := otelmw.New(meterProvider) // nil: otel.GetMeterProvider()
//	if err != nil { ... }
//	defer obs.Close()
//	chain, err := grpcmw.New(cfg, grpcmw.WithObserver(obs))
//
// It uses the OpenTelemetry metric API only; the application installs the
// SDK and its exporters (Prometheus, OTLP).
//
// # Metrics
//
// One meter, named [ScopeName], records the catalogue of docs/metrics.md:
//
//   - meshless.circuit_breaker.state: one-hot, one series per breaker and
//     state (closed, open, half_open, disabled, forced_open, metrics_only),
//     1 for the current state and 0 for the others;
//   - meshless.circuit_breaker.transitions, by previous and new state;
//   - meshless.circuit_breaker.calls, by outcome (success, failure, ignored,
//     rejected) and slow;
//   - meshless.circuit_breaker.failure_ratio and .slow_call_ratio, 0..1,
//     absent while the breaker's window holds fewer than its minimum number
//     of calls;
//   - meshless.retry.calls, by outcome (success_without_retry,
//     success_with_retry, failed_without_retry, failed_with_retry), and
//     meshless.retry.attempts;
//   - meshless.bulkhead.call.active, meshless.bulkhead.limit,
//     meshless.bulkhead.calls (admitted, rejected) and
//     meshless.bulkhead.wait.duration (calls that queued for a permit);
//   - meshless.timeout.calls, by kind (attempt, overall) and outcome
//     (completed, timed_out);
//   - meshless.call.duration: each logical gRPC call, all attempts and
//     backoffs included, with rpc.system.name, rpc.method and, on failure,
//     error.type;
//   - meshless.rate_limiter.calls, by outcome (permitted, rejected);
//   - meshless.hedging.attempts: every copy a hedged call sent, by winner
//     (first, hedge, none).
//
// The outlier-ejection metrics (meshless.outlier.ejections and
// meshless.outlier.ejected) are recorded from the events of a
// resilience.KindOutlier source (grpcmw's chain sends its balancer's
// ejections and returns to its observer), or, for the balancer used
// without grpcmw, by [NewOutlierListener] passed to outlier.WithListener.
// Cluster mode's (meshless.cluster.syncs, meshless.cluster.connected,
// meshless.cluster.remote_opens) are recorded by [NewClusterListener],
// installed with grpcmw.WithClusterListener.
//
// # Cost
//
// [Observer.Attach], called once per policy instance, builds every
// attribute set its events need and the option slices that pass them, so
// that recording an event allocates nothing. The observable instruments
// (breaker state and ratios, bulkhead limit) are read by one callback,
// registered by [New] and unregistered by [Observer.Close].
//
// # Bounded attributes
//
// Breaker and bulkhead names come from configuration keys. Method names
// (rpc.method) are recorded as they are for the first [DefaultMaxMethodValues]
// methods (see [WithMaxMethodValues]) and as "_OTHER" beyond; [WithoutMethod]
// drops rpc.method. Each method's error.type values are bounded too.
//
// # Span events
//
// When the call's context carries a recording span, a retry adds a
// "meshless.retry" event (the attempt to come, the backoff, the error's
// gRPC code), each hedged copy after the first a "meshless.hedge" event,
// and a breaker, bulkhead or rate-limiter rejection a "meshless.rejection"
// event (the policy, its name, the state or reason). [WithoutSpanEvents]
// turns them off.
package otelmw
