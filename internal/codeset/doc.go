// Package codeset is the engine's set of status codes (gRPC's 0–16 and
// HTTP's 100–599), one bit each: a method's failure, ignored, retryable
// and non-fatal codes, asked once per attempt.
package codeset
