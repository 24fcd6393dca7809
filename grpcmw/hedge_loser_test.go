package grpcmw_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/meshless/meshless/grpcmw"
)

// A hedged call whose winner answers just before the overall deadline: the
// loser, cancelled by the winner before the deadline, is CANCELLED (ignored
// by the breaker), also when its attempt returns after the deadline has
// passed (a goroutine that ran late). It is not a timeout: it did not run
// until the deadline, the winner ended it (docs/hedging.md).
func TestAHedgeLoserCancelledJustBeforeTheDeadlineIsNoTimeout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		loser string // the losing copy, by its grpc-previous-rpc-attempts ("" for the first)
		wait  time.Duration
	}{{"the first copy loses", "", 199 * time.Millisecond}, {"the hedge loses", "1", 299 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := new(faultServer)
				f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					md, _ := metadata.FromIncomingContext(ctx)
					if v := md.Get(grpcmw.PreviousAttemptsHeader); len(v) > 0 && v[0] == tc.loser || len(v) == 0 && tc.loser == "" {
						<-ctx.Done()
						return nil, ctx.Err()
					}
					time.Sleep(tc.wait) // the winner answers 1ms before the deadline
					return &testgrpc.SimpleResponse{Username: "winner"}, nil
				})
				late := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
					err := invoker(ctx, method, req, reply, cc, opts...)
					md, _ := metadata.FromOutgoingContext(ctx)
					var prev string
					if v := md.Get(grpcmw.PreviousAttemptsHeader); len(v) > 0 {
						prev = v[0]
					}
					if prev == tc.loser {
						time.Sleep(2 * time.Millisecond) // the loser's goroutine runs late: past the deadline
					}
					return err
				}
				client, chain, stop := inBubbleDial(t, f, `
defaults:
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }
  hedging: { maxAttempts: 2, hedgingDelay: 100ms }
  timeout: { perAttempt: 0s, overall: 300ms }
`, grpc.WithChainUnaryInterceptor(late))
				defer stop()
				resp, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
				if err != nil || resp.GetUsername() != "winner" {
					t.Fatalf("the call = %v, %v; want the winner's reply", resp, err)
				}
				cb, _ := chain.Breaker(testService)
				if m := cb.Metrics(); m.FailedCalls != 0 || m.Calls != 1 {
					t.Errorf("breaker %+v, want 1 call, a success: the loser the winner cancelled is ignored", m)
				}
				synctest.Wait()
			})
		})
	}
}
