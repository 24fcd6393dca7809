package grpcmw_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/timeout"
)

// A hedged stream's copy that its own perAttempt timeout cuts before its
// first response got no answer: as a unary call's copy (hedging.md, rule
// 4), it is non-fatal whatever nonFatalStatusCodes says, and the next copy
// goes at once. Before, it was DEADLINE_EXCEEDED, a fatal code by default,
// and it ended the stream while the next copy could still answer. A stream
// whose every copy its perAttempt timeout cut ends with gRPC's
// DEADLINE_EXCEEDED, as any stream its deadline cut, not with a
// *timeout.Error (grpc-streams.md).
func TestAHedgedStreamCopyCutByItsPerAttemptTimeoutSendsTheNextCopyAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answerer int // the copy that answers (0: none)
	}{{"the second copy answers", 2}, {"no copy answers", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := new(faultServer)
				f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
					md, _ := metadata.FromIncomingContext(s.Context())
					if v := md.Get(grpcmw.PreviousAttemptsHeader); tc.answerer == 2 && len(v) == 1 && v[0] == "1" {
						return s.Send(&testgrpc.StreamingOutputCallResponse{})
					}
					<-s.Context().Done()
					return s.Context().Err()
				})
				client, _, stop := inBubbleDial(t, f, `
defaults:
  retry: { enabled: false }
  hedging: { maxAttempts: 2, hedgingDelay: 100ms }
services:
  grpc.testing.TestService:
    methods:
      StreamingOutputCall: { timeout: { perAttempt: 50ms } }
`)
				defer stop()
				start := time.Now()
				s, err := client.StreamingOutputCall(context.Background(), sendParams(1))
				if err != nil {
					t.Fatal(err)
				}
				n, err := recvAll(s)
				took := time.Since(start)
				if tc.answerer == 2 {
					if n != 1 || err != nil || took != 50*time.Millisecond {
						t.Errorf("stream = %d messages, %v after %v; want the second copy's, sent at once when the first was cut at 50ms", n, err, took)
					}
				} else if status.Code(err) != codes.DeadlineExceeded || errors.As(err, new(*timeout.Error)) || took != 100*time.Millisecond {
					t.Errorf("stream = %v (%T) after %v; want gRPC's DEADLINE_EXCEEDED at 100ms, each copy cut at 50ms", err, err, took)
				}
				if f.calls.Load() != 2 {
					t.Errorf("%d copies at the server, want 2", f.calls.Load())
				}
			})
		})
	}
}
