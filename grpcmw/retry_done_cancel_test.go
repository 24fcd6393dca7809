package grpcmw_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
)

// A call whose caller cancels while a retry waits out its backoff ends
// CANCELLED, and its retry policy's "retry done" event (reason
// context_done) says so too: it carried the last attempt's error, so a
// retryable code the breaker counts a success (RESOURCE_EXHAUSTED, listed
// in retryableStatusCodes) made meshless.retry.calls count the call a
// success while the call's own record said CANCELLED. Unary and
// streaming (retried in RecvMsg before the call commits).
func TestARetryCancelledInItsBackoffEndsWithTheCallersCancel(t *testing.T) {
	for _, kind := range []string{"unary", "stream"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				obs := new(resiliencetest.Observer)
				f := new(faultServer)
				f.setUnary(failing(codes.ResourceExhausted))
				f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
					return status.Error(codes.ResourceExhausted, "busy")
				})
				client, _, stop := inBubbleWith(t, f, `
retryThrottling: { enabled: false }
defaults:
  circuitBreaker: { enabled: false }
  adaptiveThrottling: { enabled: false }
  retry: { maxAttempts: 3, initialBackoff: 1s, maxBackoff: 1s, jitter: 0, retryableStatusCodes: [RESOURCE_EXHAUSTED] }
`, []grpcmw.Option{grpcmw.WithObserver(obs)})
				defer stop()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				time.AfterFunc(500*time.Millisecond, cancel) // in the first backoff
				var err error
				if kind == "unary" {
					_, err = client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
				} else {
					var st testgrpc.TestService_StreamingOutputCallClient
					if st, err = client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{}); err == nil {
						_, err = st.Recv()
					}
				}
				if status.Code(err) != codes.Canceled {
					t.Fatalf("the call: %v, want CANCELLED", err)
				}
				synctest.Wait()
				var done, calls []resilience.Event
				for _, rec := range obs.Recorded() {
					switch rec.Event.Type {
					case resilience.EventRetryDone:
						done = append(done, rec.Event)
					case resilience.EventCall:
						if rec.Source.Kind != resilience.KindCall {
							continue
						}
						calls = append(calls, rec.Event)
					}
				}
				if len(done) != 1 || len(calls) != 1 {
					t.Fatalf("%d retry-done and %d call events, want one each", len(done), len(calls))
				}
				d, c := done[0], calls[0]
				if d.Reason != retry.ReasonContextDone {
					t.Errorf("retry done: reason %v, want context_done", d.Reason)
				}
				if !errors.Is(d.Err, context.Canceled) && status.Code(d.Err) != codes.Canceled {
					t.Errorf("retry done: error %v, want the caller's cancel, as the call ended", d.Err)
				}
				if d.Outcome != c.Outcome || d.Outcome == resilience.Success {
					t.Errorf("retry done: outcome %v; the call's %v (%v): want the same, not a success", d.Outcome, c.Outcome, c.Err)
				}
			})
		})
	}
}
