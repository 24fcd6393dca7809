package grpcmw_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

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

// A stream whose RecvMsg read a retryable failure and whose retry then
// panicked (an observer told of the retry) left the stream's lock held on
// the panic's way up: the context's watcher, and any other method of the
// stream, blocked for ever, and the call was never recorded. It now ends
// as a call that panics: the lock is released, the call recorded once, its
// retry policy's call done after the one attempt made.
func TestAStreamWhoseRetryPanicsInRecvMsgReleasesItsLock(t *testing.T) {
	var (
		mu              sync.Mutex
		attempts, calls int
		done            []int
	)
	obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
			mu.Lock()
			switch {
			case src.Kind == resilience.KindCall:
				calls++
			case src.Kind == resilience.KindRetry && ev.Type == resilience.EventAttempt:
				attempts++
			case src.Kind == resilience.KindRetry && ev.Type == resilience.EventRetryDone:
				done = append(done, ev.Attempt)
			}
			mu.Unlock()
			if src.Kind == resilience.KindRetry && ev.Type == resilience.EventRetry {
				panic("retry")
			}
		})
	})
	f := new(faultServer)
	f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
		return status.Error(codes.Unavailable, "down")
	})
	addr, _ := serve(t, f)
	client, _, _ := dial(t, addr, `
defaults:
  retry: { maxAttempts: 3, initialBackoff: 10ms }
`, grpcmw.WithObserver(obs))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r := func() (r any) {
		defer func() { r = recover() }()
		_ = st.RecvMsg(new(testgrpc.StreamingOutputCallResponse))
		return nil
	}()
	if r != "retry" {
		t.Fatalf("recovered %v, want the observer's panic", r)
	}
	unlocked := make(chan struct{})
	go func() { // blocked on the stream's lock while it was held (the test then leaks it)
		_ = st.CloseSend()
		close(unlocked)
	}()
	select {
	case <-unlocked:
	case <-time.After(10 * time.Second): // real time: before, it never came
		t.Fatal("CloseSend blocked: the stream's lock is still held")
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 || attempts != 1 || len(done) != 1 || done[0] != 1 {
		t.Errorf("%d call events, %d attempt events, retry done at %v; want 1, 1, [1]", calls, attempts, done)
	}
}
