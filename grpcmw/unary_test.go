package grpcmw_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/bulkhead"
	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/retry"
	"github.com/meshless/meshless/timeout"
)

// A small breaker and no retries, for tests about the breaker.
const breakerOnly = `
defaults:
  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4, waitDurationInOpenState: 30s }
  retry: { enabled: false }
`

func TestBusinessCodesNeverOpenTheBreakerAndReachTheCallerUnchanged(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, breakerOnly)
	for _, code := range []codes.Code{codes.NotFound, codes.InvalidArgument, codes.AlreadyExists, codes.PermissionDenied} {
		want := status.New(code, "no such card")
		want, _ = want.WithDetails(&errdetails.ErrorInfo{Reason: "CARD_UNKNOWN", Domain: "payments.example"})
		f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
			return nil, want.Err()
		})
		for range 10 {
			_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
			got := status.Convert(err)
			if got.Code() != code || got.Message() != "no such card" || len(got.Details()) != 1 {
				t.Fatalf("caller got %v %q %v, want the server's %v unchanged", got.Code(), got.Message(), got.Details(), code)
			}
		}
	}
	cb, _ := chain.Breaker(testService)
	if cb.State() != circuitbreaker.StateClosed || cb.Metrics().FailedCalls != 0 || f.calls.Load() != 40 {
		t.Fatalf("breaker %v %+v after %d calls: business answers counted as failures", cb.State(), cb.Metrics(), f.calls.Load())
	}
}

func TestUnavailableOpensTheBreakerAndLaterCallsNeverReachTheServer(t *testing.T) {
	f := new(faultServer)
	f.setUnary(failing(codes.Unavailable))
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, breakerOnly)
	for range 4 {
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); status.Code(err) != codes.Unavailable || grpcmw.RejectionReason(err) != "" {
			t.Fatalf("call = %v, want the server's UNAVAILABLE", err)
		}
	}
	for range 20 {
		_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.Unavailable || !errors.Is(err, circuitbreaker.ErrOpen) || grpcmw.RejectionReason(err) != grpcmw.ReasonCircuitOpen {
			t.Fatalf("call while open = %v, want UNAVAILABLE + CIRCUIT_OPEN matching ErrOpen", err)
		}
	}
	if n := f.calls.Load(); n != 4 {
		t.Fatalf("the server saw %d calls, want 4: calls went through an open breaker", n)
	}
	cb, _ := chain.Breaker(testService)
	if cb.State() != circuitbreaker.StateOpen {
		t.Fatalf("breaker %v", cb.State())
	}
	// The rejection's ErrorInfo names the breaker and its state.
	_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	info := status.Convert(err).Details()[0].(*errdetails.ErrorInfo)
	if info.GetDomain() != grpcmw.ErrorDomain || info.GetMetadata()["name"] != testService || info.GetMetadata()["state"] != "OPEN" {
		t.Fatalf("ErrorInfo = %v", info)
	}
}

func TestAnOpenBreakerIsNotRetried(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	obs := new(resiliencetest.Observer)
	client, _, _ := dial(t, addr, `
defaults:
  circuitBreaker: { mode: FORCED_OPEN }
  retry: { maxAttempts: 5, initialBackoff: 10s, maxBackoff: 10s, retryableStatusCodes: [UNAVAILABLE] }
`, grpcmw.WithObserver(obs))
	_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	if !errors.Is(err, circuitbreaker.ErrOpen) || f.calls.Load() != 0 {
		t.Fatalf("err %v, server calls %d; want the rejection and no call", err, f.calls.Load())
	}
	if r := obs.Events(resilience.EventRetry); len(r) != 0 {
		t.Fatalf("%d retries scheduled after a rejection (each would wait 10s)", len(r))
	}
	d := obs.Events(resilience.EventRetryDone)
	if len(d) != 1 || d[0].Reason != retry.ReasonRejected || d[0].Attempt != 1 {
		t.Fatalf("retry done %+v, want one attempt, rejected", d)
	}
}

const retryOnly = `
defaults:
  circuitBreaker: { enabled: false }
  retry: { maxAttempts: 4, initialBackoff: 1ms, maxBackoff: 1ms, jitter: 0 }
`

func TestUnavailableIsRetriedUpToMaxAttempts(t *testing.T) {
	f := new(faultServer)
	f.setUnary(failing(codes.Unavailable))
	addr, _ := serve(t, f)
	client, _, _ := dial(t, addr, retryOnly)
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if n := f.calls.Load(); n != 4 {
		t.Fatalf("server saw %d attempts, want 4", n)
	}
	// Codes outside retryableStatusCodes are not retried.
	f.calls.Store(0)
	f.setUnary(failing(codes.Internal))
	_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("INTERNAL was tried %d times, want 1", n)
	}
}

func TestPerMethodRetryOverride(t *testing.T) {
	f := new(faultServer)
	f.setUnary(failing(codes.Unavailable))
	addr, _ := serve(t, f)
	client, _, _ := dial(t, addr, retryOnly+`
services:
  grpc.testing.TestService:
    methods:
      UnaryCall: { retry: { maxAttempts: 1 } }
`)
	_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("UnaryCall with maxAttempts 1 made %d attempts", n)
	}
}

func TestServerPushback(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	obs := new(resiliencetest.Observer)
	client, _, _ := dial(t, addr, retryOnly, grpcmw.WithObserver(obs))
	for _, tt := range []struct {
		trailer string
		calls   int32
		backoff time.Duration
	}{
		{trailer: "20", calls: 4, backoff: 20 * time.Millisecond},
		{trailer: "-1", calls: 1},
		{trailer: "soon", calls: 1}, // not a number: do not retry (gRFC A6)
	} {
		f.calls.Store(0)
		obs.Reset()
		f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
			_ = setTrailer(ctx, grpcmw.PushbackTrailer, tt.trailer)
			return nil, status.Error(codes.Unavailable, "busy")
		})
		_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "busy" {
			t.Fatalf("err = %v, want the server's error unchanged", err)
		}
		if n := f.calls.Load(); n != tt.calls {
			t.Fatalf("pushback %q: %d attempts, want %d", tt.trailer, n, tt.calls)
		}
		for _, e := range obs.Events(resilience.EventRetry) {
			if e.Backoff != tt.backoff {
				t.Fatalf("pushback %q: backoff %v, want %v", tt.trailer, e.Backoff, tt.backoff)
			}
		}
	}
}

func TestTwoServicesOnOneConnectionHaveIndependentBreakers(t *testing.T) {
	f := new(faultServer)
	f.setUnary(failing(codes.Unavailable))
	addr, _ := serve(t, f)
	client, chain, conn := dial(t, addr, breakerOnly)
	health := healthpb.NewHealthClient(conn)
	for range 10 {
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
		if _, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("health check through the same connection: %v", err)
		}
	}
	tb, _ := chain.Breaker(testService)
	hb, _ := chain.Breaker("grpc.health.v1.Health")
	if tb.State() != circuitbreaker.StateOpen || hb.State() != circuitbreaker.StateClosed {
		t.Fatalf("TestService %v, Health %v; want OPEN and CLOSED", tb.State(), hb.State())
	}
}

func TestBulkheadRejectsTheCallPastItsLimitAndTheBreakerIgnoresIt(t *testing.T) {
	f := new(faultServer)
	release := make(chan struct{})
	arrived := make(chan struct{}, 8)
	f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		arrived <- struct{}{}
		<-release
		return &testgrpc.SimpleResponse{}, nil
	})
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, breakerOnly+`
  bulkhead: { maxConcurrentCalls: 2 }
`)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil {
				t.Error(err)
			}
		}()
	}
	<-arrived
	<-arrived
	for range 5 {
		_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.ResourceExhausted || !errors.Is(err, bulkhead.ErrFull) || grpcmw.RejectionReason(err) != grpcmw.ReasonBulkheadFull {
			t.Fatalf("third concurrent call = %v, want RESOURCE_EXHAUSTED + BULKHEAD_FULL", err)
		}
	}
	close(release)
	wg.Wait()
	cb, _ := chain.Breaker(testService)
	if m := cb.Metrics(); m.Calls != 2 || m.FailedCalls != 0 || f.calls.Load() != 2 {
		t.Fatalf("breaker %+v, server calls %d: want the 2 admitted calls only", m, f.calls.Load())
	}
}

func TestPerAttemptTimeoutCutsAHangingServerAndCountsAsFailure(t *testing.T) {
	f := new(faultServer)
	f.setUnary(hanging)
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, breakerOnly+`
  timeout: { perAttempt: 50ms }
`)
	for range 4 {
		_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, timeout.ErrTimeout) {
			t.Fatalf("call to a hung server = %v, want DEADLINE_EXCEEDED from the attempt timeout", err)
		}
	}
	cb, _ := chain.Breaker(testService)
	if cb.State() != circuitbreaker.StateOpen || cb.Metrics().FailedCalls != 4 {
		t.Fatalf("breaker %v %+v, want OPEN after 4 timed-out attempts", cb.State(), cb.Metrics())
	}
}

// In a synctest bubble, over memnet: the attempts' times are the bubble's,
// exact, where on loopback TCP under load the connection's setup ate into
// the overall timeout and a busy machine could leave room for one attempt.
func TestOverallTimeoutBoundsRetriesAndBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := new(faultServer)
		f.setUnary(hanging)
		client, _, stop := inBubble(t, f, `
defaults:
  circuitBreaker: { enabled: false }
  retry: { maxAttempts: 10, initialBackoff: 50ms, maxBackoff: 50ms, jitter: 0, retryableStatusCodes: [DEADLINE_EXCEEDED] }
  timeout: { perAttempt: 100ms, overall: 400ms }
`)
		defer stop()
		start := time.Now()
		_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
		elapsed := time.Since(start)
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("err = %v", err)
		}
		// Attempts start at 0, 150ms and 300ms; the fourth would start at
		// 450ms, past the overall deadline, so it is not even waited for.
		if n := f.calls.Load(); n != 3 {
			t.Fatalf("%d attempts within a 400ms overall timeout, want 3 of the 10 allowed", n)
		}
		if elapsed > 400*time.Millisecond {
			t.Fatalf("the call took %v despite a 400ms overall timeout", elapsed)
		}
	})
}

func TestSlowSuccessesOpenTheBreaker(t *testing.T) {
	f := new(faultServer)
	f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		time.Sleep(60 * time.Millisecond) // the server is slow: this is its behaviour, not a wait for a state
		return &testgrpc.SimpleResponse{}, nil
	})
	addr, _ := serve(t, f)
	obs := new(resiliencetest.Observer)
	client, _, _ := dial(t, addr, `
defaults:
  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4, slowCallDurationThreshold: 20ms, slowCallRateThreshold: 50 }
  retry: { enabled: false }
`, grpcmw.WithObserver(obs))
	for range 4 {
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	tr := obs.Events(resilience.EventTransition)
	if len(tr) != 1 || tr[0].To != circuitbreaker.StateOpen || tr[0].Reason != circuitbreaker.ReasonSlowCallRate {
		t.Fatalf("transitions %+v, want CLOSED->OPEN on the slow-call rate", tr)
	}
}

func TestHalfOpenProbesCloseTheBreaker(t *testing.T) {
	f := new(faultServer)
	f.setUnary(failing(codes.Unavailable))
	addr, _ := serve(t, f)
	clk := resiliencetest.NewClock(time.Now())
	client, chain, _ := dial(t, addr, breakerOnly, grpcmw.WithClock(clk))
	for range 4 {
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	}
	cb, _ := chain.Breaker(testService)
	f.unary.Store(nil) // healthy again
	clk.Advance(30 * time.Second)
	if cb.State() != circuitbreaker.StateHalfOpen {
		t.Fatalf("after the wait: %v", cb.State())
	}
	for range 2 {
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatalf("probe: %v", err)
		}
	}
	if cb.State() != circuitbreaker.StateClosed {
		t.Fatalf("after two good probes: %v", cb.State())
	}
}

func TestCallerCancellationIsIgnored(t *testing.T) {
	f := new(faultServer)
	arrived := make(chan struct{}, 1)
	f.setUnary(func(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		arrived <- struct{}{}
		return hanging(ctx, req)
	})
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, breakerOnly)
	for range 6 {
		ctx, cancel := context.WithCancel(t.Context())
		go func() { <-arrived; cancel() }()
		_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		if status.Code(err) != codes.Canceled {
			t.Fatalf("err = %v, want CANCELLED", err)
		}
	}
	cb, _ := chain.Breaker(testService)
	if m := cb.Metrics(); m.Calls != 0 || cb.State() != circuitbreaker.StateClosed {
		t.Fatalf("cancelled calls entered the window: %+v", m)
	}
}

func TestCallEventsNameTheErrorType(t *testing.T) {
	f := new(faultServer)
	addr, _ := serve(t, f)
	obs := new(resiliencetest.Observer)
	client, chain, _ := dial(t, addr, breakerOnly, grpcmw.WithObserver(obs))
	f.setUnary(failing(codes.NotFound))
	_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	f.unary.Store(nil)
	_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	cb, _ := chain.Breaker(testService)
	cb.ForceOpen()
	_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	var got []string
	for _, r := range obs.Recorded() {
		if r.Source.Kind == resilience.KindCall {
			got = append(got, r.Event.ErrorType)
		}
	}
	if want := []string{"NOT_FOUND", "", "circuit_open"}; !slices.Equal(got, want) {
		t.Fatalf("error types %q, want %q", got, want)
	}
}
