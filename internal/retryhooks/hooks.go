package retryhooks

import "time"

// WaitOrEnd is (*retry.Attempts).Wait for a, a *retry.Attempts, except
// that when the context ends the backoff the policy's call is over with the
// context's error (the "retry done" event's Err and Outcome).
var WaitOrEnd func(a any, d time.Duration) bool
