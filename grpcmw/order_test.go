package grpcmw_test

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// The order of doc.go holds on the stream path as on the unary path
// (TestTheOrderOfEvents): both run through one attempt pipeline.
func TestTheOrderOfEventsOnAStream(t *testing.T) {
	f := new(faultServer)
	f.setStream(func(req *testgrpc.StreamingOutputCallRequest, s testgrpc.TestService_StreamingOutputCallServer) error {
		if f.calls.Load() == 1 {
			return status.Error(codes.Unavailable, "once")
		}
		return s.Send(&testgrpc.StreamingOutputCallResponse{})
	})
	addr, _ := serve(t, f)
	obs := new(resiliencetest.Observer)
	client, _, _ := dial(t, addr, `
defaults:
  retry: { initialBackoff: 1ms, maxBackoff: 1ms }
services:
  grpc.testing.TestService:
    methods:
      StreamingOutputCall:
        timeout: { perAttempt: 10s }
`, grpcmw.WithObserver(obs))
	s, err := client.StreamingOutputCall(t.Context(), sendParams(1))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := recvAll(s); n != 1 || err != nil {
		t.Fatalf("got %d messages, %v; want 1 and the end", n, err)
	}
	got := filterTrace(obs.Trace(), "call:call", "timeout/overall:call")
	want := []string{
		"throttler:acquired", "bulkhead:acquired", "timeout/attempt:call", "bulkhead:released", "circuit_breaker:call", "retry:attempt", "retry:retry",
		"throttler:acquired", "bulkhead:acquired", "timeout/attempt:call", "bulkhead:released", "circuit_breaker:call", "retry:attempt", "retry:retry_done",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events:\n%v\nwant:\n%v", got, want)
	}
}

// The server side runs the same pipeline with its one gate, the bulkhead.
func TestTheOrderOfEventsOnTheServer(t *testing.T) {
	obs := new(resiliencetest.Observer)
	cfg, err := grpcmw.ParseConfig([]byte(`defaults: { bulkhead: { maxConcurrentCalls: 2 } }`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := grpcmw.NewServer(cfg, grpcmw.WithServerObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	f := new(faultServer)
	f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		if bh, _ := srv.Bulkhead(testService); bh.Active() != 1 {
			t.Errorf("the handler runs with %d permits out, want 1", bh.Active())
		}
		return nil, status.Error(codes.NotFound, "no")
	})
	addr, _ := serve(t, f, grpc.ChainUnaryInterceptor(srv.UnaryServerInterceptor()), grpc.ChainStreamInterceptor(srv.StreamServerInterceptor()))
	client, _, _ := dial(t, addr, `defaults: { retry: { enabled: false } }`)
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); status.Code(err) != codes.NotFound {
		t.Fatalf("err %v, want the handler's NOT_FOUND unchanged", err)
	}
	s, err := client.StreamingOutputCall(t.Context(), sendParams(2))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := recvAll(s); n != 2 || err != nil {
		t.Fatalf("got %d messages, %v; want 2 and the end", n, err)
	}
	want := []string{"bulkhead:acquired", "bulkhead:released", "bulkhead:acquired", "bulkhead:released"}
	if got := obs.Trace(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

func filterTrace(trace []string, drop ...string) []string {
	return slices.DeleteFunc(trace, func(s string) bool { return slices.Contains(drop, s) })
}
