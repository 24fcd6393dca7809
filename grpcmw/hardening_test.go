package grpcmw_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// holdFirst makes the server answer the first call after hold, and the
// others after d. arrived is closed when the first call arrives.
func holdFirst(f *faultServer, hold, d time.Duration) (arrived chan struct{}) {
	arrived = make(chan struct{})
	var once sync.Once
	f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(arrived)
			time.Sleep(hold)
			return &testgrpc.SimpleResponse{}, nil
		}
		time.Sleep(d)
		return &testgrpc.SimpleResponse{}, nil
	})
	return arrived
}

// Issue 9 item 2: a first attempt that queues in the bulkhead is cut by the
// overall deadline, whatever perAttempt says. Before the one pipeline, with
// perAttempt shorter than overall, the overall deadline was derived only
// when a retry followed, so this call waited the bulkhead's full
// maxWaitDuration (10s).
func TestIssue9OverallTimeoutBoundsTheBulkheadQueue(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	client, _, _ := dial(t, addr, `
defaults:
  circuitBreaker: { enabled: false }
  bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 10s }
  timeout: { perAttempt: 100ms, overall: 300ms }
`)
	// A stream (which takes no default timeouts) holds the service's one
	// permit.
	arrived, release := make(chan struct{}), make(chan struct{})
	f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
		close(arrived)
		<-release
		return nil
	})
	defer close(release)
	held, err := client.StreamingOutputCall(t.Context(), sendParams(1))
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.KeepAlive(held) // a dropped stream gives its permit back when collected
	<-arrived
	start := time.Now()
	_, err = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("the queued call took %v, want it cut at the overall 300ms (+ margin)", took)
	}
	if status.Code(err) != codes.ResourceExhausted || f.calls.Load() != 1 {
		t.Fatalf("the queued call = %v, server calls %d; want the bulkhead's rejection, cut by the overall deadline", err, f.calls.Load())
	}
}

// Issue 9 item 6: time spent waiting for a bulkhead permit is not backend
// time. A 30ms backend behind a full 1-wide bulkhead never opens a 100ms
// slow-call breaker: before the pipeline measured the attempt past its
// gates, the breaker's clock started before the bulkhead's queue.
func TestIssue9QueueingIsNotSlowness(t *testing.T) {
	// In a synctest bubble: the backend's 30ms and the 300ms hold are the
	// bubble's time, so a busy machine cannot make a call slow.
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		client, chain, stop := inBubble(t, f, `
defaults:
  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4, slowCallDurationThreshold: 100ms, slowCallRateThreshold: 50 }
  retry: { enabled: false }
  bulkhead: { maxConcurrentCalls: 1, maxWaitDuration: 10s }
`)
		defer stop()
		// The first call holds the one permit for 300ms while four more queue;
		// then they run one by one, 30ms each.
		arrived := holdFirst(f, 300*time.Millisecond, 30*time.Millisecond)
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}) })
		<-arrived
		errs := make(chan error, 4)
		for range 4 {
			wg.Go(func() {
				_, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a queued call failed: %v", err)
			}
		}
		cb, _ := chain.Breaker(testService)
		if m := cb.Metrics(); cb.State() != circuitbreaker.StateClosed || m.SlowCalls > 1 {
			t.Fatalf("breaker %v %+v: queue time counted as slowness", cb.State(), m)
		}
	})
}

// Issue 9 item 9: while a stream's RecvMsg sleeps a backoff, CloseSend
// from another goroutine answers at once (Header, Context and Trailer wait
// for the next attempt, as SendMsg does: docs/grpc-streams.md;
// TestARetryingStreamsContextDuringABackoffIsTheNextAttempts).
func TestIssue9StreamBackoffDoesNotHoldTheLock(t *testing.T) {
	f := new(faultServer)
	f.setStream(func(*testgrpc.StreamingOutputCallRequest, testgrpc.TestService_StreamingOutputCallServer) error {
		return status.Error(codes.Unavailable, "down")
	})
	addr, _ := serve(t, f)
	client, _, _ := dial(t, addr, `
defaults:
  circuitBreaker: { enabled: false }
  retry: { maxAttempts: 2, initialBackoff: 5s, maxBackoff: 5s, jitter: 0 }
`)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s, err := client.StreamingOutputCall(ctx, sendParams(1))
	if err != nil {
		t.Fatal(err)
	}
	recvd := make(chan error, 1)
	go func() { _, err := recvAll(s); recvd <- err }()
	waitUntil(t, func() bool { return f.calls.Load() == 1 })
	answered := make(chan struct{})
	go func() {
		_ = s.CloseSend()
		close(answered)
	}()
	select {
	case <-answered:
	case <-time.After(2 * time.Second):
		t.Fatal("CloseSend blocked behind RecvMsg's 5s backoff")
	}
	cancel()
	<-recvd
}

// Issue 9 item 3: a long-lived stream admitted as a half-open probe gives
// its probe's place back at its first response, so a recovered backend
// closes the breaker while the stream stays open. Before, the watch held
// its probe until it ended and the breaker stayed HALF_OPEN, rejecting.
func TestIssue9AWatchStreamDoesNotWedgeTheBreaker(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	clk := resiliencetest.NewClock(time.Unix(0, 0))
	client, chain, _ := dial(t, addr, `
defaults:
  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4, waitDurationInOpenState: 10s, permittedNumberOfCallsInHalfOpenState: 2 }
  retry: { enabled: false }
`, grpcmw.WithClock(clk))
	f.setUnary(failing(codes.Unavailable))
	for range 4 {
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	}
	cb, _ := chain.Breaker(testService)
	if cb.State() != circuitbreaker.StateOpen {
		t.Fatalf("breaker %v after 4 failures, want OPEN", cb.State())
	}
	clk.Advance(10 * time.Second) // the open wait is over: HALF_OPEN
	if cb.State() != circuitbreaker.StateHalfOpen {
		t.Fatalf("breaker %v after the open wait, want HALF_OPEN", cb.State())
	}
	// The backend has recovered. A watch takes the first probe, answers once
	// and stays open.
	f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		return &testgrpc.SimpleResponse{}, nil
	})
	endWatch := make(chan struct{})
	f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
		if err := s.Send(&testgrpc.StreamingOutputCallResponse{}); err != nil {
			return err
		}
		<-endWatch
		return nil
	})
	defer close(endWatch)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	watch, err := client.StreamingOutputCall(ctx, sendParams(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := watch.Recv(); err != nil {
		t.Fatal(err)
	}
	// One unary probe is enough to close it now.
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
		t.Fatalf("the second probe = %v, want it admitted and answered", err)
	}
	if cb.State() != circuitbreaker.StateClosed {
		t.Fatalf("breaker %v with the watch still open, want CLOSED", cb.State())
	}
}

// Issue 9 item 5: a stream whose context is already done when its watcher is
// set runs the watcher at once, in another goroutine; the watcher's stop
// function was written outside the lock while that goroutine read it (a data
// race under -race). The inner interceptor cancels the context just after
// the stream is created.
func TestIssue9StreamWatcherOnADoneContext(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	cfg, err := grpcmw.ParseConfig([]byte("defaults: { retry: { enabled: false } }"))
	if err != nil {
		t.Fatal(err)
	}
	chain, err := grpcmw.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	type cancelKey struct{}
	inner := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		ctx.Value(cancelKey{}).(context.CancelFunc)()
		return s, err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainStreamInterceptor(chain.StreamClientInterceptor(), inner))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := testgrpc.NewTestServiceClient(conn)
	for range 50 {
		ctx, cancel := context.WithCancel(t.Context())
		s, err := client.StreamingOutputCall(context.WithValue(ctx, cancelKey{}, cancel), sendParams(1))
		if err == nil {
			_, _ = recvAll(s)
		}
		cancel()
	}
	bh, _ := chain.Bulkhead(testService)
	waitUntil(t, func() bool { return bh.Active() == 0 })
}
