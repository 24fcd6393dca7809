package grpcmw_test

import (
	"context"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

// A hedged call every copy of which meshless's own gates refuse (an open
// breaker, a full bulkhead, with or without a wait, a spent rate limit;
// one copy after another, or all at once) returns the refusal, with its
// reason on the wire (hedging.md rule 7): the caller one hop up does not
// retry it, although its code is in the caller's retryableStatusCodes;
// no copy reaches the backend, every permit is given back, and the breaker
// counts no failure (docs/grpc.md, "Rejections on the wire").
func TestAHedgedCallEveryCopyOfWhichIsRefusedHereIsNotRetriedOneHopUp(t *testing.T) {
	for _, tc := range []struct {
		name, gates string
		block       bool // a stream holds the bulkhead's one place, or spends the one permit
		code        codes.Code
		reason      string
	}{
		{"breaker forced open", "  circuitBreaker: { mode: FORCED_OPEN }\n", false, codes.Unavailable, grpcmw.ReasonCircuitOpen},
		{"bulkhead full", "  bulkhead: { maxConcurrentCalls: 1 }\n", true, codes.ResourceExhausted, grpcmw.ReasonBulkheadFull},
		{"bulkhead full, copies waiting", "  bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 50ms }\n", true, codes.ResourceExhausted, grpcmw.ReasonBulkheadFull},
		{"rate limited", "  rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h }\n", true, codes.ResourceExhausted, grpcmw.ReasonRateLimited},
	} {
		for _, delay := range []string{"10ms", "0s"} {
			t.Run(tc.name+", hedgingDelay "+delay, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					c := new(faultServer)
					release, held := make(chan struct{}), make(chan struct{})
					c.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
						close(held)
						<-release
						return nil
					})
					toC, bChain, stopC := inBubbleDial(t, c, "defaults:\n"+tc.gates+`
services:
  grpc.testing.TestService:
    methods:
      UnaryCall:
        retry: { enabled: false }
        hedging: { maxAttempts: 3, hedgingDelay: `+delay+` }
`)
					defer stopC()
					blocked := make(chan error, 1)
					if tc.block {
						go func() {
							s, err := toC.StreamingOutputCall(context.Background(), sendParams(1))
							if err == nil {
								_, err = recvAll(s)
							}
							blocked <- err
						}()
						<-held
						c.calls.Store(0) // the stream's
					}
					b := new(faultServer)
					b.setUnary(func(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
						return toC.UnaryCall(ctx, req) // C's answer, or B's refusal, passed on unchanged
					})
					toB, _, stopB := inBubbleDial(t, b, `
defaults:
  retry: { maxAttempts: 5, initialBackoff: 1ms, maxBackoff: 1ms, retryableStatusCodes: [UNAVAILABLE, RESOURCE_EXHAUSTED] }
`)
					defer stopB()
					_, err := toB.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
					if status.Code(err) != tc.code || grpcmw.RejectionReason(err) != tc.reason {
						t.Errorf("A got %v, want %v with reason %s", err, tc.code, tc.reason)
					}
					if b.calls.Load() != 1 || c.calls.Load() != 0 {
						t.Errorf("B saw %d calls, C %d unary calls; want 1 and 0: no copy sent, nothing retried one hop up", b.calls.Load(), c.calls.Load())
					}
					if bh, ok := bChain.Bulkhead(testService); ok && bh.Active() != btoi(tc.block) {
						t.Errorf("B's bulkhead holds %d places, want only the stream's", bh.Active())
					}
					if cb, _ := bChain.Breaker(testService); cb.Metrics().FailedCalls != 0 {
						t.Errorf("B's breaker %+v, want no failure: nothing reached C", cb.Metrics())
					}
					close(release)
					if tc.block {
						if err := <-blocked; err != nil {
							t.Errorf("the stream holding the gate: %v", err)
						}
					}
				})
			})
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
