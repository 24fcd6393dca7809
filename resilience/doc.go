// Package resilience is the small core that every meshless policy shares.
//
// It holds no policy of its own. It defines the shapes the policies agree on:
//
//   - [Policy] and [Chain]: a policy wraps a call; a chain composes policies
//     in a given order, outermost first, without allocating per call.
//   - [Outcome] and [Classifier]: every finished call is a [Success], a
//     [Failure] or [Ignored] (neither: it does not count for or against a
//     backend).
//   - [Clock]: time is injected. [SystemClock] is the real one (its Now is
//     coarse, see below); package resiliencetest has a fake for tests.
//   - [Observer] and [Recorder]: how policies report what they do (state
//     transitions with a reason, call outcomes with duration and slowness,
//     rejections) to metrics, traces or logs.
//   - [Rejection] and [IsRejection]: a call that a policy refused by itself
//     (a breaker open, a bulkhead full) is recognisable with one call, so that
//     nothing retries it.
//   - [Registry]: a bounded, concurrency-safe map that lazily creates one
//     instance per key.
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
// # Time on the hot path
//
// Reading the wall clock costs tens of nanoseconds on a virtual machine,
// more than the rest of a breaker's closed path together. [SystemClock]
// therefore answers Now from a value that a background goroutine refreshes
// every [CoarseResolution] while the clock is in use, and that stops by itself
// when nobody has read the clock for a while. Durations measured with it are
// exact to within one resolution step, which is far below any sensible
// slow-call threshold.
package resilience
