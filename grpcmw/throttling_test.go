package grpcmw_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
	"github.com/meshless/meshless/throttler"
)

// A call the adaptive throttler rejects is a meshless rejection: it never
// reached the server, is never retried, the breaker does not count it, and
// on the wire it is RESOURCE_EXHAUSTED with ErrorInfo reason THROTTLED.
func TestThrottledIsAMeshlessRejection(t *testing.T) {
	f := new(faultServer)
	f.setUnary(failing(codes.Unavailable))
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, `
defaults:
  circuitBreaker: { slidingWindowSize: 1000, minimumNumberOfCalls: 1000 }
  retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms }
  adaptiveThrottling: { minimumRequests: 0, maxRejectionRate: 99 }
retryThrottling: { enabled: false }
`)
	var throttled error
	for range 200 {
		before := f.calls.Load()
		_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
		if errors.Is(err, throttler.ErrThrottled) {
			if n := f.calls.Load(); n != before {
				t.Fatalf("a call rejected by the throttler sent %d requests to the server", n-before)
			}
			throttled = err
			break
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("call = %v, want the server's UNAVAILABLE (a throttled retry gives the last attempt's error)", err)
		}
	}
	if throttled == nil {
		t.Fatal("the throttler rejected no call in 200 to a server that always fails")
	}
	st := status.Convert(throttled)
	if st.Code() != codes.ResourceExhausted || grpcmw.RejectionReason(throttled) != grpcmw.ReasonThrottled || !resilience.IsRejection(throttled) {
		t.Fatalf("throttled call = %v, want RESOURCE_EXHAUSTED, reason THROTTLED, a rejection", throttled)
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info == nil || info.GetDomain() != grpcmw.ErrorDomain || info.GetMetadata()["name"] != testService {
		t.Fatalf("ErrorInfo = %v, want domain %s and the throttler's name", info, grpcmw.ErrorDomain)
	}
	// The breaker saw exactly the attempts that reached the server.
	cb, _ := chain.Breaker(testService)
	if m := cb.Metrics(); m.FailedCalls != int64(f.calls.Load()) {
		t.Fatalf("breaker counted %d failures, the server saw %d requests: throttled attempts counted", m.FailedCalls, f.calls.Load())
	}
}

func TestAdaptiveThrottlingConfigErrorsNameTheirPath(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`defaults: { adaptiveThrottling: { multiplier: 0.5 } }`, "defaults.adaptiveThrottling.multiplier: must be in [1, 1000], got 0.5"},
		{`defaults: { adaptiveThrottling: { maxRejectionRate: 100 } }`, "defaults.adaptiveThrottling.maxRejectionRate: must be in [0, 100), got 100"},
		{`defaults: { adaptiveThrottling: { window: 1ms } }`, "defaults.adaptiveThrottling.window: must be in [10ms, 1h], got 1ms"},
		{`defaults: { adaptiveThrottling: { k: 2 } }`, "defaults.adaptiveThrottling.k: unknown key"},
		{`services: { a.B: { methods: { M: { adaptiveThrottling: { multiplier: 3 } } } } }`,
			`services."a.B".methods.M.adaptiveThrottling.multiplier: with keyBy: service one throttler serves the whole service`},
	} {
		_, err := grpcmw.ParseConfig([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.yaml, err, tc.want)
		}
	}
	ok := `
defaults: { adaptiveThrottling: { multiplier: 1.5, window: 30s, minimumRequests: 5, maxRejectionRate: 95 } }
services:
  a.B:
    circuitBreaker: { keyBy: method }
    methods: { M: { adaptiveThrottling: { enabled: false } } }
`
	if _, err := grpcmw.ParseConfig([]byte(ok)); err != nil {
		t.Errorf("valid adaptiveThrottling: %v", err)
	}
}

// While the breaker in front is open or half-open the throttler stands
// aside (its probe reaches the backend), and once the probe has closed the
// breaker the throttler starts afresh: a backend the probe showed healthy
// gets every call, not a ramp.
func TestThrottlerStandsAsideForTheBreakerAndStartsAfreshWhenItCloses(t *testing.T) {
	f := new(faultServer)
	f.setUnary(failing(codes.Unavailable))
	addr, _ := serve(t, f)
	clock := resiliencetest.NewClock(time.Unix(0, 0))
	client, chain, _ := dial(t, addr, `
defaults:
  circuitBreaker: { slidingWindowSize: 10, minimumNumberOfCalls: 10, waitDurationInOpenState: 1s, permittedNumberOfCallsInHalfOpenState: 1 }
  retry: { enabled: false }
  adaptiveThrottling: { window: 1m, minimumRequests: 5 }
`, grpcmw.WithClock(clock))
	cb := func() *circuitbreaker.Breaker { b, _ := chain.Breaker(testService); return b }
	for i := 0; i < 1000 && (i == 0 || cb().State() != circuitbreaker.StateOpen); i++ {
		_, _ = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	}
	if cb().State() != circuitbreaker.StateOpen {
		t.Fatal("the breaker did not open on a backend that always fails")
	}
	f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		return &testgrpc.SimpleResponse{}, nil
	})
	clock.Advance(time.Second) // half-open: the next call is the probe
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
		t.Fatalf("the probe = %v, want it to reach the healthy backend (the throttler stands aside)", err)
	}
	if cb().State() != circuitbreaker.StateClosed {
		t.Fatalf("breaker %v after a good probe", cb().State())
	}
	for i := range 50 {
		if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatalf("call %d after the breaker closed = %v, want every call served (the throttler forgot the outage)", i, err)
		}
	}
}

// A THROTTLED relayed by a service one hop down is never retried, even
// where RESOURCE_EXHAUSTED is retryable.
func TestRelayedThrottledIsNeverRetried(t *testing.T) {
	f := new(faultServer)
	st, _ := status.New(codes.ResourceExhausted, "relayed").WithDetails(&errdetails.ErrorInfo{Reason: grpcmw.ReasonThrottled, Domain: grpcmw.ErrorDomain})
	f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) { return nil, st.Err() })
	addr, _ := serve(t, f)
	client, _, _ := dial(t, addr, `
defaults:
  retry: { maxAttempts: 3, initialBackoff: 1ms, maxBackoff: 1ms, retryableStatusCodes: [UNAVAILABLE, RESOURCE_EXHAUSTED] }
`)
	_, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	if grpcmw.RejectionReason(err) != grpcmw.ReasonThrottled || errors.Is(err, throttler.ErrThrottled) {
		t.Fatalf("call = %v, want the relayed THROTTLED, not matching this client's ErrThrottled", err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("the server saw %d requests, want 1: a relayed THROTTLED was retried", n)
	}
}
