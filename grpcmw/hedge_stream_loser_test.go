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

// lateStream is a copy's stream whose RecvMsg, once it failed, returns
// after wait (its goroutine ran late), with as instead of the error when
// set.
type lateStream struct {
	grpc.ClientStream
	wait time.Duration
	as   error
}

func (s *lateStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		time.Sleep(s.wait)
		if s.as != nil {
			err = s.as
		}
	}
	return err
}

// lateCopy returns a stream interceptor that makes the copy whose
// grpc-previous-rpc-attempts is prev ("" for the first) a lateStream.
func lateCopy(prev string, wait time.Duration, as error) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		md, _ := metadata.FromOutgoingContext(ctx)
		var p string
		if v := md.Get(grpcmw.PreviousAttemptsHeader); len(v) > 0 {
			p = v[0]
		}
		if err != nil || p != prev {
			return cs, err
		}
		return &lateStream{ClientStream: cs, wait: wait, as: as}, nil
	}
}

// The stream's side of TestAHedgeLoserCancelledJustBeforeTheDeadlineIsNoTimeout:
// a copy that the winner's first response cancelled just before the
// overall deadline is CANCELLED, ignored by the breaker, also when it
// returns after the deadline.
func TestAHedgedStreamsLoserCancelledJustBeforeTheDeadlineIsNoTimeout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		loser string
		wait  time.Duration
	}{{"the first copy loses", "", 199 * time.Millisecond}, {"the hedge loses", "1", 299 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := new(faultServer)
				f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
					md, _ := metadata.FromIncomingContext(s.Context())
					if v := md.Get(grpcmw.PreviousAttemptsHeader); len(v) > 0 && v[0] == tc.loser || len(v) == 0 && tc.loser == "" {
						<-s.Context().Done()
						return s.Context().Err()
					}
					time.Sleep(tc.wait) // the winner's first response, 1ms before the deadline
					return s.Send(&testgrpc.StreamingOutputCallResponse{})
				})
				client, chain, stop := inBubbleDial(t, f, `
defaults:
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }
  hedging: { maxAttempts: 2, hedgingDelay: 100ms }
services:
  grpc.testing.TestService:
    methods:
      StreamingOutputCall: { timeout: { perAttempt: 0s, overall: 300ms } }
`, grpc.WithChainStreamInterceptor(lateCopy(tc.loser, 2*time.Millisecond, nil)))
				defer stop()
				s, err := client.StreamingOutputCall(context.Background(), sendParams(1))
				if err != nil {
					t.Fatal(err)
				}
				if n, err := recvAll(s); n != 1 || err != nil {
					t.Fatalf("the stream = %d messages, %v; want the winner's one", n, err)
				}
				synctest.Wait()
				cb, _ := chain.Breaker(testService)
				if m := cb.Metrics(); m.FailedCalls != 0 || m.Calls != 1 {
					t.Errorf("breaker %+v, want 1 call, a success: the loser the winner cancelled is ignored", m)
				}
			})
		})
	}
}

// The stream's side of TestHedgedCopiesThatHangUntilTheOverallDeadlineEachCountOneFailure:
// a hedged stream whose two copies both hang, with no response, until the
// overall deadline counts two breaker failures, one per copy sent,
// whichever copy's end the hedge sees first. The copy seen last ends as
// gRPC ends it when the hedge's cancel reaches it before its own deadline
// timer: CANCELLED, just after the deadline.
func TestHedgedStreamCopiesThatHangUntilTheOverallDeadlineEachCountOneFailure(t *testing.T) {
	for _, tc := range []struct{ name, last string }{{"the first copy seen last", ""}, {"the hedge seen last", "1"}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := new(faultServer)
				f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
					<-s.Context().Done()
					return s.Context().Err()
				})
				client, chain, stop := inBubbleDial(t, f, `
defaults:
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10 }
  hedging: { maxAttempts: 2, hedgingDelay: 100ms }
services:
  grpc.testing.TestService:
    methods:
      StreamingOutputCall: { timeout: { perAttempt: 0s, overall: 300ms } }
`, grpc.WithChainStreamInterceptor(lateCopy(tc.last, time.Millisecond, status.FromContextError(context.Canceled).Err())))
				defer stop()
				s, err := client.StreamingOutputCall(context.Background(), sendParams(1))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := recvAll(s); status.Code(err) != codes.DeadlineExceeded {
					t.Errorf("the stream = %v, want DEADLINE_EXCEEDED", err)
				}
				synctest.Wait()
				cb, _ := chain.Breaker(testService)
				if m := cb.Metrics(); m.Calls != 2 || m.FailedCalls != 2 {
					t.Errorf("breaker %+v, want 2 calls, both failed: one per copy sent", m)
				}
			})
		})
	}
}
