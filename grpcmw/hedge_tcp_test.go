package grpcmw_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/grpcmw"
	"github.com/meshless/meshless/resilience"
	"github.com/meshless/meshless/resilience/resiliencetest"
)

// Over loopback TCP, without timing: the first copy hangs until it is
// cancelled, the second answers; the caller gets the second's reply, the
// server sees the first cancelled, and every permit is back when the call
// returns.
func TestHedgingOverTCP(t *testing.T) {
	f := new(faultServer)
	var n atomic.Int32
	cancelled := make(chan struct{})
	f.setUnary(func(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		if n.Add(1) == 1 {
			<-ctx.Done()
			close(cancelled)
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return &testgrpc.SimpleResponse{Username: "hedge"}, nil
	})
	addr, _ := serve(t, f)
	client, chain, _ := dial(t, addr, `
defaults:
  retry: { enabled: false }
  bulkhead: { maxConcurrentCalls: 5 }
  hedging: { maxAttempts: 2, hedgingDelay: 1ms }
`)
	resp, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	if err != nil || resp.GetUsername() != "hedge" {
		t.Fatalf("got %v, %v; want the hedge's reply", resp, err)
	}
	if bh, _ := chain.Bulkhead(testService); bh.Active() != 0 {
		t.Fatalf("%d bulkhead permits held after the call", bh.Active())
	}
	select {
	case <-cancelled:
	case <-t.Context().Done():
		t.Fatal("the losing copy was never cancelled at the server")
	}
	if n.Load() != 2 {
		t.Fatalf("%d calls reached the server, want 2", n.Load())
	}
}

// A meshless rejection is never hedged: a server's RATE_LIMITED is an
// answer that ends the call, even with RESOURCE_EXHAUSTED non-fatal; and a
// copy refused by this client's own bulkhead sends no more copies.
func TestHedgingNeverHedgesARejection(t *testing.T) {
	cfg, err := grpcmw.ParseConfig([]byte(`defaults: { rateLimiter: { limitForPeriod: 1, limitRefreshPeriod: 1h } }`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := grpcmw.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var arrived atomic.Int32
	count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		arrived.Add(1)
		return h(ctx, req)
	}
	f := new(faultServer)
	addr, _ := serve(t, f, grpc.ChainUnaryInterceptor(count, srv.UnaryServerInterceptor()))
	client, _, _ := dial(t, addr, `
defaults:
  retry: { enabled: false }
  hedging: { maxAttempts: 5, hedgingDelay: 1h, nonFatalStatusCodes: [UNAVAILABLE, RESOURCE_EXHAUSTED] }
`)
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	arrived.Store(0)
	_, err = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	if status.Code(err) != codes.ResourceExhausted || grpcmw.RejectionReason(err) != grpcmw.ReasonRateLimited {
		t.Fatalf("got %v, want the server's RATE_LIMITED", err)
	}
	// A non-fatal RESOURCE_EXHAUSTED would have sent the next copy at once.
	if arrived.Load() != 1 {
		t.Fatalf("%d copies arrived, want 1: RATE_LIMITED was hedged", arrived.Load())
	}

	// The client's own bulkhead: one slot held, so the first copy is
	// refused and no other copy goes.
	f2 := new(faultServer)
	addr2, _ := serve(t, f2)
	client2, chain2, _ := dial(t, addr2, `
defaults:
  retry: { enabled: false }
  bulkhead: { maxConcurrentCalls: 1 }
  hedging: { maxAttempts: 3, hedgingDelay: 1ms }
`)
	if _, err := client2.EmptyCall(t.Context(), &testgrpc.Empty{}); err != nil { // creates the bulkhead
		t.Fatal(err)
	}
	bh, _ := chain2.Bulkhead(testService)
	_, hold, _ := bh.Enter(t.Context())
	_, err = client2.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	_ = bh.Exit(t.Context(), hold, resilience.Result{})
	if grpcmw.RejectionReason(err) != grpcmw.ReasonBulkheadFull || f2.calls.Load() != 0 {
		t.Fatalf("got %v with %d calls at the server; want BULKHEAD_FULL and none", err, f2.calls.Load())
	}
}

// Each hedged copy is one attempt through the pipeline of order.go, inside
// the overall timeout: the events of a call whose first copy fails with a
// non-fatal code and whose second answers.
func TestTheOrderOfEventsWhenHedging(t *testing.T) {
	f := new(faultServer)
	var n atomic.Int32
	f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		if n.Add(1) == 1 {
			return nil, status.Error(codes.Unavailable, "once")
		}
		return &testgrpc.SimpleResponse{}, nil
	})
	addr, _ := serve(t, f)
	obs := new(resiliencetest.Observer)
	client, _, _ := dial(t, addr, `
defaults:
  retry: { enabled: false }
  rateLimiter: { limitForPeriod: 100, limitRefreshPeriod: 1h }
  hedging: { maxAttempts: 2, hedgingDelay: 1h }
`, grpcmw.WithObserver(obs))
	if _, err := client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"rate_limiter:acquired", "throttler:acquired", "bulkhead:acquired", "timeout/attempt:call", "bulkhead:released", "circuit_breaker:call",
		"hedging:hedge",
		"rate_limiter:acquired", "throttler:acquired", "bulkhead:acquired", "timeout/attempt:call", "bulkhead:released", "circuit_breaker:call",
		"hedging:hedge_done", "timeout/overall:call", "call:call",
	}
	if got := obs.Trace(); !slices.Equal(got, want) {
		t.Fatalf("events:\n%v\nwant:\n%v", got, want)
	}
}
