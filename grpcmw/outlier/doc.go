// Package outlier is a gRPC load-balancing policy, registered as
// "meshless_outlier", that takes failing or slow endpoints out of a client's
// load balancing for a while and puts them back: what a service mesh's
// outlier detection does, in the application.
//
// It wraps a child policy (round_robin by default) and watches every call's
// result per endpoint, with the same classification as meshless's circuit
// breaker: the configured failure codes (UNAVAILABLE, INTERNAL, UNKNOWN,
// DEADLINE_EXCEEDED, DATA_LOSS by default) and any error that is not a gRPC
// status are failures; CANCELLED, and a rejection a meshless server relayed
// that says nothing of its health (bulkhead full, rate limited, throttled),
// are ignored (a busy server is not a broken one); every other answer,
// NOT_FOUND included, is a success.
//
// # Detectors
//
//   - consecutive failures: an endpoint is ejected as soon as that many of
//     its calls in a row failed;
//   - failure percentage: at each interval, an endpoint whose failed share
//     reached the threshold;
//   - success rate: at each interval, an endpoint whose success rate is
//     below mean − stdevFactor × stdev of all endpoints' rates (Envoy's and
//     gRFC A50's algorithm);
//   - slow calls: at each interval, an endpoint whose share of calls slower
//     than durationThreshold reached rateThreshold. A unary call through
//     meshless's interceptor (grpcmw) is timed by the interceptor, from its
//     attempt's start to its end, exactly; any other call from pick to
//     done, to a tick (see [SlowCalls]).
//
// The interval detectors judge only endpoints with requestVolume calls in
// the interval, and the failure-percentage and success-rate ones run only
// when minimumHosts endpoints have that volume. An ejection lasts
// baseEjectionTime × the endpoint's ejection count, capped at
// maxEjectionTime; the count drops by one at each interval the endpoint
// spends in service. An ejected endpoint returns by itself. No more than
// maxEjectionPercent of the endpoints (rounded down) are ever ejected, and at
// least one always serves.
//
// An ejected endpoint keeps its connection: the child policy sees it in
// TRANSIENT_FAILURE through its health listener, as in gRPC's own outlier
// detection, and picks among the others. gRPC's client-side health checking
// (grpc.health.v1) passes through unchanged, so an endpoint whose health
// service says NOT_SERVING gets no calls either.
//
// # Use
//
// The balancer is built by gRPC from a service config. [ServiceConfigJSON]
// writes one from a [Config]; a [Monitor], named in the Config, gives Go
// code the ejected endpoints, a [Listener] for events and metrics, and the
// clock:
//
//	mon, err := outlier.NewMonitor(outlier.WithListener(listener))
//	if err != nil { ... }
//	defer mon.Close()
//	sc, err := outlier.ServiceConfigJSON(outlier.Config{Monitor: mon.Name()}, &healthService)
//	if err != nil { ... }
//	conn, err := grpc.NewClient("dns:///payments.default.svc.cluster.local:50051",
//		grpc.WithTransportCredentials(creds),
//		grpc.WithDefaultServiceConfig(sc))
//	...
//	fmt.Println(mon.Ejected()) // e.g. [10.0.3.7:50051]
//
// The resolver must yield every endpoint (in Kubernetes, a headless
// Service and dns:///), or there is nothing to balance over. The package
// blank-imports google.golang.org/grpc/health, so health checking needs only
// healthCheckConfig in the service config.
//
// The per-call path takes no lock and allocates nothing: each endpoint
// counts its calls with atomics, and a call is timed only when the
// slow-call detector is on: by grpcmw's interceptor, which passes on the
// times it reads for its gates (no clock read here), or else with two
// reads of the monotonic clock (pick and done) on the system clock.
package outlier
