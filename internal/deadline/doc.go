// Package deadline applies a call's two timeouts, the overall and the
// per-attempt one (package timeout's), together: the engine's call plan
// derives one context per attempt at most. It is the engine's, not a
// user's; a user bounds a call with timeout.Timeout.Execute.
package deadline
