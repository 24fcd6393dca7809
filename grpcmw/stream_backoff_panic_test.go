package grpcmw_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
)

// A stream whose opening failed and whose retry panics before the next
// opening (an observer told of the retry panics) ends its retry policy's
// call with the one attempt made: meshless.retry.attempts counted two, the
// panic taken for a second attempt's.
func TestAStreamWhoseRetryPanicsCountsTheAttemptsMade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu       sync.Mutex
			attempts []int
			done     []int
		)
		obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
			return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
				if src.Kind != resilience.KindRetry {
					return
				}
				mu.Lock()
				switch ev.Type {
				case resilience.EventAttempt:
					attempts = append(attempts, ev.Attempt)
				case resilience.EventRetryDone:
					done = append(done, ev.Attempt)
				}
				mu.Unlock()
				if ev.Type == resilience.EventRetry {
					panic("retry")
				}
			})
		})
		refuse := func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, grpc.Streamer, ...grpc.CallOption) (grpc.ClientStream, error) {
			return nil, status.Error(codes.Unavailable, "no stream")
		}
		client, _, stop := inBubbleOf(t, new(faultServer), `
defaults:
  retry: { maxAttempts: 3, initialBackoff: 10ms }
`, []grpcmw.Option{grpcmw.WithObserver(obs)}, []grpc.DialOption{grpc.WithChainStreamInterceptor(refuse)})
		defer stop()
		r := func() (r any) {
			defer func() { r = recover() }()
			_, _ = client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
			return nil
		}()
		if r != "retry" {
			t.Fatalf("recovered %v, want the observer's panic", r)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(attempts) != 1 || len(done) != 1 || done[0] != 1 {
			t.Errorf("attempt events %v, retry done at attempt %v; want one attempt, and the call done after it", attempts, done)
		}
	})
}
