package resilience_test

import (
	"strings"
	"testing"

	"github.com/meshless/meshless/resilience"
)

// Every kind of rejection is defined once: its reason reads back to the kind,
// its error type is the reason in lower case, and it has a gRPC code and an
// HTTP status. Kinds that reject nothing have none of them.
func TestRejectionKindsAreDefinedOnce(t *testing.T) {
	tests := []struct {
		kind     resilience.Kind
		reason   string
		grpc     uint32
		http     int
		upstream resilience.Outcome
	}{
		{kind: resilience.KindCircuitBreaker, reason: "CIRCUIT_OPEN", grpc: 14, http: 503, upstream: resilience.Failure},
		{kind: resilience.KindBulkhead, reason: "BULKHEAD_FULL", grpc: 8, http: 503, upstream: resilience.Ignored},
		{kind: resilience.KindRateLimiter, reason: "RATE_LIMITED", grpc: 8, http: 429, upstream: resilience.Ignored},
		{kind: resilience.KindThrottler, reason: "THROTTLED", grpc: 8, http: 503, upstream: resilience.Ignored},
		{kind: resilience.KindDeadLetter, reason: "DEFERRED", grpc: 14, http: 503, upstream: resilience.Ignored},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String(), func(t *testing.T) {
			if got := tt.kind.Reason(); got != tt.reason {
				t.Errorf("Reason() = %q, want %q", got, tt.reason)
			}
			if got := tt.kind.ErrorType(); got != strings.ToLower(tt.reason) {
				t.Errorf("ErrorType() = %q, want %q", got, strings.ToLower(tt.reason))
			}
			if got := tt.kind.GRPCCode(); got != tt.grpc {
				t.Errorf("GRPCCode() = %d, want %d", got, tt.grpc)
			}
			if got := tt.kind.HTTPStatus(); got != tt.http {
				t.Errorf("HTTPStatus() = %d, want %d", got, tt.http)
			}
			if got := tt.kind.RelayedOutcome(); got != tt.upstream {
				t.Errorf("RelayedOutcome() = %v, want %v", got, tt.upstream)
			}
			if k, ok := resilience.KindOfReason(tt.reason); !ok || k != tt.kind {
				t.Errorf("KindOfReason(%q) = %v, %v; want %v", tt.reason, k, ok, tt.kind)
			}
		})
	}
	for _, k := range []resilience.Kind{resilience.KindRetry, resilience.KindTimeout, resilience.KindOther, resilience.KindCall, resilience.KindHedging, resilience.KindOutlier, 0, 200} {
		if k.Reason() != "" || k.ErrorType() != "" || k.GRPCCode() != 0 || k.HTTPStatus() != 0 {
			t.Errorf("%v: has a wire reason (%q), want none", k, k.Reason())
		}
	}
	for _, r := range []string{"", "circuit_open", "NOT_OURS", "OK"} {
		if k, ok := resilience.KindOfReason(r); ok {
			t.Errorf("KindOfReason(%q) = %v, want none", r, k)
		}
	}
}
