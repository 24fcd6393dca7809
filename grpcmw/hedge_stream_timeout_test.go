package grpcmw_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// A stream that its method's own perAttempt timeout cuts is counted as
// timed out (meshless.timeout.calls, outcome timed_out), hedged or not.
// Before, a hedged stream's committed copy was counted as completed: the
// stream cancelled the copy's context before it ended the copy's attempt,
// and an attempt whose context had been cancelled is not the timeout's.
func TestAHedgedStreamCutByItsPerAttemptTimeoutIsCountedAsTimedOut(t *testing.T) {
	for _, tc := range []struct{ name, policy string }{
		{"retrying", "  retry: { initialBackoff: 1ms, maxBackoff: 1ms }\n"},
		{"hedged", "  retry: { enabled: false }\n  hedging: { hedgingDelay: 10ms }\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := new(faultServer)
				f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
					for {
						if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
							return err
						}
						select {
						case <-time.After(time.Second):
						case <-s.Context().Done():
							return status.FromContextError(s.Context().Err()).Err()
						}
					}
				})
				client, _, metrics, stop := observed(t, f, "defaults:\n"+tc.policy+
					"services:\n  grpc.testing.TestService:\n    methods:\n      StreamingOutputCall: { timeout: { perAttempt: 2500ms } }\n")
				defer stop()
				start := time.Now()
				s, err := client.StreamingOutputCall(context.Background(), sendParams(1))
				if err != nil {
					t.Fatal(err)
				}
				// The server sends at 0, 1 and 2 s; the timeout cuts the stream
				// at 2.5 s, not at an instant the server also sends at.
				n, err := recvAll(s)
				if status.Code(err) != codes.DeadlineExceeded || n != 3 || time.Since(start) != 2500*time.Millisecond || f.calls.Load() != 1 {
					t.Errorf("stream = %d messages and %v after %v and %d attempts, want 3 and DEADLINE_EXCEEDED at 2.5s, one attempt",
						n, err, time.Since(start), f.calls.Load())
				}
				m := metrics()
				if m["meshless.timeout.calls attempt timed_out"] != 1 || m["meshless.timeout.calls attempt completed"] != 0 {
					t.Errorf("per-attempt timeouts: %d timed_out, %d completed; want the stream it cut counted as timed_out",
						m["meshless.timeout.calls attempt timed_out"], m["meshless.timeout.calls attempt completed"])
				}
			})
		})
	}
}
