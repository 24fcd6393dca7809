package retry

import "strconv"

// Reason says why a retry policy made no further attempt; the
// resilience.EventRetryDone event carries it as a resilience.Label.
type Reason uint8

const (
	// ReasonNone: the call succeeded.
	ReasonNone Reason = iota
	// ReasonMaxAttempts: the attempts allowed are spent.
	ReasonMaxAttempts
	// ReasonNotRetryable: the error is not one to retry.
	ReasonNotRetryable
	// ReasonRejected: a policy rejected the call locally, or the server
	// relayed a meshless rejection; rejections are never retried.
	ReasonRejected
	// ReasonContextDone: the caller's context ended.
	ReasonContextDone
	// ReasonDeadline: the next backoff does not fit before the deadline.
	ReasonDeadline
	// ReasonPushback: the server asked not to retry.
	ReasonPushback
	// ReasonThrottled: retry throttling is holding retries back.
	ReasonThrottled
	// ReasonCommitted: the call had already delivered responses (a stream),
	// so it could not be replayed.
	ReasonCommitted
	// ReasonObserved: the policy would have retried, and is observe only
	// (WithObserve): the retry it decided on was reported, not made.
	ReasonObserved
)

var reasonNames = [...]string{
	"none", "max_attempts", "not_retryable", "rejected", "context_done", "deadline", "pushback", "throttled", "committed", "observed",
}

// String returns the reason's name, e.g. "max_attempts".
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}
