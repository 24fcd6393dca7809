// Package bulkhead limits how many calls run at once, so that a slow
// dependency cannot tie up every goroutine, connection or stream of its
// caller.
//
// A [Bulkhead] hands out permits. A call that finds one free runs at once; a
// call that finds none waits up to maxWaitDuration for one (0, the default,
// does not wait) and is otherwise refused with a *[FullError], which
// errors.Is [ErrFull].
//
//	cfg := bulkhead.DefaultConfig()
//	cfg.MaxConcurrentCalls = 50
//	cfg.MaxWaitDuration = 10 * time.Millisecond
//	bh, err := bulkhead.New(bulkhead.WithConfig(cfg), bulkhead.WithName("payments"))
//	...
//	err = bh.Execute(ctx, func(ctx context.Context) error {
//		return client.Charge(ctx, req)
//	})
//
// # Configuration and the one way in
//
// A bulkhead's settings are one [Config], started from [DefaultConfig] and
// given to [New] with [WithConfig]. The other options set what is not a
// setting: the name, the clock, the observer.
//
// [Bulkhead.Execute] is the way to run a call through a bulkhead; it gives
// the permit back when the call returns or panics. [Bulkhead.Apply] is the
// same call in the shape of a [resilience.Policy], the method through which
// [resilience.NewChain] composes policies. [Bulkhead.Enter] and
// [Bulkhead.Exit] are the bulkhead's [resilience.Gate] contract, for
// meshless's engine (the grpcmw and httpmw interceptors), which admits an
// attempt, runs it and gives its permit back in separate steps.
//
// # Fixed and adaptive limits
//
// The fixed limit is maxConcurrentCalls (default 100). Without a wait (the
// default) its permits are meshless's own, spread over one shard per
// processor so that calls on different cores share no memory; with a
// maxWaitDuration they are failsafe-go's bulkhead, a semaphore whose
// waiters every permit given back can wake. [Config.Adaptive] replaces it with failsafe-go's
// adaptive concurrency limiter, which starts at initialLimit and moves
// between minLimit and maxLimit by the calls' latency: it compares the recent
// latency (the 90th percentile of a window of at least 50 calls and one
// second, smoothed) with a long-run baseline, lowers the limit by about
// log10(limit) when recent calls are markedly slower than the baseline (a
// queue is building up downstream, or throughput stops growing with
// concurrency), and raises it likewise while they are not — never above 5
// times the calls in flight. Calls in flight are never interrupted when the
// limit drops; new calls wait or are refused until fewer are in flight.
//
// # Waiting and the caller's context
//
// A waiting call stops waiting when its context ends. It is then refused
// too: the *FullError carries ctx.Err() as its Cause (errors.Is(err,
// context.Canceled) holds), and it is still a [resilience.Rejection]. A call
// that finds a permit free takes it without looking at its context. Waiters
// are served first come, first served.
//
// # Rejections
//
// A bulkhead's refusal is a local event that says nothing about the
// dependency's health: [FullError] is a [resilience.Rejection], so circuit
// breakers count it as ignored and retries never retry it. Rejecting a call
// that finds the bulkhead full does not allocate: every such rejection
// shares one error, built when the bulkhead is (or, for an adaptive
// bulkhead, when its limit last moved).
//
// # Latency samples
//
// An adaptive limit learns from the latency of the calls that ran their
// course. A call that ended early (its error is a [resilience.Rejection] from
// further in, [context.Canceled] or [context.DeadlineExceeded], or it
// panicked) says nothing about the dependency and is no sample; any other
// call, failed or not, is one, as in failsafe-go's own executor.
//
// # failsafe-go policies in a chain
//
// failsafepolicy.New lets any failsafe-go policy (hedge, fallback, rate
// limiter, cache, ...) join a [resilience.Chain], at the price of
// failsafe-go's executor: a dozen or more allocations a call, where the
// meshless policies take none.
//
// # Cost
//
// A fixed bulkhead's admission and release are one compare-and-swap each on
// the calling processor's shard (a non-blocking channel send and receive on
// a bulkhead that waits): no allocation, no clock read, and no lock; the
// permit [Bulkhead.Enter] returns names its shard, so [Bulkhead.Exit] finds
// it without a second processor lookup. A call
// that finds its shard empty looks at the others, and is refused only when
// every shard was empty at one instant; that call marks the bulkhead full,
// and until a permit comes back every call is refused on one read of the
// mark. The clock ([WithClock]) is read only by calls that wait. An
// adaptive bulkhead takes failsafe-go's mutexes and allocates its permit
// (one allocation a call). See docs/bulkhead.md.
//
// A Bulkhead is safe for concurrent use.
package bulkhead
