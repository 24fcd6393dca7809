// Package grpcmw turns one YAML file into a gRPC client's resilience:
// circuit breakers, retries, bulkheads and timeouts, per service and per
// method, as unary and stream client interceptors, plus server-side load
// shedding.
//
//	cfg, err := grpcmw.LoadConfig("payments-client.yaml")
//	if err != nil {
//		return err // every problem, each with its path: services."payment.PaymentService".retry.maxAttempts: ...
//	}
//	chain, err := grpcmw.New(cfg, grpcmw.WithObserver(obs))
//	if err != nil {
//		return err
//	}
//	conn, err := grpc.NewClient(target, append(chain.DialOptions(), creds)...)
//
// A [Chain] is the transport's side of that configuration: the set of
// interceptors (and the service config that installs the outlier balancer)
// built from the YAML, one policy set per service or method. It is not a
// [resilience.Chain], which composes policies around one function call; use
// that, or each policy's Execute, to protect code that is not a gRPC call.
// The configuration's sections are package config's types.
//
// # The order
//
// Every call runs its method's policies in one fixed order, outer to inner:
//
//		overall timeout → retry (or hedging) → circuit breaker → rate limiter → adaptive throttler → bulkhead → per-attempt timeout → the call
//
//	  - Retry is outside the breaker: each attempt is one breaker call, and an
//	    open breaker ends the retries at once (a rejection is never retried).
//	  - The rate limiter (a rateLimiter section; off unless written) is
//	    inside the breaker, so an open breaker spends no quota, and outside
//	    the bulkhead, so a call over the limit never holds a slot.
//	  - The bulkhead is inside the breaker: an open breaker rejects before a
//	    permit is taken, and a full bulkhead is a local event the breaker
//	    ignores.
//	  - The adaptive throttler (adaptiveThrottling) is inside the breaker and
//	    outside the bulkhead: an open breaker spends nothing in it, and what it
//	    rejects takes no permit and is a local event the breaker ignores.
//	  - The per-attempt timeout is innermost: a timed-out attempt gives its
//	    bulkhead permit back and counts as a breaker failure.
//	  - The overall timeout bounds all attempts and backoffs; a backoff that
//	    would not end before it is not slept.
//
// TestTheOrderOfEvents records the events of a retried call to show it.
// docs/order.md explains each choice.
//
// # Classification
//
// Each attempt's status becomes an outcome for the breaker: the codes of
// failureStatusCodes (UNAVAILABLE, INTERNAL, UNKNOWN, DEADLINE_EXCEEDED,
// DATA_LOSS by default) and any error that is not a status are failures;
// ignoredStatusCodes (CANCELLED) and local rejections are ignored; every other
// code (NOT_FOUND, INVALID_ARGUMENT, …) is a success, a healthy backend saying
// no. The caller always gets the backend's error unchanged.
//
// # Rejections on the wire
//
// A call the breaker refuses fails with UNAVAILABLE and a
// google.rpc.ErrorInfo whose reason is CIRCUIT_OPEN (metadata: name,
// state); a call the bulkhead refuses, with RESOURCE_EXHAUSTED and
// BULKHEAD_FULL; a call the rate limiter refuses, with RESOURCE_EXHAUSTED
// and RATE_LIMITED; a call the adaptive throttler refuses, with
// RESOURCE_EXHAUSTED and THROTTLED; a call a dead-letter queue kept, with
// UNAVAILABLE and DEFERRED (metadata: key, id). The error also matches
// circuitbreaker.ErrOpen, bulkhead.ErrFull, ratelimiter.ErrLimited,
// throttler.ErrThrottled or deadletter.ErrDeferred with errors.Is
// ([RejectionError]). No meshless
// client retries or hedges any of these reasons, also when a downstream
// service passes it on unchanged ([RejectionReason]); the relayed
// CIRCUIT_OPEN counts as a failure of the service that relayed it, a
// relayed BULKHEAD_FULL, RATE_LIMITED, THROTTLED or DEFERRED is ignored by the
// breaker, whatever the configured codes, and none moves the retry throttle.
//
// # gRFC A6
//
// Retries follow gRFC A6 where an interceptor can: a grpc-retry-pushback-ms
// trailer that is not one plain decimal value stops them, and so does one
// longer than 300s, deadline or not (grpc-go would wait it); every call of the
// client moves its retry throttle ([Chain.Throttle]), retrying or not;
// retry attempts carry grpc-previous-rpc-attempts; a timeout reaches the
// caller as DEADLINE_EXCEEDED on every reading. See docs/retry.md.
//
// # Cluster mode
//
// With a cluster section (redis.addr or redis.url, namespace, syncInterval,
// decideOn), the chain's breakers share their windows, opens and half-open
// probes with the client's other instances through Redis, with nothing on
// the call path (docs/cluster.md). [Chain.Cluster] returns the running
// cluster, [WithRedisClient] gives it a go-redis client built in Go, and
// [Chain.Close] stops it. When the section leaves namespace out, the
// namespace is derived from the dial target of the chain's first call, and
// the cluster starts then: until that call, [Chain.Cluster] returns nil.
//
// # Observe mode
//
// mode: observe, at any level (defaults, a service, a method), runs every
// policy of what the level covers as usual — each decides, records its
// events and metrics — but none acts: no call is refused, delayed, retried,
// hedged, cut by a timeout or deferred. Use it to see what a new
// configuration would do before enforcing it (docs/configuration.md).
//
// # Dead-letter queue
//
// A deadLetter section keeps the unary calls a key's open breaker refuses
// (and, with on: [RETRIES_EXHAUSTED], those whose attempts all failed) in a
// durable, bounded queue (package deadletter: a bbolt file or Redis
// Streams), answers the caller UNAVAILABLE with DEFERRED, and replays them
// through the same connection and policies once the breaker closes. Streams
// are never deferred. [WithDeadLetterListener] receives the queue's events;
// docs/deadletter.md has the rest.
//
// # Streams
//
// See [Chain.StreamClientInterceptor]: a stream is admitted at creation, its
// final status is its outcome, its permits come back however it ends, and
// any kind of stream is retried, replaying the messages it sent, until it
// commits: a response reached the caller, or its messages outgrew
// [WithRetryBufferLimit].
package grpcmw
