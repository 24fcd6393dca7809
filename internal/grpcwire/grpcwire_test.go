package grpcwire_test

import (
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/internal/grpcwire"
	"github.com/meshless/meshless/resilience"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A rejection put on the wire reads back as its kind; a status with another
// domain, another code or an unknown reason is not one of meshless's.
func TestStatusReadsBack(t *testing.T) {
	for _, k := range []resilience.Kind{resilience.KindCircuitBreaker, resilience.KindBulkhead, resilience.KindRateLimiter, resilience.KindThrottler, resilience.KindDeadLetter} {
		st := grpcwire.Status(k, "refused", map[string]string{"name": "x"})
		if uint32(st.Code()) != k.GRPCCode() {
			t.Errorf("%v: code %v, want %d", k, st.Code(), k.GRPCCode())
		}
		if got, ok := grpcwire.Relayed(st); !ok || got != k {
			t.Errorf("%v: Relayed = %v, %v", k, got, ok)
		}
	}
	info := func(c codes.Code, domain, reason string) *status.Status {
		st, err := status.New(c, "x").WithDetails(&errdetails.ErrorInfo{Domain: domain, Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for name, st := range map[string]*status.Status{
		"another domain":    info(codes.Unavailable, "example.com", resilience.ReasonCircuitOpen),
		"another code":      info(codes.Internal, grpcwire.ErrorDomain, resilience.ReasonCircuitOpen),
		"a mismatched code": info(codes.ResourceExhausted, grpcwire.ErrorDomain, resilience.ReasonCircuitOpen),
		"an unknown reason": info(codes.Unavailable, grpcwire.ErrorDomain, "SOMETHING"),
		"no details":        status.New(codes.Unavailable, "x"),
		"nil":               nil,
	} {
		if k, ok := grpcwire.Relayed(st); ok {
			t.Errorf("%s: Relayed = %v, want none", name, k)
		}
	}
	if st := grpcwire.Status(resilience.KindRetry, "x", nil); st.Code() != codes.Unavailable || len(st.Details()) != 0 {
		t.Errorf("a kind without a reason: %v", st)
	}
}
