// Package ratelimiter limits how many calls a client sends per period, so
// that it stays within a quota that a dependency grants it (or that it grants
// itself). It keeps Resilience4j's names: limitForPeriod calls per
// limitRefreshPeriod, and a call may wait up to timeoutDuration for a permit.
//
// A [Limiter] hands out permits. A call that finds one free runs at once; a
// call that finds none waits for the next one that comes free within
// timeoutDuration (0, the default, does not wait) and is otherwise refused
// with a *[LimitedError], which errors.Is [ErrLimited].
//
//	cfg := ratelimiter.DefaultConfig()
//	cfg.LimitForPeriod = 100
//	cfg.LimitRefreshPeriod = time.Second
//	cfg.TimeoutDuration = 50 * time.Millisecond
//	rl, err := ratelimiter.New(ratelimiter.WithConfig(cfg), ratelimiter.WithName("payments"))
//	...
//	err = rl.Execute(ctx, func(ctx context.Context) error {
//		return client.Charge(ctx, req)
//	})
//	if errors.Is(err, ratelimiter.ErrLimited) {
//		// refused locally: the call never left this process
//	}
//
// # Configuration and the one way in
//
// A limiter's settings are one [Config], started from [DefaultConfig] and
// given to [New] with [WithConfig]. The other options set what is not a
// setting: the name and the observer.
//
// [Limiter.Execute] is the way to run a call through a limiter.
// [Limiter.Apply] is the same call in the shape of a [resilience.Policy], the
// method through which [resilience.NewChain] composes policies.
// [Limiter.Enter] and [Limiter.Exit] are the limiter's [resilience.Gate]
// contract, for meshless's engine (the grpcmw and httpmw interceptors): each
// attempt spends one permit at Enter, and Exit gives nothing back.
//
// # Bursty and smooth
//
// A [Bursty] limiter (the default, as Resilience4j) hands out a period's
// limitForPeriod permits as fast as they are asked for and refreshes them
// when the next period begins. A [Smooth] limiter ([Config.Mode]) spaces them
// evenly, one every limitRefreshPeriod / limitForPeriod: 100 calls per second
// are one call every 10 ms, and a second call within the same 10 ms waits or
// is refused. Both are failsafe-go's rate limiters, used through their permit
// API (never failsafe-go's executor), except a bursty limiter that does not
// wait, whose permits are meshless's own, spread over one shard per
// processor; periods are counted from the limiter's creation.
//
// # Waiting and the caller's context
//
// A waiting call reserves its permit first and then waits for it, so waiters
// are served first come, first served, and a call for which no permit would
// come free within timeoutDuration — or before its context's deadline — is
// refused at once instead of waiting in vain. A waiting call whose context
// ends stops waiting at once: the *LimitedError carries ctx.Err() as its
// Cause (errors.Is(err, context.Canceled) holds), and it is still a
// [resilience.Rejection]. Its reserved permit is spent all the same.
//
// # Where it sits
//
// In a meshless chain (package grpcmw) the rate limiter sits inside the
// circuit breaker and outside the bulkhead:
//
//	overall timeout → retry → circuit breaker → rate limiter → bulkhead → attempt timeout → call
//
// Each attempt spends one permit, as a quota counts the requests that reach
// the server; a call that an open breaker refuses spends none.
//
// # Rejections
//
// A rate limiter's refusal is a local event that says nothing about the
// dependency's health: [LimitedError] is a [resilience.Rejection], so circuit
// breakers count it as ignored and retries never retry it. On the wire,
// grpcmw turns it into RESOURCE_EXHAUSTED with the google.rpc.ErrorInfo
// reason RATE_LIMITED. Rejecting a call at once does not allocate: every such
// rejection shares one error, built with the limiter.
//
// # Time
//
// failsafe-go's rate limiter reads [time.Now] and takes no injected clock,
// so a Limiter has no WithClock option: tests run it in a testing/synctest
// bubble, where time.Now and timers are fake.
//
// # Cost
//
// An admitted call of a bursty limiter that does not wait reads the
// monotonic clock once and takes a permit from its own processor's shard
// (a lock no other core takes while the shard has permits); one of a smooth
// limiter, or of one that waits, costs failsafe-go's mutex and one
// [time.Now] read. Neither allocates; nor does a rejection at once. See
// docs/ratelimiter.md.
//
// A Limiter is safe for concurrent use.
package ratelimiter
