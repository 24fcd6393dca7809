// Package hedgehooks gives internal/engine a way of running package
// retry's hedging policy that package retry keeps unexported: the first
// copy runs under a context the engine derives itself (the copy's
// deadline), not under one more that the policy would derive to cancel it.
// It imports nothing of meshless, so that package retry can set the hook
// (in its init) without importing internal/engine.
package hedgehooks
