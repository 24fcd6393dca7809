// Package failsafepolicy lets failsafe-go's policies (a hedge, a fallback,
// a rate limiter, a cache, ...) join a [resilience.Chain]. It is a package of
// its own so that programs that do not use it do not compile failsafe-go's
// other policies.
//
// [New] wraps one or more failsafe-go policies as a resilience.Policy; the
// rest of the chain runs inside them, with the failsafe-go execution's
// context.
package failsafepolicy
