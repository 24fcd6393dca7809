// Package engine is meshless's one call plan, shared by every transport
// (grpcmw for gRPC, httpmw for HTTP): the table of per-key policy sets built
// from the configuration, with hot reload, and the order every call runs
// through, written once (order.go):
//
//	overall timeout → retry (or hedging, or retry-budget counting) → circuit breaker → rate limiter → adaptive throttler → bulkhead → per-attempt timeout → the attempt
//
// A transport supplies only what is its own ([Transport]): how to read an
// attempt's status code and relayed rejection, how to mark an attempt (the
// previous-attempts header), and how to put a rejection and a call's error
// on its wire. It makes each attempt ([Attempt]). Unary calls run with
// [Method.Run]; streams drive a [Call] step by step; servers run
// [Method.Serve]. Every path records the overall timeout's event and the
// per-call event, and gives back every permit on every path, panics
// included.
//
// The engine imports neither grpc nor net/http.
package engine
