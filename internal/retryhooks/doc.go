// Package retryhooks gives internal/engine what package retry keeps
// unexported: a backoff whose end by the caller's context ends the retry
// policy's call with the context's error, the error the engine's call ends
// with, rather than the last attempt's, which [retry.Retry.Execute]
// returns. It imports nothing of meshless, so that package retry can set
// the hook (in its init) without importing internal/engine.
package retryhooks
