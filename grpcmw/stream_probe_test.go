package grpcmw_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// A long-lived server-streaming call admitted as a half-open probe whose
// server sends its header and then nothing (a watch with nothing to say
// yet): the header the caller reads is the probe's verdict, a success, as
// a first response is (it commits the call too), so the probe's place is
// given back and a recovered backend closes the breaker while the watch
// stays open. (Only a first response message settled a probe: the watch
// held its place until it ended, for minutes, and the breaker stayed
// HALF_OPEN, refusing every call past the other probe.)
func TestAWatchThatOnlySentItsHeaderDoesNotHoldItsProbe(t *testing.T) {
	for _, retries := range []string{"retry: { enabled: false }", "retry: { maxAttempts: 3 }"} {
		t.Run(retries, func(t *testing.T) {
			f := new(faultServer)
			addr, _ := serve(t, f)
			clk := resiliencetest.NewClock(time.Unix(0, 0))
			client, chain, _ := dial(t, addr, `
defaults:
  circuitBreaker: { slidingWindowSize: 4, minimumNumberOfCalls: 4, waitDurationInOpenState: 10s, permittedNumberOfCallsInHalfOpenState: 2 }
  `+retries+`
retryThrottling: { enabled: false }
`, grpcmw.WithClock(clk))
			f.setUnary(failing(codes.Internal)) // a failure the retry policy does not retry
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
			// The backend has recovered. A watch takes the first probe, sends
			// its header and nothing more while the test runs.
			f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
				return &testgrpc.SimpleResponse{}, nil
			})
			endWatch := make(chan struct{})
			f.setStream(func(_ *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
				if err := s.SendHeader(metadata.Pairs("watch", "on")); err != nil {
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
			if md, err := watch.Header(); err != nil || md.Get("watch") == nil {
				t.Fatalf("the watch's Header() = %v, %v; want its header", md, err)
			}
			// One unary probe is enough to close it now, and the next call is
			// admitted.
			for i := range 2 {
				if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
					t.Fatalf("unary call %d beside the watch = %v, want it admitted and answered (breaker %v)", i+1, err, cb.State())
				}
			}
			if cb.State() != circuitbreaker.StateClosed {
				t.Fatalf("breaker %v with the watch still open, want CLOSED", cb.State())
			}
		})
	}
}
