package grpcmw_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
)

// A call without a deadline (no overall timeout, none on the caller's
// context) whose server sends a grpc-retry-pushback-ms longer than 300s
// (docs/retry.md, Pushback) gets the server's UNAVAILABLE at once: it
// waited the pushback, up to almost 25 days for 2147483647, holding the
// caller's goroutine. A pushback of 300000 is still waited, and the retry
// then made.
func TestAPushbackLongerThanTheBoundIsNotWaited(t *testing.T) {
	for _, tc := range []struct {
		pushback time.Duration
		want     codes.Code
		took     time.Duration
	}{
		{(1<<31 - 1) * time.Millisecond, codes.Unavailable, 0},
		{300*time.Second + time.Millisecond, codes.Unavailable, 0},
		{300 * time.Second, codes.OK, 300 * time.Second},
	} {
		t.Run(tc.pushback.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var n atomic.Int64
				f := new(faultServer)
				f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
					if n.Add(1) == 1 {
						_ = setTrailer(ctx, grpcmw.PushbackTrailer, strconv.FormatInt(tc.pushback.Milliseconds(), 10))
						return nil, status.Error(codes.Unavailable, "busy")
					}
					return &testgrpc.SimpleResponse{}, nil
				})
				client, _, stop := inBubble(t, f, `
retryThrottling: { enabled: false }
defaults:
  circuitBreaker: { enabled: false }
  timeout: { perAttempt: 1s, overall: 0s }
  retry: { maxAttempts: 2, initialBackoff: 100ms, jitter: 0 }
`)
				defer stop()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				type result struct {
					err  error
					took time.Duration
				}
				done := make(chan result, 1)
				start := time.Now()
				go func() {
					_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
					done <- result{err, time.Since(start)}
				}()
				time.Sleep(tc.took) // fake time: the bubble's clock moves once every goroutine waits
				synctest.Wait()
				var r result
				select {
				case r = <-done:
				default:
					cancel() // the retry waits the pushback: end it, and fail
					<-done
					t.Fatalf("pushback %v without a deadline: no answer after %v", tc.pushback, tc.took)
				}
				if status.Code(r.err) != tc.want || r.took != tc.took {
					t.Fatalf("pushback %v: %v after %v and %d attempts; want %v after %v",
						tc.pushback, r.err, r.took, n.Load(), tc.want, tc.took)
				}
			})
		})
	}
}

// A hedged call without a deadline whose first copy fails with a
// non-fatal UNAVAILABLE and a pushback longer than 300s sends no other
// copy and gets that status at once; it waited the pushback (almost 25
// days) before the next copy.
func TestAHedgePushbackLongerThanTheBoundIsNotWaited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
			_ = setTrailer(ctx, grpcmw.PushbackTrailer, "2147483647")
			return nil, status.Error(codes.Unavailable, "busy")
		})
		client, _, stop := inBubble(t, f, `
retryThrottling: { enabled: false }
defaults:
  circuitBreaker: { enabled: false }
  timeout: { perAttempt: 1s, overall: 0s }
  retry: { enabled: false }
  hedging: { maxAttempts: 3, hedgingDelay: 50ms, nonFatalStatusCodes: [UNAVAILABLE] }
`)
		defer stop()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			if status.Code(err) != codes.Unavailable || f.calls.Load() != 1 {
				t.Fatalf("%v after %d copies; want the server's UNAVAILABLE after 1", err, f.calls.Load())
			}
		default:
			cancel() // the hedge waits the pushback: end it, and fail
			<-done
			t.Fatalf("pushback 2147483647 without a deadline: no answer at once (%d copies)", f.calls.Load())
		}
	})
}
