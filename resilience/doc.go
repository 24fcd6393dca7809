// Package resilience is the small core that every meshless policy shares.
//
// It holds no policy of its own. It defines the shapes the policies agree on:
//
//   - [Policy] and [Chain]: a policy wraps a call; a chain composes policies
//     in a given order, outermost first, without allocating per call. The
//     breaker, bulkhead and timeout are both policies and gates.
//   - [Outcome] and [Classifier]: every finished call is a [Success], a
//     [Failure] or [Ignored] (neither: it does not count for or against a
//     backend).
//   - [Clock]: time is injected. [SystemClock] is the real one;
//     package resiliencetest has a fake for tests.
//   - [Observer] and [Recorder]: how policies report what they do (state
//     transitions with a reason, call outcomes with duration and slowness,
//     rejections) to metrics, traces or logs.
//   - [Rejection] and [IsRejection]: a call that a policy refused by itself
//     (a breaker open, a bulkhead full) is recognisable with one call, so that
//     nothing retries it.
//   - [Gate] and [Permit]: a policy in two steps (admit an attempt, be told
//     how it ended), which the transports' engine (grpcmw, httpmw) runs in
//     order around each attempt, giving every permit back on every path,
//     panics included.
//
// The package imports only the standard library; every other meshless package
// depends on it, never the reverse.
//
// # Composing policies
//
//	chain := resilience.NewChain(retryPolicy, breaker, bulkhead)
//	err := chain.Execute(ctx, func(ctx context.Context) error {
//		return callBackend(ctx)
//	})
//
// # Time
//
// Every policy reads [SystemClock] by default: exact durations, no
// goroutine. [CoarseClock] is an opt-in that trades exactness (it can lag
// the real time by milliseconds under CPU load) for a cheaper read; a
// process that never asks for it starts no clock goroutine.
//
// In a [Chain] a call's start is read once: a policy that read the system
// clock passes the reading on with [Next.RunAt], and the next policy takes
// it from [Next.Entered] instead of reading the clock again (a breaker's
// start becomes the per-attempt timeout's). A policy that made the call
// wait, or that runs the rest with [Next.Run], passes nothing on.
package resilience
