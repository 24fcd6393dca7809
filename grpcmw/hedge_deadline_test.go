package grpcmw_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

// A hedged call whose two copies both hang until the overall deadline
// counts two breaker failures, one per copy sent (docs/hedging.md: the
// breaker sees each copy as one call), whichever copy's end the hedge sees
// first. Each copy's context has a timer of its own at the deadline; when
// one copy's end decided the call before the other's timer had fired, the
// hedge's cancel reached that other copy first, gRPC ended it CANCELLED,
// and the breaker ignored it: one failure or two, by the scheduler. Here
// the copy seen last ends as gRPC ends it then (CANCELLED, just after the
// deadline), in both orders.
func TestHedgedCopiesThatHangUntilTheOverallDeadlineEachCountOneFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		last string // the copy seen last, by its grpc-previous-rpc-attempts ("" for the first)
	}{{"the first copy seen last", ""}, {"the hedge seen last", "1"}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := new(faultServer)
				f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					<-ctx.Done()
					return nil, ctx.Err()
				})
				order := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
					err := invoker(ctx, method, req, reply, cc, opts...)
					md, _ := metadata.FromOutgoingContext(ctx)
					var prev string
					if v := md.Get(grpcmw.PreviousAttemptsHeader); len(v) > 0 {
						prev = v[0]
					}
					if prev == tc.last {
						time.Sleep(time.Millisecond) // the other copy's end decides the call
						return status.FromContextError(context.Canceled).Err()
					}
					return err
				}
				client, chain, stop := inBubbleDial(t, f, `
defaults:
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }
  hedging: { maxAttempts: 2, hedgingDelay: 100ms }
  timeout: { perAttempt: 0s, overall: 300ms }
`, grpc.WithChainUnaryInterceptor(order))
				defer stop()
				_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
				if status.Code(err) != codes.DeadlineExceeded {
					t.Errorf("the call = %v, want DEADLINE_EXCEEDED", err)
				}
				cb, _ := chain.Breaker(testService)
				if m := cb.Metrics(); m.Calls != 2 || m.FailedCalls != 2 {
					t.Errorf("breaker %+v, want 2 calls, both failed: one per copy sent", m)
				}
				synctest.Wait()
			})
		})
	}
}
