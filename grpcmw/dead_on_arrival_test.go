package grpcmw_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

// A call whose context has ended before it starts (a request that waited
// out its propagated deadline in a queue) never reaches the backend: it
// must count neither for nor against it. It counted as a failure: a dozen
// such calls opened the breaker of a healthy backend, and every live call
// after them was refused. Unary, hedged, streaming and hedged streaming
// calls, with an expired deadline and with a cancel: each gets the
// context's status, as gRPC gives it, and the breaker and the throttle do
// not move.
func TestACallWhoseContextEndedBeforeItStartsCountsForNothing(t *testing.T) {
	for _, tc := range []struct {
		name, config string
	}{
		{"plain", `
defaults:
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 5 }
`},
		{"retrying with timeouts", `
defaults:
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 5 }
  retry: { maxAttempts: 3, retryableStatusCodes: [UNAVAILABLE, DEADLINE_EXCEEDED] }
  timeout: { perAttempt: 1s, overall: 3s }
  bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 1s }
`},
		{"hedged", `
defaults:
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 5 }
  retry: { enabled: false }
  hedging: { maxAttempts: 3, hedgingDelay: 50ms, nonFatalStatusCodes: [UNAVAILABLE, DEADLINE_EXCEEDED] }
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := new(faultServer)
				f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
					return nil
				})
				client, chain, stop := inBubble(t, f, tc.config)
				defer stop()
				tokens := chain.Throttle().Tokens()
				ended := []struct {
					ctx  func() (context.Context, context.CancelFunc)
					code codes.Code
				}{
					{func() (context.Context, context.CancelFunc) {
						return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
					}, codes.DeadlineExceeded},
					{func() (context.Context, context.CancelFunc) {
						ctx, cancel := context.WithCancel(context.Background())
						cancel()
						return ctx, cancel
					}, codes.Canceled},
				}
				for i := range 12 {
					for _, e := range ended {
						ctx, cancel := e.ctx()
						_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
						if status.Code(err) != e.code || grpcmw.RejectionReason(err) != "" {
							t.Fatalf("unary call %d: %v, want %v from the context", i, err, e.code)
						}
						st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
						if err == nil {
							err = st.RecvMsg(new(testgrpc.StreamingOutputCallResponse))
						}
						if status.Code(err) != e.code || grpcmw.RejectionReason(err) != "" {
							t.Fatalf("stream %d: %v, want %v from the context", i, err, e.code)
						}
						cancel()
					}
				}
				synctest.Wait()
				if n := f.calls.Load(); n != 0 {
					t.Errorf("the server saw %d calls, want none", n)
				}
				cb, _ := chain.Breaker(testService)
				if m := cb.Metrics(); m.Calls != 0 || cb.State().String() != "CLOSED" {
					t.Errorf("breaker %v with %d calls counted, want CLOSED and none", cb.State(), m.Calls)
				}
				if got := chain.Throttle().Tokens(); got != tokens {
					t.Errorf("retry tokens %v → %v, want no move", tokens, got)
				}
				if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
					t.Errorf("%d bulkhead permits held", bh.Active())
				}
				if _, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil {
					t.Errorf("a live call after them: %v, want it answered", err)
				}
			})
		})
	}
}
