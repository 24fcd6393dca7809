package grpcmw_test

import (
	"context"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/meshless/meshless/grpcmw"
)

// Calls that never reached an endpoint never count against one, even with
// consecutiveFailures: 1: a call meshless's own rate limiter refused, one
// the caller cancelled before it was sent, one whose deadline had passed
// before it was sent. Only the calls the pods answered count, and they
// succeeded.
func TestCallsThatNeverReachedAnEndpointDoNotCount(t *testing.T) {
	addrs, counts, _ := pods(t, 3, func(int) (*testgrpc.SimpleResponse, error) { return &testgrpc.SimpleResponse{}, nil })
	client, chain := dialPods(t, addrs, `
defaults:
  circuitBreaker: { enabled: false }
  retry: { enabled: false }
services:
  grpc.testing.TestService:
    circuitBreaker: { keyBy: method, enabled: false }
    rateLimiter: { limitForPeriod: 3, limitRefreshPeriod: 1h }
    methods:
      EmptyCall: { rateLimiter: { enabled: false } }
outlierDetection:
  consecutiveFailures: 1
  failurePercentage: { enabled: false }
  successRate: { enabled: false }
  slowCalls: { enabled: false }
`)
	for range 3 {
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); grpcmw.RejectionReason(err) != grpcmw.ReasonRateLimited {
			t.Fatalf("a call over the limit failed with %v, want RATE_LIMITED", err)
		}
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	for range 10 {
		for _, ctx := range []context.Context{cancelled, expired} {
			if _, err := client.EmptyCall(ctx, &testgrpc.Empty{}); err == nil {
				t.Fatal("a call with a context already done succeeded")
			}
		}
	}
	if got := chain.Outlier().Ejected(); len(got) != 0 {
		t.Fatalf("ejected %v by calls that never reached it", got)
	}
	var reached int32
	for _, c := range counts {
		reached += c.Load()
	}
	if reached != 3 {
		t.Fatalf("the pods got %d calls, want 3", reached)
	}
}
