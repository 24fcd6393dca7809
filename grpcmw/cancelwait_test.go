package grpcmw_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// A caller that cancels its call while a retry waits for its backoff gets
// CANCELLED, as grpc-go's own retry gives it (stream.go, shouldRetry: "case
// <-cs.ctx.Done(): ... return false, status.FromContextError(cs.ctx.Err()).Err()"),
// and as a call cancelled before it began does; it got the last attempt's
// UNAVAILABLE, which one hop up counts against this service although the
// caller gave up. Unary calls and streams (the retry of a stream waits in
// RecvMsg). The breaker counts the failed attempt, once: the cancellation is
// no attempt.
func TestCancelDuringABackoffIsTheCallersCancel(t *testing.T) {
	const config = `
retryThrottling: { enabled: false }
defaults:
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }
  timeout: { perAttempt: 1s, overall: 10s }
  retry: { maxAttempts: 3, initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }
`
	// refuse fails every stream's creation below meshless, as a connection
	// that cannot be made does: the retry then waits in NewStream.
	refuse := grpc.WithChainStreamInterceptor(func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, grpc.Streamer, ...grpc.CallOption) (grpc.ClientStream, error) {
		return nil, status.Error(codes.Unavailable, "no connection")
	})
	for _, tc := range []struct {
		name string
		dial []grpc.DialOption
		call func(ctx context.Context, c testgrpc.TestServiceClient) error
	}{
		{"unary", nil, func(ctx context.Context, c testgrpc.TestServiceClient) error {
			_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			return err
		}},
		{"stream", nil, func(ctx context.Context, c testgrpc.TestServiceClient) error {
			st, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
			if err != nil {
				return err
			}
			return st.RecvMsg(new(testgrpc.StreamingOutputCallResponse))
		}},
		{"stream creation", []grpc.DialOption{refuse}, func(ctx context.Context, c testgrpc.TestServiceClient) error {
			_, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := new(faultServer)
				f.setUnary(failing(codes.Unavailable))
				f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
					return status.Error(codes.Unavailable, "down")
				})
				client, chain, stop := inBubbleDial(t, f, config, tc.dial...)
				defer stop()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				time.AfterFunc(500*time.Millisecond, cancel) // in the first backoff (1s)
				start := time.Now()
				err := tc.call(ctx, client)
				if status.Code(err) != codes.Canceled || time.Since(start) != 500*time.Millisecond {
					t.Errorf("%v after %v; want CANCELLED at 500ms, when the caller cancelled", err, time.Since(start))
				}
				if n := f.calls.Load(); n != 1 && tc.dial == nil {
					t.Errorf("%d attempts, want 1", n)
				}
				cb, _ := chain.Breaker(testService)
				if m := cb.Metrics(); m.Calls != 1 || m.FailedCalls != 1 {
					t.Errorf("breaker counted %d calls, %d failed; want the one failed attempt", m.Calls, m.FailedCalls)
				}
			})
		})
	}
}
