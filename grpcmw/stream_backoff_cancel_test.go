package grpcmw_test

import (
	"context"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

// A stream whose context ends while RecvMsg waits out a retry's backoff
// has its attempt settled once: RecvMsg settled it before the backoff. The
// context's watcher, when it took the lock before the waking RecvMsg did,
// settled it again, and ending the per-attempt deadline a second time
// panicked (a nil pointer) in the watcher's goroutine, killing the process
// (found by TestStreamSoak). The test ends the stream as the watcher does,
// while RecvMsg waits.
func TestAStreamsContextEndingDuringABackoffSettlesItsAttemptOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &replayServer{failAfter: func(int) int { return 0 }} // UNAVAILABLE at once
		client, chain, stop := inBubble(t, r, `
defaults:
  circuitBreaker: { enabled: false }
  retry: { maxAttempts: 3, initialBackoff: 50ms, maxBackoff: 50ms, jitter: 0, retryableStatusCodes: [UNAVAILABLE] }
  bulkhead: { maxConcurrentCalls: 2 }
retryThrottling: { enabled: false }
services:
  grpc.testing.TestService:
    methods:
      FullDuplexCall: { timeout: { perAttempt: 1s } }
`)
		defer stop()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, err := client.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		recvd := make(chan error, 1)
		go func() { _, err := s.Recv(); recvd <- err }()
		synctest.Wait() // the first attempt failed: Recv waits out the backoff
		inner := s.(*grpc.GenericClientStream[testgrpc.StreamingOutputCallRequest, testgrpc.StreamingOutputCallResponse]).ClientStream
		grpcmw.FinishStream(inner, context.Canceled)
		if err := <-recvd; status.Code(err) != codes.Unavailable {
			t.Fatalf("Recv = %v, want the attempt's UNAVAILABLE", err)
		}
		if attempts, _ := r.seen(); len(attempts) != 1 {
			t.Fatalf("%d attempts, want 1: the stream ended during the backoff", len(attempts))
		}
		if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
			t.Fatalf("%d bulkhead permits held", bh.Active())
		}
	})
}
