package grpcmw_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/deadletter"
	"github.com/meshless/meshless/grpcmw"
)

// With deadLetter on RETRIES_EXHAUSTED, a call whose caller cancels while
// a retry waits out its backoff ends CANCELLED: its retries were not
// exhausted, so it is not deferred — unless failureStatusCodes lists
// CANCELLED, which makes the cancel a failure like the attempts before it
// (docs/deadletter.md, "What is deferred"): then it is kept, and its caller
// told DEFERRED.
func TestACallCancelledDuringABackoffIsDeferredOnlyWhenCancelledIsAFailure(t *testing.T) {
	for _, tc := range []struct {
		name, failure string
		deferred      bool
	}{
		{"default failure codes", "", false},
		{"CANCELLED listed", ", failureStatusCodes: [UNAVAILABLE, CANCELLED], ignoredStatusCodes: []", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var seen atomic.Int32
				f := new(faultServer)
				f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					seen.Add(1)
					return nil, status.Error(codes.Unavailable, "down")
				})
				client, _, stop := inBubble(t, f, `
retryThrottling: { enabled: false }
defaults:
  circuitBreaker: { slidingWindowSize: 100, minimumNumberOfCalls: 100`+tc.failure+` }
  adaptiveThrottling: { enabled: false }
  retry: { maxAttempts: 3, initialBackoff: 1s, maxBackoff: 1s, jitter: 0 }
  deadLetter: { on: [RETRIES_EXHAUSTED], path: `+filepath.Join(t.TempDir(), "dl.db")+` }
`)
				defer stop()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				time.AfterFunc(1500*time.Millisecond, cancel) // in the second backoff
				_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
				if n := seen.Load(); n != 2 {
					t.Fatalf("%d attempts, want 2: the cancel came in the second backoff", n)
				}
				deferred := errors.Is(err, deadletter.ErrDeferred)
				if deferred != tc.deferred {
					t.Fatalf("the call: %v (deferred %v), want deferred %v", err, deferred, tc.deferred)
				}
				if !tc.deferred && (status.Code(err) != codes.Canceled || grpcmw.RejectionReason(err) != "") {
					t.Errorf("the call: %v, want the caller's CANCELLED", err)
				}
				if tc.deferred && grpcmw.RejectionReason(err) != "DEFERRED" {
					t.Errorf("the call: %v, want reason DEFERRED", err)
				}
			})
		})
	}
}
