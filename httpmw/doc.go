// Package httpmw turns the YAML file grpcmw reads into an HTTP client's
// resilience: circuit breakers, retries or hedging, bulkheads, rate
// limiters, adaptive throttling and timeouts, per host and per route, as an
// http.RoundTripper, plus server-side load shedding as an http.Handler
// middleware. It runs on the same engine as grpcmw: the same defaults, the
// same order, the same observer and metrics.
//
//	cfg, err := httpmw.LoadConfig("weather-client.yaml")
//	if err != nil {
//		return err // every problem, each with its path: hosts."api.weather.example".routes."GET /v1/current/{city}".retry…
//	}
//	chain, err := httpmw.New(cfg, httpmw.WithObserver(obs))
//	if err != nil {
//		return err
//	}
//	defer chain.Close()
//	client := &http.Client{Transport: chain.RoundTripper(http.DefaultTransport)}
//
// A [Chain] is the transport's side of that configuration: the round-tripper
// (and the server middleware) built from the YAML, one policy set per host
// or route. It is not a [resilience.Chain], which composes policies around
// one function call; use that, or each policy's Execute, to protect code
// that is not an HTTP request. The configuration's sections are package
// config's types.
//
// # Keys
//
// The hosts section names hosts as a request's URL writes them (host or
// host:port, lower case), and under each its routes by net/http ServeMux
// pattern ("GET /v1/current/{city}"); a request's route is the one the
// standard library's own ServeMux matches. A request no route matches runs
// with its host's settings; a request to a host the configuration does not
// name, with the defaults, in one entry that every such host shares
// ([OtherRoute]): nothing grows with hosts or paths that arrive from
// outside. With circuitBreaker.keyBy: service (the default) one breaker and
// one bulkhead serve a host; with keyBy: method, one each route.
//
// # The order
//
// Every request runs its route's policies in the engine's one order, outer
// to inner, as gRPC calls do:
//
//	overall timeout → retry (or hedging) → circuit breaker → rate limiter → adaptive throttler → bulkhead → per-attempt timeout → the attempt (next.RoundTrip)
//
// The timeouts bound the wait for a response's header: once an attempt's
// response is the call's, its body is read under the request's own context
// (bound it with the request's deadline or http.Client.Timeout).
//
// # HTTP semantics
//
//   - Failures by default: transport errors, timeouts, 500, 502, 503, 504
//     (failureStatusCodes, HTTP status numbers under hosts). 501 Not
//     Implemented and every 4xx are a healthy server saying no: successes
//     for the breaker. A transport error or a timeout is a failure whatever
//     the list says. A caller that gave up (its context canceled) counts as
//     499 (config.StatusClientClosedRequest), ignored by default.
//   - Every response reaches the caller as a response, whatever its status:
//     never an error.
//   - Retries (retryableStatusCodes: 502, 503, 504 by default, and transport
//     errors and attempt timeouts always) only for an idempotent method
//     (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or a request with an
//     Idempotency-Key header, and only when its body can be sent again:
//     none, or Request.GetBody set (http.NewRequest sets it for in-memory
//     bodies). Otherwise the request is sent once, and a failure's error
//     says why ([ErrNotReplayable]).
//   - Hedging only for GET and HEAD, unless the route that writes hedging
//     names another method in its pattern ("POST /v1/search"); never for
//     a request that upgrades its connection (Connection: Upgrade).
//   - 429 and 503 carry Retry-After (seconds or an HTTP-date) as the
//     server's pushback: the next attempt waits for it; a wait past the
//     call's deadline, or longer than 300s, ends the retries.
//   - The response of an attempt that may be retried (or hedged on) is read
//     within the attempt, up to 4 KiB, so that its connection goes back to
//     the pool at once; a response the call does not return is closed.
//
// # Rejections on the wire
//
// A request a local policy refuses fails with the policy's own error, and
// no response: errors.Is matches circuitbreaker.ErrOpen, bulkhead.ErrFull,
// ratelimiter.ErrLimited or throttler.ErrThrottled, and [RejectionReason]
// names its reason. A [Server] answers a request it sheds with 503 (429 for
// the rate limiter), Retry-After, [ReasonHeader] and an RFC 9457
// application/problem+json body; [WriteRejection] answers so for a
// handler whose own client was refused. A meshless client one hop up reads
// the header: never retried nor hedged, an open breaker down the line is a
// failure of the service that relayed it, the other reasons are ignored by
// its breaker — as gRPC's ErrorInfo does.
//
// # Metrics
//
// With otelmw's Observer, a request is recorded in meshless.call.duration
// with OpenTelemetry's HTTP attributes (http.request.method,
// server.address, server.port, url.template — the route's pattern, never
// the path —, http.response.status_code, error.type); breakers, bulkheads,
// retries and timeouts as for gRPC, named by host and "host/route".
package httpmw
