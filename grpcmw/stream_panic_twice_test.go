package grpcmw_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
)

// A stream that ends as a call that panics, and whose end panics in turn
// (an observer that panics at every event: the retry policy's end of the
// call, the bulkhead's release, the call's event), still releases its lock:
// the first panic's guard ended the stream, then unlocked, so the second
// panic went up with the lock held, and the stream's other methods and its
// context's watcher blocked for ever. Each guard now unlocks deferred.
// Here RecvMsg reads UNAVAILABLE, and the observer panics as the retry is
// decided (nextLocked), and again as the stream ends.
func TestAStreamWhoseEndPanicsTwiceReleasesItsLock(t *testing.T) {
	var armed atomic.Bool
	obs := resilience.ObserverFunc(func(src resilience.Source) resilience.Recorder {
		return resilience.RecorderFunc(func(_ context.Context, ev resilience.Event) {
			if armed.Load() && (src.Kind == resilience.KindRetry || src.Kind == resilience.KindCall) && ev.Type != resilience.EventAttempt {
				panic("observer")
			}
		})
	})
	f := new(faultServer)
	f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
		return status.Error(codes.Unavailable, "down")
	})
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, `
defaults:
  retry: { maxAttempts: 3, initialBackoff: 10ms }
  bulkhead: { maxConcurrentCalls: 4 }
`, grpcmw.WithObserver(obs))
	t.Cleanup(chain.Close)
	st, err := client.StreamingOutputCall(context.Background(), &testgrpc.StreamingOutputCallRequest{})
	if err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	r := func() (r any) {
		defer func() { r = recover() }()
		_ = st.RecvMsg(new(testgrpc.StreamingOutputCallResponse))
		return nil
	}()
	armed.Store(false)
	if r != "observer" {
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
	if b, _ := chain.Bulkhead(testService); b.Active() != 0 {
		t.Errorf("%d bulkhead permits out after the panic, want 0", b.Active())
	}
}
