package grpcmw_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meshless/meshless/circuitbreaker"
	"github.com/meshless/meshless/grpcmw"
)

// TestThreeHops: A calls B, B calls C through its own meshless client and
// returns C's errors unchanged. Once B's breaker to C is open, B answers
// CIRCUIT_OPEN; A counts it as a failure of B but never retries it.
func TestThreeHops(t *testing.T) {
	c := new(faultServer)
	c.setUnary(failing(codes.Unavailable))
	cAddr, _ := serve(t, c)
	toC, bChain, _ := dial(t, cAddr, `
defaults:
  circuitBreaker: { slidingWindowSize: 2, minimumNumberOfCalls: 2 }
  retry: { enabled: false }
`)
	b := new(faultServer)
	b.setUnary(func(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		return toC.UnaryCall(ctx, req) // the downstream error, passed on unchanged
	})
	bAddr, _ := serve(t, b)
	toB, aChain, _ := dial(t, bAddr, `
defaults:
  circuitBreaker: { slidingWindowSize: 100, minimumNumberOfCalls: 100 }
  retry: { maxAttempts: 5, initialBackoff: 1ms, maxBackoff: 1ms, retryableStatusCodes: [UNAVAILABLE] }
`)
	// Open B's breaker to C.
	for range 2 {
		_, _ = toC.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	}
	if cb, _ := bChain.Breaker(testService); cb.State() != circuitbreaker.StateOpen {
		t.Fatalf("B's breaker to C is %v", cb.State())
	}
	b.calls.Store(0)
	c.calls.Store(0)
	_, err := toB.UnaryCall(t.Context(), &testgrpc.SimpleRequest{})
	if status.Code(err) != codes.Unavailable || grpcmw.RejectionReason(err) != grpcmw.ReasonCircuitOpen {
		t.Fatalf("A got %v, want B's CIRCUIT_OPEN", err)
	}
	if errors.Is(err, circuitbreaker.ErrOpen) {
		t.Fatal("a downstream rejection matches ErrOpen at A, as if A's own breaker had refused")
	}
	if b.calls.Load() != 1 || c.calls.Load() != 0 {
		t.Fatalf("B saw %d calls, C %d: A retried a downstream rejection", b.calls.Load(), c.calls.Load())
	}
	if cb, _ := aChain.Breaker(testService); cb.Metrics().FailedCalls != 1 {
		t.Fatalf("A's breaker %+v, want the relayed CIRCUIT_OPEN counted as a failure of B", cb.Metrics())
	}
}

func TestServerSideShedding(t *testing.T) {
	cfg, err := grpcmw.ParseConfig([]byte(`
defaults:
  bulkhead: { maxConcurrentCalls: 2 }
`))
	if err != nil {
		t.Fatal(err)
	}
	shed, err := grpcmw.NewServer(cfg, grpcmw.WithPushback(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	f := new(faultServer)
	release := make(chan struct{})
	arrived := make(chan struct{}, 4)
	f.setUnary(func(context.Context, *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
		arrived <- struct{}{}
		<-release
		return &testgrpc.SimpleResponse{}, nil
	})
	addr, _ := serve(t, f, shed.ServerOptions()...)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := testgrpc.NewTestServiceClient(conn) // a plain gRPC client
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = client.UnaryCall(context.Background(), &testgrpc.SimpleRequest{})
		}()
	}
	<-arrived
	<-arrived
	var trailer metadata.MD
	_, err = client.UnaryCall(t.Context(), &testgrpc.SimpleRequest{}, grpc.Trailer(&trailer))
	if status.Code(err) != codes.ResourceExhausted || grpcmw.RejectionReason(err) != grpcmw.ReasonBulkheadFull {
		t.Fatalf("the third concurrent call = %v, want RESOURCE_EXHAUSTED + BULKHEAD_FULL", err)
	}
	if got := trailer.Get(grpcmw.PushbackTrailer); len(got) != 1 || got[0] != "250" {
		t.Fatalf("pushback trailer = %v, want 250", got)
	}
	if f.calls.Load() != 2 {
		t.Fatalf("the handler ran %d times, want 2", f.calls.Load())
	}
	close(release)
	wg.Wait()
	if bh, ok := shed.Bulkhead(testService); !ok || bh.Active() != 0 {
		t.Fatalf("server bulkhead still holds permits")
	}
	if _, err := grpcmw.NewServer(cfg, grpcmw.WithPushback(-1)); err == nil {
		t.Fatal("a negative pushback was accepted")
	}
}

func TestServerSheddingStreams(t *testing.T) {
	cfg, _ := grpcmw.ParseConfig([]byte("defaults: { bulkhead: { maxConcurrentCalls: 1 } }"))
	shed, _ := grpcmw.NewServer(cfg)
	f := new(faultServer)
	addr, _ := serve(t, f, shed.ServerOptions()...)
	conn, _ := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	client := testgrpc.NewTestServiceClient(conn)
	first, err := client.FullDuplexCall(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Send(&testgrpc.StreamingOutputCallRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Recv(); err != nil { // the handler runs: it holds the permit
		t.Fatal(err)
	}
	second, _ := client.FullDuplexCall(t.Context())
	if _, err := second.Recv(); status.Code(err) != codes.ResourceExhausted || !errorsIsFull(err) {
		t.Fatalf("second stream = %v, want it shed", err)
	}
	_ = first.CloseSend()
	_, _ = first.Recv()
}

func errorsIsFull(err error) bool { return grpcmw.RejectionReason(err) == grpcmw.ReasonBulkheadFull }
