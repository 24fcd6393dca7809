package resilience

// The reasons meshless's own rejections carry on the wire: the
// google.rpc.ErrorInfo reason of a gRPC status, the reason header and the
// problem type of an HTTP response. This file is their one home: the
// transports, the outlier classifier and the metrics ask a [Kind] for its
// reason, codes and meaning instead of listing reasons.
const (
	// ReasonCircuitOpen: a circuit breaker refused the call.
	ReasonCircuitOpen = "CIRCUIT_OPEN"
	// ReasonBulkheadFull: a bulkhead had no free permit.
	ReasonBulkheadFull = "BULKHEAD_FULL"
	// ReasonRateLimited: a rate limiter had no permit left in its period.
	ReasonRateLimited = "RATE_LIMITED"
	// ReasonThrottled: the adaptive throttler shed the call locally, the
	// backend having refused too many recent requests.
	ReasonThrottled = "THROTTLED"
	// ReasonDeferred: the call was kept in a dead-letter queue, to be
	// replayed when the backend recovers.
	ReasonDeferred = "DEFERRED"
)

// The gRPC status codes rejections map to, by number (the core imports no
// gRPC package; the numbers are gRPC's canonical, stable values).
const (
	grpcResourceExhausted = 8
	grpcUnavailable       = 14
)

// wire is how a kind of rejection appears on each transport.
type wire struct {
	reason    string
	errorType string // reason in lower case: OpenTelemetry's error.type
	grpc      uint32
	http      int
	relayed   Outcome
}

// wires is indexed by Kind. A kind that never rejects a call has no entry.
var wires = [...]wire{
	KindCircuitBreaker: {ReasonCircuitOpen, "circuit_open", grpcUnavailable, 503, Failure},
	KindBulkhead:       {ReasonBulkheadFull, "bulkhead_full", grpcResourceExhausted, 503, Ignored},
	KindRateLimiter:    {ReasonRateLimited, "rate_limited", grpcResourceExhausted, 429, Ignored},
	KindThrottler:      {ReasonThrottled, "throttled", grpcResourceExhausted, 503, Ignored},
	KindDeadLetter:     {ReasonDeferred, "deferred", grpcUnavailable, 503, Ignored},
}

func (k Kind) wire() (wire, bool) {
	if int(k) < len(wires) && wires[k].reason != "" {
		return wires[k], true
	}
	return wire{}, false
}

// Reason returns the reason a rejection by a policy of kind k carries on the
// wire ([ReasonCircuitOpen] for [KindCircuitBreaker]), or "" for a kind whose
// rejections have none (a retry, a timeout, an adapted policy).
func (k Kind) Reason() string {
	w, _ := k.wire()
	return w.reason
}

// ErrorType returns the reason in lower case ("circuit_open"), the value of
// OpenTelemetry's error.type for a call so rejected; "" without a reason.
func (k Kind) ErrorType() string {
	w, _ := k.wire()
	return w.errorType
}

// GRPCCode returns the number of the gRPC status code a rejection of kind k
// is sent with: UNAVAILABLE (14) for an open breaker and a deferred call,
// RESOURCE_EXHAUSTED (8) for the others; 0 without a reason.
func (k Kind) GRPCCode() uint32 {
	w, _ := k.wire()
	return w.grpc
}

// HTTPStatus returns the status an HTTP server answers a rejection of kind k
// with: 429 for a rate limiter, 503 for the others; 0 without a reason.
func (k Kind) HTTPStatus() int {
	w, _ := k.wire()
	return w.http
}

// RelayedOutcome says how a rejection of kind k that a downstream meshless
// made, and a service passed on unchanged, counts for the hop that receives
// it: an open breaker down the line is a [Failure] of the service that
// relayed it (it cannot serve), every other reason is [Ignored] (a busy,
// limited or deferring service is not a broken one). Whatever it says, a
// relayed rejection is never retried.
func (k Kind) RelayedOutcome() Outcome {
	if w, ok := k.wire(); ok {
		return w.relayed
	}
	return Failure
}

// KindOfReason returns the kind whose rejections carry reason, as read from
// the wire; false for a reason that is not one of meshless's.
func KindOfReason(reason string) (Kind, bool) {
	for k, w := range wires {
		if w.reason != "" && w.reason == reason {
			return Kind(k), true
		}
	}
	return 0, false
}
