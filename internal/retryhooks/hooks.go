package retryhooks

import "time"

// WaitOrEnd is (*retry.Attempts).Wait for a, a *retry.Attempts, except
// that when the context ends the backoff the policy's call is over with the
// context's error (the "retry done" event's Err and Outcome).
var WaitOrEnd func(a any, d time.Duration) bool

// Stop ends the call of a, a *retry.Attempts, with err and reason "not
// retryable", counting no attempt, unless it is over: the call ends
// between two attempts (its retry panicked), and every attempt made has
// been counted.
var Stop func(a any, err error)
